"""Tests of the pure-torch building blocks: ghost BN, GLU blocks, attention, encoder, network."""

from __future__ import annotations

import math
from typing import TypeVar

import pytest
import torch
from conftest import numeric_tabnet

from tabsparse.nn import (
    AttentiveTransformer,
    GhostBatchNorm,
    TabNet,
    TabNetEncoder,
    TabularInput,
    column_groups,
)
from tabsparse.nn.transformers import FeatureTransformer, GLUBlock, make_linears


def assert_scaled_close(
    actual: torch.Tensor, expected: torch.Tensor, msg: str | None = None
) -> None:
    """float64 equality to rounding, relative to the tensor's scale: sums over a batch in a
    different order (fused against module paths, or another CPU's kernels) differ by a few
    units in the last place of the largest entries, which can be large next to small ones."""
    scale = max(1.0, float(expected.detach().abs().max())) if expected.numel() else 1.0
    torch.testing.assert_close(actual, expected, rtol=1e-11, atol=1e-11 * scale, msg=msg)


def reference_ghost_bn(x: torch.Tensor, bn: GhostBatchNorm) -> torch.Tensor:
    """Loop over the virtual batches ``i::k`` with torch's own batch_norm."""
    n = x.shape[0]
    k = max(1, math.ceil(n / bn.virtual_batch_size))
    out = torch.empty_like(x)
    for i in range(k):
        rows = torch.arange(i, n, k)
        assert len(rows) in (n // k, n // k + 1)  # near-equal sizes
        if len(rows) == 1:  # a one-row batch normalises to zero: the output is the bias
            out[rows] = bn.bias.expand(1, -1) + 0.0 * x[rows]
            continue
        out[rows] = torch.nn.functional.batch_norm(
            x[rows], None, None, bn.weight, bn.bias, training=True, eps=bn.eps
        )
    return out


@pytest.mark.parametrize("n", [2, 7, 128, 129, 256, 300, 1000, 1024, 1021])
def test_ghost_bn_matches_loop_over_virtual_batches(n: int) -> None:
    torch.manual_seed(0)
    bn = GhostBatchNorm(5, virtual_batch_size=128).double()
    with torch.no_grad():
        bn.weight.uniform_(0.5, 2)
        bn.bias.normal_()
    x = torch.randn(n, 5, dtype=torch.float64) * 3 + 1
    torch.testing.assert_close(bn(x), reference_ghost_bn(x, bn))


@pytest.mark.parametrize(("n", "vbs"), [(1024, 128), (1021, 128), (3, 2), (5, 2), (9, 4)])
def test_ghost_bn_gradients_and_running_stats_match_the_loop(n: int, vbs: int) -> None:
    torch.manual_seed(1)
    bn = GhostBatchNorm(3, virtual_batch_size=vbs, momentum=0.1).double()
    with torch.no_grad():
        bn.weight.uniform_(0.5, 2)
        bn.bias.normal_()
    x = (torch.randn(n, 3, dtype=torch.float64) * 2 + 1).requires_grad_()
    g = torch.randn(n, 3, dtype=torch.float64)
    (gx,) = torch.autograd.grad((bn(x) * g).sum(), x)
    x_ref = x.detach().clone().requires_grad_()
    (gx_ref,) = torch.autograd.grad((reference_ghost_bn(x_ref, bn) * g).sum(), x_ref)
    torch.testing.assert_close(gx, gx_ref)
    # first update: running stats = mean over virtual batches (of >1 row) of their statistics
    k = max(1, math.ceil(n / vbs))
    groups = [x.detach()[i::k] for i in range(k) if len(range(i, n, k)) > 1]
    torch.testing.assert_close(bn.running_mean, torch.stack([r.mean(0) for r in groups]).mean(0))
    torch.testing.assert_close(bn.running_var, torch.stack([r.var(0) for r in groups]).mean(0))


def test_ghost_bn_running_stats_equal_an_update_after_every_call() -> None:
    # statistics are recorded and folded in later; the result must equal updating every call
    torch.manual_seed(2)
    bn = GhostBatchNorm(3, virtual_batch_size=16, momentum=0.1).double()
    ref_mean, ref_var = torch.zeros(3, dtype=torch.float64), torch.ones(3, dtype=torch.float64)
    for step, n in enumerate([64, 61, 64, 33, 2, 64] * 12, start=1):  # > one flush interval
        x = torch.randn(n, 3, dtype=torch.float64) * 3 + step % 5
        bn(x)
        k = max(1, math.ceil(n / 16))
        groups = [x[i::k] for i in range(k) if len(range(i, n, k)) > 1]
        w = max(0.1, 1.0 / step)
        ref_mean = (1 - w) * ref_mean + w * torch.stack([g.mean(0) for g in groups]).mean(0)
        ref_var = (1 - w) * ref_var + w * torch.stack([g.var(0) for g in groups]).mean(0)
        if step in (1, 7, 64, 65, 72):  # reading at any point gives the up-to-date value
            torch.testing.assert_close(bn.running_mean, ref_mean)
            torch.testing.assert_close(bn.running_var, ref_var)
    state = bn.state_dict()
    torch.testing.assert_close(state["running_mean"], ref_mean)
    assert int(state["num_batches_tracked"]) == 72


def test_ghost_bn_loading_a_state_discards_unfolded_statistics() -> None:
    bn = GhostBatchNorm(2, virtual_batch_size=4)
    saved = {k: v.clone() for k, v in bn.state_dict().items()}
    bn(torch.randn(8, 2) + 5)
    bn.load_state_dict(saved)
    torch.testing.assert_close(bn.eval().running_mean, saved["running_mean"])


def test_ghost_bn_has_no_one_row_tail() -> None:
    # 129 rows with virtual batches of 128 -> two virtual batches of 65 and 64, not 128 + 1
    bn = GhostBatchNorm(3, virtual_batch_size=128)
    x = torch.randn(129, 3)
    out = bn(x)
    assert torch.isfinite(out).all()
    assert out[-1].abs().sum() > 0  # a one-row batch would normalise to exactly the bias (0)


def test_ghost_bn_eval_is_plain_batch_norm_with_running_stats() -> None:
    torch.manual_seed(0)
    bn = GhostBatchNorm(4, virtual_batch_size=16, momentum=0.5)
    for _ in range(5):
        bn(torch.randn(64, 4) * 2 + 3)
    assert torch.all(bn.running_mean > 1.5)
    assert torch.all(bn.running_var > 2.0)
    bn.eval()
    x = torch.randn(10, 4)
    expected = torch.nn.functional.batch_norm(
        x, bn.running_mean, bn.running_var, bn.weight, bn.bias, training=False, eps=bn.eps
    )
    torch.testing.assert_close(bn(x), expected)
    # no dependence on the batch: one row at a time gives the same answer
    torch.testing.assert_close(torch.cat([bn(x[i : i + 1]) for i in range(10)]), bn(x))


def test_ghost_bn_single_row_batch_does_not_crash() -> None:
    bn = GhostBatchNorm(3, virtual_batch_size=8)
    out = bn(torch.randn(1, 3))
    assert torch.isfinite(out).all()
    assert torch.isfinite(bn.running_var).all()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"num_features": 0}, "num_features=0"),
        ({"num_features": 2, "virtual_batch_size": 0}, "virtual_batch_size=0"),
        ({"num_features": 2, "momentum": 1.5}, "momentum=1.5"),
    ],
)
def test_ghost_bn_rejects_bad_settings(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        GhostBatchNorm(**kwargs)


def test_glu_block_residuals_are_scaled_by_sqrt_half() -> None:
    torch.manual_seed(0)
    fcs = make_linears(4, 4, 2)
    block = GLUBlock(fcs, first=False, virtual_batch_size=64, momentum=0.02).eval()
    x = torch.randn(6, 4)
    expected = x
    for layer in block.layers:
        expected = (expected + layer(expected)) * math.sqrt(0.5)
    torch.testing.assert_close(block(x), expected)


def test_attentive_transformer_masks_are_sparse_and_respect_prior() -> None:
    torch.manual_seed(0)
    att = AttentiveTransformer(
        n_a=8, n_groups=6, mask_type="sparsemax", virtual_batch_size=32, momentum=0.02
    )
    prior = torch.ones(64, 6)
    prior[:, 0] = 0.0  # a used-up feature (gamma = 1)
    a = torch.randn(64, 8)
    mask = att(a, prior)
    torch.testing.assert_close(mask.sum(dim=1), torch.ones(64))
    assert (mask >= 0).all()
    assert (mask == 0).any()
    # the prior multiplies the logits: the used-up feature's logit is 0, not minus infinity, so
    # it is still selected wherever the other logits are low (22 of these 64 rows)
    from tabsparse.sparsemax import sparsemax

    torch.testing.assert_close(mask, sparsemax(att.bn(att.fc(a)) * prior))
    assert 0 < int((mask[:, 0] > 0).sum()) < 64
    with pytest.raises(ValueError, match="mask_type='softmax'"):
        AttentiveTransformer(
            n_a=2, n_groups=2, mask_type="softmax", virtual_batch_size=2, momentum=0.1
        )


@pytest.mark.parametrize("mask_type", ["sparsemax", "entmax"])
def test_encoder_shapes_masks_and_sparsity_loss(mask_type: str) -> None:
    torch.manual_seed(0)
    enc = TabNetEncoder(
        input_dim=7, group_index=list(range(7)), n_d=4, n_a=5, n_steps=3, mask_type=mask_type
    )
    out = enc(torch.randn(50, 7))
    assert out.output.shape == (50, 4)
    assert out.masks.shape == (3, 50, 7)
    assert out.step_importance.shape == (3, 50)
    torch.testing.assert_close(out.masks.sum(dim=-1), torch.ones(3, 50))
    m = out.masks
    entropy = -(m * torch.log(m + 1e-15)).sum(-1).mean(-1).mean()
    torch.testing.assert_close(out.sparsity_loss, entropy)
    assert (out.output >= 0).all()  # a sum of ReLU'd decisions


def test_encoder_prior_is_relaxed_by_gamma(monkeypatch: pytest.MonkeyPatch) -> None:
    torch.manual_seed(1)
    enc = TabNetEncoder(input_dim=4, group_index=list(range(4)), n_steps=3, gamma=1.5)
    seen: list[torch.Tensor | None] = []
    for att in enc.attention:
        att.register_forward_hook(
            lambda mod, args, out: seen.append(None if args[1] is None else args[1].clone())
        )
    masks = enc(torch.randn(16, 4)).masks
    assert seen[0] is None  # a prior of ones: the first step skips the multiplication
    torch.testing.assert_close(seen[1], 1.5 - masks[0])
    torch.testing.assert_close(seen[2], (1.5 - masks[0]) * (1.5 - masks[1]))


def test_encoder_groups_share_one_mask_value() -> None:
    torch.manual_seed(0)
    enc = TabNetEncoder(input_dim=5, group_index=[0, 0, 1, 2, 2], n_steps=2).eval()
    seen: list[torch.Tensor] = []  # each step's masked input
    for step in enc.steps:
        step.register_forward_hook(lambda mod, args, out: seen.append(args[0].clone()))
    x = torch.randn(20, 5)
    out = enc(x)
    assert out.masks.shape == (2, 20, 3)
    for mask, masked in zip(out.masks, seen, strict=True):
        # channels 0 and 1 (group 0), and 3 and 4 (group 2), are scaled by one mask value
        torch.testing.assert_close(masked, x * mask[:, [0, 0, 1, 2, 2]], rtol=0, atol=1e-7)
    assert (out.masks > 0).any(dim=(0, 1)).all()  # every group is selected somewhere


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"n_steps": 0}, "n_steps=0"),
        ({"n_d": 0}, "n_d=0"),
        ({"n_shared": 0, "n_independent": 0}, "n_independent=0"),
        ({"group_index": [0, 1]}, "group_index has 2 entries"),
        ({"group_index": [0, 2, 2]}, "every group id"),
    ],
)
def test_encoder_rejects_bad_settings(kwargs: dict, message: str) -> None:
    settings = {"input_dim": 3, "group_index": [0, 1, 2], **kwargs}
    with pytest.raises(ValueError, match=message):
        TabNetEncoder(**settings)


def test_encoder_gradients_reach_every_parameter() -> None:
    torch.manual_seed(0)
    enc = TabNetEncoder(input_dim=6, group_index=list(range(6)), n_steps=2)
    out = enc(torch.randn(64, 6))
    (out.output.sum() + out.sparsity_loss).backward()
    for name, p in enc.named_parameters():
        assert p.grad is not None, name


def test_shared_layers_are_shared_across_steps() -> None:
    enc = TabNetEncoder(input_dim=6, group_index=list(range(6)), n_steps=3, n_shared=2)
    fc0 = enc.initial.shared.layers[0].fc  # type: ignore[union-attr]
    for step in enc.steps:
        assert step.shared.layers[0].fc is fc0  # type: ignore[union-attr]
        assert step.shared.layers[0].bn is not enc.initial.shared.layers[0].bn  # type: ignore[union-attr]


def test_tabular_input_standardises_and_learns_missing_values() -> None:
    m = TabularInput(numeric_mean=[1.0, 0.0], numeric_std=[2.0, 1.0], cardinalities=[])
    x = torch.tensor([[3.0, float("nan")], [1e30, -2.0]])
    out = m(x, torch.zeros(2, 0, dtype=torch.int64))
    torch.testing.assert_close(out[0, 0], torch.tensor(1.0))
    assert out[0, 1] == m.missing_value[1]
    assert out[1, 0] == m.clip  # extreme values are clipped, never inf
    out.sum().backward()
    assert m.missing_value.grad is not None and m.missing_value.grad[1] == 1.0


def test_tabular_input_one_embedding_lookup_with_offsets() -> None:
    torch.manual_seed(0)
    m = TabularInput(numeric_mean=[], numeric_std=[], cardinalities=[4, 3], cat_emb_dim=2)
    codes = torch.tensor([[2, 2], [0, 1], [3, 2]])
    out = m(torch.zeros(3, 0), codes)
    assert out.shape == (3, 4)
    w = m.embedding.weight  # type: ignore[union-attr]
    torch.testing.assert_close(out[0, :2], w[2])
    torch.testing.assert_close(out[0, 2:], w[4 + 2])
    # missing (0) and unseen (1) slots start at zero
    torch.testing.assert_close(out[1], torch.zeros(4))


def test_column_groups_validation() -> None:
    assert column_groups(4, [[1, 3]]) == [1, 0, 2, 0]
    with pytest.raises(ValueError, match="more than one group"):
        column_groups(4, [[0, 1], [1, 2]])
    with pytest.raises(ValueError, match="column 7"):
        column_groups(4, [[7]])
    with pytest.raises(ValueError, match="empty group"):
        column_groups(4, [[]])


def test_network_importances_rows_sum_to_one_and_map_to_columns() -> None:
    torch.manual_seed(0)
    net = TabNet(
        numeric_columns=[0, 2],
        categorical_columns=[1],
        numeric_mean=[0.0, 0.0],
        numeric_std=[1.0, 1.0],
        cardinalities=[5],
        n_outputs=2,
        cat_emb_dim=3,
        grouped_features=[[0, 2]],
        n_steps=2,
    ).eval()
    out = net(torch.randn(30, 2), torch.randint(0, 5, (30, 1)))
    col = net.column_masks(out.masks)
    assert col.shape == (2, 30, 3)
    torch.testing.assert_close(col.sum(-1), torch.ones(2, 30))
    torch.testing.assert_close(col[..., 0], col[..., 2])  # grouped columns share the mass
    imp = net.importances(out.masks, out.step_importance)
    torch.testing.assert_close(imp.sum(-1), torch.ones(30))
    # the paper's aggregate: sum_b eta_b M_b, normalised per row; rows whose decision outputs
    # are all zero fall back to the mean of their masks
    eta = out.step_importance.clone()
    eta[:, :3] = 0.0
    expected = torch.einsum("snc,sn->nc", out.masks, eta)
    expected = expected / expected.sum(-1, keepdim=True).clamp_min(1e-30)
    expected[:3] = out.masks[:, :3].mean(0)
    torch.testing.assert_close(net.importances(out.masks, eta), net.column_masks(expected))


def test_network_eval_output_does_not_depend_on_batch_composition() -> None:
    torch.manual_seed(0)
    net = numeric_tabnet(2, 1).eval()
    x = torch.randn(9, 2)
    codes = torch.zeros(9, 0, dtype=torch.int64)
    full = net(x, codes).logits
    single = torch.cat([net(x[i : i + 1], codes[i : i + 1]).logits for i in range(9)])
    torch.testing.assert_close(full, single)


_Module = TypeVar("_Module", bound=torch.nn.Module)


def _randomise(module: _Module) -> _Module:
    """Every parameter drawn from N(0, 1), so that no gradient term vanishes by its
    initialisation (BN weights of 1 and biases of 0 would hide errors)."""
    with torch.no_grad():
        for p in module.parameters():
            p.normal_()
    return module


def _reference_feature_transformer(ft: FeatureTransformer, x: torch.Tensor) -> torch.Tensor:
    """The feature transformer layer by layer from the modules: ``(x + glu(bn(fc(x)))) *
    sqrt(0.5)`` with each ghost batch norm called as a module (recording its statistics)."""
    for fc, bn, residual in ft.glu_layers():
        out = torch.nn.functional.glu(bn(fc(x)), dim=-1)
        x = (x + out) * math.sqrt(0.5) if residual else out
    return x


@pytest.mark.parametrize(("n_shared", "n_independent"), [(2, 2), (0, 2), (2, 0), (1, 1)])
@pytest.mark.parametrize("n", [64, 60, 3, 61, 17])
def test_feature_transformer_equals_the_layer_by_layer_graph(
    n_shared: int, n_independent: int, n: int
) -> None:
    """Training mode (the stacked affines of equal virtual batches for 64, 60 and 3 rows; the
    ragged form for 61 and 17) and eval mode: the same values, gradients and running
    statistics as the layers written out one by one."""
    torch.manual_seed(0)

    def make() -> FeatureTransformer:
        return FeatureTransformer(
            shared=make_linears(10, 12, n_shared),
            n_in=10,
            n_out=12,
            n_independent=n_independent,
            virtual_batch_size=16,
            momentum=0.1,
        ).double()

    ft, ref = make(), make()
    _randomise(ft)
    ref.load_state_dict(ft.state_dict())
    x = torch.randn(n, 10, dtype=torch.float64, requires_grad=True)
    x_ref = x.detach().clone().requires_grad_()
    for _ in range(2):  # two steps: running statistics are recorded by both paths
        out, out_ref = ft(x), _reference_feature_transformer(ref, x_ref)
        grad = torch.randn_like(out)
        out.backward(grad)
        out_ref.backward(grad)
    torch.testing.assert_close(out, out_ref)
    torch.testing.assert_close(x.grad, x_ref.grad)
    for (name, p), q in zip(ft.named_parameters(), ref.parameters(), strict=True):
        torch.testing.assert_close(p.grad, q.grad, msg=name)
    for (name, a), b in zip(ft.state_dict().items(), ref.state_dict().values(), strict=True):
        torch.testing.assert_close(a, b, msg=name)
    ft.eval()
    ref.eval()
    torch.testing.assert_close(ft(x), _reference_feature_transformer(ref, x))


@pytest.mark.parametrize("n", [64, 61])
def test_attentive_transformer_equals_the_layer_by_layer_graph(n: int) -> None:
    """``sparsemax(prior * bn(fc(a)))`` with the modules called one by one: same masks,
    gradients and running statistics (64 rows: even virtual batches; 61: ragged)."""
    from tabsparse.sparsemax import sparsemax

    def make() -> AttentiveTransformer:
        torch.manual_seed(1)
        at = AttentiveTransformer(
            n_a=8, n_groups=13, mask_type="sparsemax", virtual_batch_size=16, momentum=0.1
        ).double()
        return _randomise(at)

    at, ref = make(), make()
    a = torch.randn(n, 8, dtype=torch.float64, requires_grad=True)
    a_ref = a.detach().clone().requires_grad_()
    prior = torch.rand(n, 13, dtype=torch.float64) + 0.5
    out = at(a, prior)
    out_ref = sparsemax(ref.bn(ref.fc(a_ref)) * prior, -1)
    grad = torch.randn_like(out)
    out.backward(grad)
    out_ref.backward(grad)
    torch.testing.assert_close(out, out_ref)
    torch.testing.assert_close(a.grad, a_ref.grad)
    for (name, p), q in zip(at.named_parameters(), ref.parameters(), strict=True):
        torch.testing.assert_close(p.grad, q.grad, msg=name)
    for (name, x), y in zip(at.state_dict().items(), ref.state_dict().values(), strict=True):
        torch.testing.assert_close(x, y, msg=name)


def test_mask_entropy_matches_the_formula_and_gradcheck() -> None:
    """A step's share of the sparsity loss, summed over the steps: the mean over steps and
    rows of ``-sum_j m_j log(m_j + eps)``, differentiable (gradcheck)."""
    from tabsparse.nn import functional as F
    from tabsparse.sparsemax import sparsemax

    masks = sparsemax(torch.randn(3, 40, 7, dtype=torch.float64) * 2, -1)  # exact zeros too
    masks.requires_grad_()
    ref_masks = masks.detach().clone().requires_grad_()
    x = torch.randn(40, 7, dtype=torch.float64)

    def entropy(m: torch.Tensor) -> torch.Tensor:
        shares = [
            F.mask_outputs(s, None, x, 1.3, None, 1e-15, m.shape[0] * m.shape[1])[2] for s in m
        ]
        return torch.stack(shares).sum()  # type: ignore[arg-type]

    value = entropy(masks)
    ref = -(ref_masks * torch.log(ref_masks + 1e-15)).sum(-1).mean()
    torch.testing.assert_close(value, ref)
    value.backward(torch.tensor(0.3, dtype=torch.float64))
    ref.backward(torch.tensor(0.3, dtype=torch.float64))
    torch.testing.assert_close(masks.grad, ref_masks.grad)
    positive = torch.softmax(torch.randn(2, 5, 4, dtype=torch.float64), -1).requires_grad_()
    x = torch.randn(5, 4, dtype=torch.float64)
    assert torch.autograd.gradcheck(entropy, (positive,))


def test_training_after_a_prediction_under_inference_mode() -> None:
    # cached constants of the functional code (the residual scales) first made by a prediction
    # under torch.inference_mode must still serve a training step's backward, on the ragged
    # (60 rows) and the even (64 rows) virtual-batch paths
    torch.manual_seed(0)
    enc = TabNetEncoder(
        input_dim=6, group_index=list(range(6)), n_d=4, n_a=4, n_steps=2, virtual_batch_size=8
    )
    enc.eval()
    with torch.inference_mode():
        enc(torch.randn(60, 6))
    enc.train()
    for n in (60, 64):
        out = enc(torch.randn(n, 6), with_masks=True)
        (out.output.sum() + out.sparsity_loss).backward()
        grads = [p.grad for p in enc.parameters() if p.requires_grad]
        assert all(g is not None and torch.isfinite(g).all() for g in grads)
