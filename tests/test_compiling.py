"""``compile``: the traced training step equals the eager one, and the ``"auto"`` rule."""

from __future__ import annotations

import pickle
import re
import warnings
from typing import Any

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from conftest import ce, make_data, make_net
from fixed_helpers import with_fixed

import tabsparse.compiling as compiling
from tabsparse import TabNetClassifier, TabNetRegressor
from tabsparse.compiling import AUTO_MIN_SECONDS, StepCompiler, check_compile
from tabsparse.nn.ghost_bn import flush_statistics
from tabsparse.nn.network import TabNet
from tabsparse.optim import AdamW
from tabsparse.sparsemax import entmax15, entmax15_sorted, sparsemax, sparsemax_sorted
from tabsparse.training import TrainConfig, Trainer

CUDA = torch.device("cuda")  # a device object only: no GPU is needed to build it
CPU = torch.device("cpu")


@pytest.fixture(autouse=True)
def _aot_eager(monkeypatch: pytest.MonkeyPatch) -> None:
    """Graph capture and AOT autograd as inductor gets them, without generating C++ (seconds
    per graph instead of a minute)."""
    monkeypatch.setattr(compiling, "BACKEND", "aot_eager")


def _network(mask_type: str = "sparsemax", ragged: bool = False) -> TabNet:
    torch.manual_seed(0)
    net = TabNet(
        numeric_columns=list(range(12)),
        categorical_columns=[12, 13],
        numeric_mean=[0.0] * 12,
        numeric_std=[1.0] * 12,
        cardinalities=[5, 7],
        n_outputs=3,
        n_d=8,
        n_a=8,
        n_steps=3,
        mask_type=mask_type,
        virtual_batch_size=48 if ragged else 32,
        momentum=0.1,
    ).double()
    return net.train()


def _losses(net: TabNet, compiled: bool, steps: int = 6) -> list[float]:
    """Adam steps on fixed batches; the eager network takes its fused path (float64, equal
    virtual batches), the compiled one the module path with the sort-based sparsemax."""
    g = torch.Generator().manual_seed(1)
    numeric = torch.randn(4 * 128, 12, generator=g, dtype=torch.float64)
    numeric[::7, 3] = float("nan")  # missing values: the learned value enters the graph
    codes = torch.randint(0, 5, (4 * 128, 2), generator=g)
    target = torch.randint(0, 3, (4 * 128,), generator=g)
    opt = AdamW(net.parameters(), lr=0.02, weight_decay=0.0, flat=True)

    def step(x: torch.Tensor, c: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, Any]:
        out = net(x, c, with_masks=False)
        return F.cross_entropy(out.logits, y), out.sparsity_loss

    run = (
        torch.compile(step, backend="aot_eager", fullgraph=True, dynamic=False)
        if compiled
        else step
    )
    losses = []
    for i in range(steps):
        rows = slice((i % 4) * 128, (i % 4 + 1) * 128)
        loss, sparsity = run(numeric[rows], codes[rows], target[rows])
        opt.zero_grad()
        (loss + 1e-3 * sparsity).backward()
        opt.step()
        losses.append(float(loss.detach()))
    opt.release()
    flush_statistics(net)
    return losses


@pytest.mark.parametrize(("mask_type", "ragged"), [("sparsemax", False), ("entmax", True)])
def test_compiled_step_equals_the_eager_step(mask_type: str, ragged: bool) -> None:
    """One graph (``fullgraph=True`` fails on any break), and in float64 the same losses,
    weights and batch-norm running statistics as the eager fused step after six updates."""
    eager, compiled = _network(mask_type, ragged), _network(mask_type, ragged)
    np.testing.assert_allclose(_losses(compiled, True), _losses(eager, False), rtol=1e-9)
    for (name, a), b in zip(
        eager.state_dict().items(), compiled.state_dict().values(), strict=True
    ):
        if a.is_floating_point():
            torch.testing.assert_close(b, a, rtol=1e-7, atol=1e-9, msg=name)
        else:
            assert torch.equal(a, b), name
    assert int(eager.encoder.initial.shared.layers[0].bn.num_batches_tracked) == 6


@pytest.mark.parametrize("fn", [sparsemax, entmax15])
def test_traced_mask_functions_take_the_sorted_form(fn: Any) -> None:
    """Under tracing the public functions run the sort-based forms along any dim and dtype."""
    x = torch.randn(5, 9, 4, dtype=torch.float64, requires_grad=True)
    traced = torch.compile(lambda t: fn(t, dim=1), backend="aot_eager", fullgraph=True)
    out = traced(x)
    torch.testing.assert_close(out, fn(x, dim=1))
    sorted_fn = sparsemax_sorted if fn is sparsemax else entmax15_sorted
    torch.testing.assert_close(out, sorted_fn(x.movedim(1, -1)).movedim(-1, 1))
    (grad,) = torch.autograd.grad((out * torch.arange(4.0, dtype=x.dtype)).sum(), x)
    x2 = x.detach().requires_grad_()
    (expected,) = torch.autograd.grad((fn(x2, dim=1) * torch.arange(4.0, dtype=x.dtype)).sum(), x2)
    torch.testing.assert_close(grad, expected)
    half = traced(x.detach().to(torch.bfloat16))
    assert half.dtype == torch.bfloat16


#: the estimators' compiled fits: one decision step (the compiled graph's size, and with it the
#: compile time, grows with the steps; the steps' equivalence is checked on the network above)
ONE_STEP: dict[str, Any] = {"n_steps": 1}


def _table(n: int = 600) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n, 6))
    return X, (X[:, 0] + X[:, 1] > 0).astype(int)


def test_compile_true_fits_a_classifier_and_the_model_pickles() -> None:
    X, y = _table()
    clf = with_fixed(TabNetClassifier(max_epochs=8, random_state=0), compile=True).fit(X, y)
    assert clf.compiled_
    assert clf.score(X, y) > 0.85
    again = pickle.loads(pickle.dumps(clf))
    np.testing.assert_array_equal(again.predict_proba(X), clf.predict_proba(X))


def test_compile_true_fits_a_regressor_with_early_stopping_and_weights() -> None:
    X, _ = _table(1200)
    target = X[:, 0] - X[:, 2]
    reg = TabNetRegressor(**ONE_STEP, max_epochs=5, early_stopping=True, random_state=0)
    with_fixed(reg, compile="default")
    reg.fit(X, target, sample_weight=np.linspace(0.5, 1.5, len(X)))
    assert reg.compiled_
    assert reg.score(X, target) > 0.5


def test_auto_never_compiles_on_the_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    def fail(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("torch.compile called")

    monkeypatch.setattr(torch, "compile", fail)
    X, y = _table()
    clf = TabNetClassifier(max_epochs=3, random_state=0).fit(X, y)  # compile="auto"
    assert clf._fixed.compile == "auto" and not clf.compiled_
    eager = with_fixed(TabNetClassifier(max_epochs=3, random_state=0), compile=False).fit(X, y)
    np.testing.assert_array_equal(clf.predict_proba(X), eager.predict_proba(X))


def _driven(step: StepCompiler, seconds: list[float], max_epochs: int) -> list[str]:
    states = []
    for epoch, s in enumerate(seconds):
        states.append(step.epoch_end(s, max_epochs - epoch - 1))
    return states


def test_auto_on_cuda_keeps_the_compiled_step_when_it_is_faster() -> None:
    step = StepCompiler(lambda: None, "auto", CUDA)
    assert step.state == "measuring"
    # eager epochs of 10 s and 8 s, 100 epochs: 784 s left; compiled 40 s (compiling) then 5 s
    states = _driven(step, [10.0, 8.0, 40.0, 5.0, 5.0], 100)
    assert states == ["measuring", "trial", "trial-steady", "compiled", "compiled"]
    assert step.eager_seconds == 8.0 and step.uses_compiled
    assert step.decision == "compiled: a compiled epoch took 5 s, an eager one 8 s"


def test_auto_on_cuda_goes_back_to_eager_when_compiling_does_not_pay() -> None:
    step = StepCompiler(lambda: None, "auto", CUDA)
    assert _driven(step, [10.0, 8.0, 40.0, 7.9], 100)[-1] == "eager"  # within 5%: not kept
    short = StepCompiler(lambda: None, "auto", CUDA)
    # 2 s epochs, 50 epochs: 96 s left eager, under AUTO_MIN_SECONDS: never tried
    assert AUTO_MIN_SECONDS > 96
    assert _driven(short, [2.0, 2.0], 50) == ["measuring", "eager"]
    assert short.decision is not None and "96 s" in short.decision


def test_auto_falls_back_to_eager_when_compiling_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args: Any, **kwargs: Any) -> Any:
        def run(*a: Any) -> Any:
            raise RuntimeError("no compiler here")

        return run

    monkeypatch.setattr(torch, "compile", broken)
    step = StepCompiler(lambda x: x + 1, "auto", CUDA)
    step.set_state("trial")
    with pytest.warns(RuntimeWarning, match="compiling the training step failed .*no compiler"):
        assert step(1) == 2
    assert step.state == "eager" and not step.uses_compiled
    explicit = StepCompiler(lambda x: x + 1, True, CPU)
    with pytest.raises(RuntimeError, match="no compiler here"):
        explicit(1)


def test_compile_settings_are_checked() -> None:
    for good in (True, False, "auto", "max-autotune"):
        assert check_compile(good) == good
    with pytest.raises(ValueError, match=re.escape("compile='fast' is not a compile setting")):
        check_compile("fast")
    with pytest.raises(ValueError, match="unknown compile state"):
        StepCompiler(lambda: None, False, CPU).set_state("fast")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert StepCompiler(lambda: None, "auto", CPU).state == "eager"


def test_compile_true_fits_a_pretrainer() -> None:
    from tabsparse import TabNetPretrainer

    X, _ = _table()
    pre = with_fixed(TabNetPretrainer(**ONE_STEP, max_epochs=3, random_state=0), compile=True)
    pre.fit(X)
    assert pre.compiled_
    assert np.isfinite([h["train_loss"] for h in pre.history_]).all()
    assert pre.transform(X).shape == (len(X), pre.n_d)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_compile_true_on_cuda_with_autocast() -> None:
    """On CUDA the fit runs under bf16 autocast; the compiled step traces it as one graph."""
    X, y = _table()
    clf = TabNetClassifier(max_epochs=8, device="cuda", random_state=0)
    clf = with_fixed(clf, compile=True).fit(X, y)
    assert clf.compiled_ and clf.device_.type == "cuda"
    assert clf.score(X, y) > 0.85


def test_compiled_step_traces_under_bf16_autocast() -> None:
    """CUDA fits run under bf16 autocast; the same autocast on the CPU traces as one graph and
    trains (bf16 rounding: close to, not equal to, the eager losses)."""
    losses = []
    for compiled in (False, True):
        cfg = TrainConfig(max_epochs=3, batch_size=64, amp=True, compile=compiled)
        trainer = Trainer(make_net(), ce, cfg).fit(make_data(512))
        assert trainer.compiled == compiled
        losses.append([record["train_loss"] for record in trainer.history])
    np.testing.assert_allclose(losses[1], losses[0], rtol=0.15)
    assert losses[1][-1] < 0.8 * losses[1][0]


@pytest.mark.parametrize("multilabel", [False, True])
def test_traced_sparsemax_loss_equals_the_eager_loss(multilabel: bool) -> None:
    from tabsparse.losses import sparsemax_loss

    g = torch.Generator().manual_seed(0)
    z = torch.randn(64, 5, generator=g, dtype=torch.float64) * 3
    if multilabel:
        target: torch.Tensor = (torch.rand(64, 5, generator=g) < 0.4).double()
        target[:, 0] = 1.0  # every row has a label
    else:
        target = torch.randint(0, 5, (64,), generator=g)
    weight = torch.rand(64, generator=g, dtype=torch.float64)

    def loss(x: torch.Tensor) -> torch.Tensor:
        return sparsemax_loss(x, target, weight=weight)

    traced = torch.compile(loss, backend="aot_eager", fullgraph=True)
    x1, x2 = z.clone().requires_grad_(), z.clone().requires_grad_()
    a, b = traced(x1), loss(x2)
    torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-14)
    a.backward()
    b.backward()
    assert x1.grad is not None and x2.grad is not None
    torch.testing.assert_close(x1.grad, x2.grad, rtol=1e-12, atol=1e-14)


def test_compile_true_fits_multilabel_and_multitask_classifiers() -> None:
    X, y = _table()
    labels = np.stack([y, (X[:, 2] > 0).astype(int), (X[:, 3] > 0.5).astype(int)], 1)
    for loss in ("sparsemax", "bce"):
        clf = TabNetClassifier(**ONE_STEP, max_epochs=4, multilabel_loss=loss, random_state=0)
        with_fixed(clf, compile=True)
        assert clf.fit(X, labels).compiled_
        assert clf.predict(X).shape == labels.shape
    tasks = np.stack([y, np.digitize(X[:, 1], [-0.5, 0.5])], 1)
    clf = with_fixed(TabNetClassifier(**ONE_STEP, max_epochs=4, random_state=0), compile=True)
    clf.fit(X, tasks)
    assert clf.compiled_ and len(clf.predict_proba(X)) == 2


class _FailingBackward(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        return x.clone()

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        raise RuntimeError("backward failed to compile")


def test_auto_falls_back_when_the_compiled_backward_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    """The backward of a compiled step compiles on its first use: a failure there also sends
    an ``"auto"`` fit back to eager (the step is run again eager), and fails a ``True`` fit."""

    def fake_compile(fn: Any, **kwargs: Any) -> Any:
        def run(*args: Any) -> Any:
            summed, sparsity = fn(*args)
            return _FailingBackward.apply(summed), sparsity

        return run

    class TryingAtOnce(StepCompiler):  # "auto" in its trial epoch from the start
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            if self.setting == "auto":
                self.state = "trial"

    import tabsparse.training.loop as training

    monkeypatch.setattr(torch, "compile", fake_compile)
    monkeypatch.setattr(training, "StepCompiler", TryingAtOnce)
    cfg = TrainConfig(max_epochs=2, batch_size=64, compile="auto")
    with pytest.warns(RuntimeWarning, match="backward failed to compile"):
        trainer = Trainer(make_net(), ce, cfg).fit(make_data(256))
    assert not trainer.compiled and len(trainer.history) == 2
    assert all(np.isfinite(r["train_loss"]) for r in trainer.history)
    with pytest.raises(RuntimeError, match="backward failed to compile"):
        Trainer(make_net(), ce, TrainConfig(max_epochs=1, compile=True)).fit(make_data(256))


def test_a_compiled_fit_resumes_eager_and_warm_starts(tmp_path: Any) -> None:
    """Compiling changes only the rounding, so a checkpoint of a compiled fit resumes eager,
    and ``warm_start`` continues a compiled fit."""
    from tabsparse.training import Callback

    class StopAfterTwo(Callback):
        def on_epoch_end(self, trainer: Any, record: dict[str, float]) -> None:
            trainer.stop = record["epoch"] >= 1

    X, y = _table()
    common = {"max_epochs": 5, "checkpoint_dir": tmp_path, "random_state": 0}
    first = TabNetClassifier(callbacks=[StopAfterTwo()], **common)
    first = with_fixed(first, compile=True).fit(X, y)
    assert first.n_iter_ == 2 and first.compiled_
    resumed = with_fixed(TabNetClassifier(**common), compile=False)
    resumed.fit(X, y, resume_from=tmp_path)
    assert resumed.n_iter_ == 5 and not resumed.compiled_
    warm = TabNetClassifier(max_epochs=2, warm_start=True, random_state=0)
    with_fixed(warm, compile=True)
    warm.fit(X, y).fit(X, y)
    assert warm.n_iter_ == 4 and warm.compiled_


def test_auto_runs_its_trial_inside_a_fit(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The trainer drives the ``"auto"`` rule: two eager epochs measured, one compiling, one
    measured compiled, then the decision, logged (here on the CPU, as if it were CUDA, with no
    minimum fit length and the compiled epoch made to look fast or slow)."""
    import logging

    import tabsparse.training.loop as training

    class AsIfOnCuda(StepCompiler):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.state, self.decision = "measuring", None

    monkeypatch.setattr(training, "StepCompiler", AsIfOnCuda)
    monkeypatch.setattr(compiling, "AUTO_MIN_SECONDS", 0.0)
    for factor, expected in ((0.5, True), (1.0, False)):
        seen: list[str] = []

        def epoch_end(
            self: StepCompiler, seconds: float, left: int, f: float = factor, seen: list = seen
        ) -> str:
            seen.append(self.state)
            trial = self.state == "trial-steady"
            return StepCompiler.epoch_end(self, self.eager_seconds * f if trial else seconds, left)

        monkeypatch.setattr(AsIfOnCuda, "epoch_end", epoch_end)
        cfg = TrainConfig(max_epochs=6, batch_size=64, compile="auto")
        with caplog.at_level(logging.INFO, logger="tabsparse"):
            trainer = Trainer(make_net(), ce, cfg).fit(make_data(256))
        assert seen == ["measuring", "measuring", "trial", "trial-steady"]
        assert trainer.compiled is expected and len(trainer.history) == 6
        assert 'compile="auto" chose ' + ("compiled" if expected else "eager") in caplog.text
        caplog.clear()
