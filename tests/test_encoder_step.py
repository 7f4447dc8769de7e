"""The one-node training step of the encoder (tabsparse.nn.encoder_step): equal to autograd over
the functional code (values, gradients, running statistics), gradcheck in float64, autograd's
memory rules, and a plan kept on the encoder that follows every change of its structure."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch
from test_nn import _randomise, assert_scaled_close
from torch import nn

from tabsparse.nn import AttentiveTransformer, TabNet, TabNetEncoder, encoder_step
from tabsparse.nn import functional as F


def _count_steps(mp: pytest.MonkeyPatch, calls: list[int]) -> None:
    original = encoder_step.EncoderStep.forward
    mp.setattr(encoder_step.EncoderStep, "forward", lambda *a: calls.append(1) or original(*a))


@pytest.mark.parametrize("first_mask", ["per_row", "shared"])
@pytest.mark.parametrize("mask_type", ["sparsemax", "entmax"])
@pytest.mark.parametrize("groups", [[0, 1, 2, 3, 4, 5], [0, 0, 1, 2, 2, 3]])
@pytest.mark.parametrize(
    ("n", "use_masks", "keep"),
    [
        (64, True, False),
        (64, False, False),
        (48, False, False),
        (61, False, False),
        (64, False, True),
    ],
)
def test_one_node_encoder_equals_autograd_over_the_functional_code(
    first_mask: str, mask_type: str, groups: list[int], n: int, use_masks: bool, keep: bool
) -> None:
    """A training step where nothing reads the masks (64 and 48 rows: equal virtual batches)
    runs as one node; the reference runs the modules (autograd over the functional code):
    the same outputs, gradients of the input and every parameter, and running statistics.
    61 rows, or a loss that reads the masks, take the modules' path. With ``keep`` the loss
    also reads every step's decision (as the pretraining decoder does). A shared first mask
    (no initial transformer) takes the same paths."""

    def make() -> TabNetEncoder:
        torch.manual_seed(3)
        enc = TabNetEncoder(
            input_dim=6,
            group_index=groups,
            n_d=4,
            n_a=5,
            n_steps=3,
            mask_type=mask_type,
            first_mask=first_mask,
            virtual_batch_size=16,
            momentum=0.1,
        ).double()
        return _randomise(enc)

    enc, ref = make(), make()
    ref._plan = lambda x: None  # type: ignore[method-assign]
    whole: list[int] = []
    x = torch.randn(n, 6, dtype=torch.float64, requires_grad=True)
    x_ref = x.detach().clone().requires_grad_()
    for _ in range(2):  # two steps: running statistics are recorded by both paths
        with pytest.MonkeyPatch.context() as mp:
            _count_steps(mp, whole)
            out = enc(x, with_masks=use_masks, keep_decisions=keep)
        out_ref = ref(x_ref, keep_decisions=keep)
        losses = []
        for o in (out, out_ref):
            g = torch.Generator().manual_seed(4)
            loss = (o.output * torch.randn(o.output.shape, generator=g, dtype=o.output.dtype)).sum()
            loss = loss + 0.7 * o.sparsity_loss
            if use_masks:
                weights = torch.randn(o.masks.shape, generator=g, dtype=o.masks.dtype)
                loss = loss + (o.masks * weights).sum() + o.step_importance.square().sum()
            if keep:
                assert o.decisions is not None
                weights = torch.randn(o.decisions.shape, generator=g, dtype=o.decisions.dtype)
                loss = loss + (o.decisions * weights).sum()
            losses.append(loss)
        losses[0].backward()
        losses[1].backward()
    assert len(whole) == (2 if n != 61 and not use_masks else 0)
    if not use_masks:
        assert out.masks.numel() == 0 and out.step_importance.numel() == 0
        out, out_ref = out[::2], out_ref[::2]  # output, sparsity loss and decisions
    for a, b in zip(out, out_ref, strict=True):
        if a is not None:
            assert_scaled_close(a, b)
    assert_scaled_close(x.grad, x_ref.grad)
    for (name, p), q in zip(enc.named_parameters(), ref.parameters(), strict=True):
        assert_scaled_close(p.grad, q.grad, msg=name)
    for (name, a), b in zip(enc.state_dict().items(), ref.state_dict().values(), strict=True):
        assert_scaled_close(a, b, msg=name)


@pytest.mark.parametrize("mask_type", ["sparsemax", "entmax"])
def test_one_node_encoder_with_the_split_glu(
    monkeypatch: pytest.MonkeyPatch, mask_type: str
) -> None:
    """The split GLU (``tabsparse.nn.glu``, taken on AVX-512 / AVX2 CPUs for narrow layers of
    large batches) forced at the test's small sizes: the hand-written backward through it still
    equals autograd."""
    from tabsparse.nn import glu as glu_module

    taken = []
    split = glu_module._glu_backward_split
    monkeypatch.setattr(glu_module, "_register_bytes", lambda: 1 << 20)
    monkeypatch.setattr(glu_module, "_MIN_VALUES", 0)
    monkeypatch.setattr(glu_module, "_glu_backward_split", lambda *a: taken.append(1) or split(*a))
    test_one_node_encoder_equals_autograd_over_the_functional_code(
        "per_row", mask_type, [0, 0, 1, 2, 2, 3], 64, False, True
    )
    assert taken  # the hand-written backward took the split path


def _network_pair(
    n_shared: int, n_independent: int, n_steps: int, mask_type: str
) -> tuple[TabNet, TabNet]:
    """Two equal float64 TabNets with numeric and categorical inputs (embeddings of two
    channels, so the masks are spread over channel groups); the second never takes the
    one-node encoder path."""

    def make() -> TabNet:
        torch.manual_seed(7)
        net = TabNet(
            numeric_columns=[0, 2, 3],
            categorical_columns=[1, 4],
            numeric_mean=[0.0, 0.0, 0.0],
            numeric_std=[1.0, 1.0, 1.0],
            cardinalities=[5, 4],
            n_outputs=3,
            cat_emb_dim=2,
            n_d=4,
            n_a=3,
            n_steps=n_steps,
            n_shared=n_shared,
            n_independent=n_independent,
            mask_type=mask_type,
            virtual_batch_size=16,
            momentum=0.1,
        ).double()
        return _randomise(net)

    net, ref = make(), make()
    ref.encoder._plan = lambda x: None  # type: ignore[method-assign]
    return net, ref


_CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA is not available")


@pytest.mark.parametrize(
    ("n_shared", "n_independent", "n_steps", "mask_type", "device"),
    [
        (2, 2, 3, "sparsemax", "cpu"),
        (0, 2, 1, "sparsemax", "cpu"),
        (2, 0, 2, "entmax", "cpu"),
        (1, 1, 4, "entmax", "cpu"),
        pytest.param(2, 2, 3, "sparsemax", "cuda", marks=_CUDA),
        pytest.param(1, 1, 2, "entmax", "cuda", marks=_CUDA),
    ],
)
def test_one_node_encoder_equals_the_modules_in_training(
    n_shared: int, n_independent: int, n_steps: int, mask_type: str, device: str
) -> None:
    """A training step (nothing reads the masks) runs the whole encoder as one autograd node:
    the logits, the sparsity loss, the gradients of every parameter (embeddings and the
    shared layers included) and the running statistics equal those of the modules, over
    two steps with an optimiser between them (on the CPU and, where there is one, a GPU)."""
    net, ref = (m.to(device) for m in _network_pair(n_shared, n_independent, n_steps, mask_type))
    calls: list[int] = []
    g = torch.Generator().manual_seed(8)
    numeric = torch.randn(64, 3, generator=g, dtype=torch.float64).to(device)
    codes = (torch.randint(0, 5, (64, 2), generator=g) % torch.tensor([5, 4])).to(device)
    target = torch.randint(0, 3, (64,), generator=g).to(device)
    opts = [torch.optim.SGD(m.parameters(), lr=0.1) for m in (net, ref)]
    for _ in range(2):
        outs = []
        for model, opt in zip((net, ref), opts, strict=True):
            with pytest.MonkeyPatch.context() as mp:
                _count_steps(mp, calls)
                out = model(numeric, codes, with_masks=False)
            loss = torch.nn.functional.cross_entropy(out.logits, target)
            opt.zero_grad()
            (loss + 0.3 * out.sparsity_loss).backward()
            outs.append(out)
        assert_scaled_close(outs[0].logits, outs[1].logits)
        assert_scaled_close(outs[0].sparsity_loss, outs[1].sparsity_loss)
        for (name, p), q in zip(net.named_parameters(), ref.parameters(), strict=True):
            assert (p.grad is None) == (q.grad is None), name
            if p.grad is not None:
                assert_scaled_close(p.grad, q.grad, msg=name)
        for opt in opts:
            opt.step()
    assert len(calls) == 2  # the reference never took the one-node path
    for (name, a), b in zip(net.state_dict().items(), ref.state_dict().values(), strict=True):
        assert_scaled_close(a, b, msg=name)


@pytest.mark.parametrize(
    ("mask_type", "first_mask"),
    [("sparsemax", "per_row"), ("entmax", "per_row"), ("sparsemax", "shared")],
)
def test_one_node_encoder_gradcheck(mask_type: str, first_mask: str) -> None:
    """The hand-written backward against finite differences and against autograd over
    :func:`tabsparse.nn.functional.encoder_training`, for the input and every parameter
    (shared layers feed every transformer: their gradients are sums), in float64."""
    torch.manual_seed(9)
    enc = TabNetEncoder(
        input_dim=4,
        group_index=[0, 1, 1, 2],
        n_d=2,
        n_a=3,
        n_steps=2,
        virtual_batch_size=4,
        mask_type=mask_type,
        first_mask=first_mask,
    ).double()
    _randomise(enc)
    x = torch.randn(8, 4, dtype=torch.float64, requires_grad=True)
    plan = enc._plan(x)
    assert plan is not None and len(plan.params) == len(list(enc.parameters()))
    params = [p.detach().clone().requires_grad_() for p in plan.params]

    def run(x: torch.Tensor, *ps: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return encoder_step.EncoderStep.apply(x, plan, False, *ps)[:2]  # type: ignore[no-any-return]

    def reference(x: torch.Tensor, *ps: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return F.encoder_training(x, ps, plan.layout, F.search_masks)

    assert torch.autograd.gradcheck(run, (x, *params))
    outs, refs = run(x, *params), reference(x, *params)
    g = torch.Generator().manual_seed(1)
    weights = [torch.randn(o.shape, generator=g, dtype=o.dtype) for o in outs]
    grads = torch.autograd.grad(
        sum((o * w).sum() for o, w in zip(outs, weights, strict=True)), (x, *params)
    )
    grads_ref = torch.autograd.grad(
        sum((o * w).sum() for o, w in zip(refs, weights, strict=True)), (x, *params)
    )
    for a, b in zip((*outs, *grads), (*refs, *grads_ref), strict=True):
        assert_scaled_close(a, b)


def test_one_node_encoder_frees_like_autograd_and_follows_changes() -> None:
    """The one-node encoder keeps its activations as autograd does (a retained graph can be
    differentiated again; otherwise a second backward is refused, and so is one after an
    in-place change of a saved parameter); the kept plan follows a replaced parameter and a
    change of dtype."""
    enc = TabNetEncoder(input_dim=5, group_index=list(range(5)), n_d=3, n_a=3, n_steps=2)
    x = torch.randn(32, 5)
    out = enc(x, with_masks=False)
    loss = out.output.sum() + out.sparsity_loss
    loss.backward(retain_graph=True)
    first = [p.grad.clone() for p in enc.parameters() if p.grad is not None]
    loss.backward()
    second = [p.grad for p in enc.parameters() if p.grad is not None]
    for a, b in zip(first, second, strict=True):
        torch.testing.assert_close(b, 2 * a)
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        loss.backward()
    out = enc(x, with_masks=False)
    with torch.no_grad():
        enc.shared[0].weight.mul_(2.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        out.output.sum().backward()
    attention = enc.attention[1]
    assert isinstance(attention, AttentiveTransformer)
    attention.fc.weight = nn.Parameter(torch.randn(5, 3))
    enc(x, with_masks=False).output.sum().backward()
    assert attention.fc.weight.grad is not None  # the new parameter, not the old one
    enc.double()
    out = enc(x.double(), with_masks=False)
    assert out.output.dtype == torch.float64
    out.output.sum().backward()
    assert attention.fc.weight.grad is not None and attention.fc.weight.dtype == torch.float64


def _encoder(seed: int) -> TabNetEncoder:
    torch.manual_seed(seed)
    return _randomise(
        TabNetEncoder(
            input_dim=6, group_index=list(range(6)), n_d=4, n_a=4, n_steps=2, virtual_batch_size=16
        ).double()
    )


@pytest.mark.parametrize("change", ["parameter", "linear", "batch_norm", "attention", "setting"])
def test_replacing_a_part_after_a_training_step_is_honoured(change: str) -> None:
    """After a training step (which keeps a plan on the encoder), replacing a parameter, a
    submodule or a batch norm's setting gives the result of a freshly built encoder with the
    same weights and settings."""
    x = torch.randn(64, 6, dtype=torch.float64)
    enc = _encoder(0)
    enc(x, with_masks=False).output.sum().backward()
    assert enc.__dict__["_cached_plan"].plan is not None
    torch.manual_seed(5)
    step = enc.steps[1]
    if change == "parameter":
        enc.shared[1].weight = nn.Parameter(torch.randn(16, 8, dtype=torch.float64))
    elif change == "linear":
        layer = step.independent.layers[0]  # type: ignore[union-attr]
        layer.fc = nn.Linear(8, 16, bias=False).double()
    elif change == "batch_norm":
        layer = step.independent.layers[1]  # type: ignore[union-attr]
        layer.bn = type(layer.bn)(16, virtual_batch_size=16, momentum=0.3).double()
    elif change == "attention":
        enc.attention[0] = AttentiveTransformer(
            n_a=4, n_groups=6, mask_type="entmax", virtual_batch_size=16, momentum=0.02
        ).double()
    else:
        for bn in enc.modules():
            if hasattr(bn, "virtual_batch_size"):
                bn.virtual_batch_size = 32  # type: ignore[assignment]
    fresh = _encoder(1)
    if change == "attention":
        fresh.attention[0] = AttentiveTransformer(
            n_a=4, n_groups=6, mask_type="entmax", virtual_batch_size=16, momentum=0.02
        ).double()
    if change == "setting":
        for bn in fresh.modules():
            if hasattr(bn, "virtual_batch_size"):
                bn.virtual_batch_size = 32  # type: ignore[assignment]
    if change == "batch_norm":
        layer = fresh.steps[1].independent.layers[1]  # type: ignore[union-attr]
        layer.bn = type(layer.bn)(16, virtual_batch_size=16, momentum=0.3).double()
    fresh.load_state_dict(enc.state_dict())
    out, out_fresh = enc(x, with_masks=False), fresh(x, with_masks=False)
    assert_scaled_close(out.output, out_fresh.output)
    assert_scaled_close(out.sparsity_loss, out_fresh.sparsity_loss)
    enc.zero_grad()
    fresh.zero_grad()
    out, out_fresh = enc(x, with_masks=False), fresh(x, with_masks=False)
    (out.output.sum() + out.sparsity_loss).backward()
    (out_fresh.output.sum() + out_fresh.sparsity_loss).backward()
    for (name, p), q in zip(enc.named_parameters(), fresh.parameters(), strict=True):
        assert_scaled_close(p.grad, q.grad, msg=name)


def test_importing_tabsparse_nn_registers_no_global_hooks() -> None:
    """Importing the building blocks and running a training step leaves PyTorch's global
    module, parameter and buffer hooks as they were."""
    code = """
import torch.nn.modules.module as m
names = [n for n in dir(m) if n.startswith("_global_") and isinstance(getattr(m, n), dict)]
before = {n: len(getattr(m, n)) for n in names}
import torch
import tabsparse.nn
enc = tabsparse.nn.TabNetEncoder(input_dim=4, group_index=[0, 1, 2, 3], n_steps=2)
enc(torch.randn(256, 4), with_masks=False).output.sum().backward()
after = {n: len(getattr(m, n)) for n in names}
assert len(names) >= 6, names
print(before == after, sorted(n for n in names if before[n] != after[n]))
"""
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "True []"
