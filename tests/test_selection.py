"""The column selector: learned per row against a fitted network (the core), and at the end of
every classifier and regressor fit (``selector_``, ``explain(X).selected``)."""

from __future__ import annotations

import math
import pickle
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
import torch
from conftest import TINY_FIT

import tabsparse
from tabsparse import TabNetClassifier, TabNetPretrainer, TabNetRegressor
from tabsparse.estimators import _explaining
from tabsparse.io import ModelFileError
from tabsparse.nn.inputs import TabularInput
from tabsparse.nn.network import NetworkOutput
from tabsparse.training import Callback, TensorData
from tabsparse.training.selection import (
    SELECTION_BUDGET,
    SelectorNet,
    fit_selector,
    selection_loss,
    selection_probabilities,
)


class _Switch(torch.nn.Module):
    """A stand-in network of known needs: 4 numeric columns and one categorical, output
    ``4 * x0`` where ``x2 > 0`` and ``4 * x1`` elsewhere (a steep sigmoid of ``x2`` between),
    plus ``3 * (code == 2)`` (its embedding channel, set to 1 for code 2 and 0 for code 3).
    Column 3 is noise."""

    output_centre = None

    def __init__(self) -> None:
        super().__init__()
        self.inputs = TabularInput(
            numeric_mean=[0.0] * 4, numeric_std=[1.0] * 4, cardinalities=[4], cat_emb_dim=1
        )
        with torch.no_grad():
            self.inputs.embedding.weight.copy_(torch.tensor([[0.0], [0.0], [1.0], [0.0]]))
        self.calls = 0

    def from_inputs(self, x: torch.Tensor, *, with_masks: bool = True) -> NetworkOutput:
        self.calls += 1
        gate = torch.sigmoid(8 * x[:, 2])  # a smooth switch: the selector learns by gradients
        out = gate * 4 * x[:, 0] + (1 - gate) * 4 * x[:, 1] + 3 * x[:, 4]
        return NetworkOutput(out.unsqueeze(1), torch.empty(0), torch.zeros(()), torch.empty(0))


def _switch_data(n: int, seed: int) -> TensorData:
    g = torch.Generator().manual_seed(seed)
    numeric = torch.randn(n, 4, generator=g)
    codes = torch.randint(2, 4, (n, 1), generator=g)  # slots 2 and 3: the two categories
    return TensorData(numeric, codes)


PLACES = [[("numeric", 0)], [("numeric", 1)], [("numeric", 2)], [("numeric", 3)], [("codes", 0)]]


def _residual(net: _Switch, data: TensorData, keep: np.ndarray, seed: int) -> float:
    """The mean change of the stand-in's output when the columns not in ``keep`` are drawn from
    other rows of ``data`` (each column from its own random row)."""
    rng = np.random.default_rng(seed)
    n = len(data)
    numeric, codes = data.numeric.clone(), data.codes.clone()
    for j in range(5):
        rows = torch.from_numpy(rng.integers(0, n, n))
        drop = torch.from_numpy(~keep[:, j])
        if j < 4:
            numeric[drop, j] = data.numeric[rows, j][drop]
        else:
            codes[drop, 0] = data.codes[rows, 0][drop]
    with torch.no_grad():
        before = net.from_inputs(_input_channels_of(net, data)).logits
        after = net.from_inputs(_input_channels_of(net, TensorData(numeric, codes))).logits
    return float((after - before).abs().mean())


@pytest.fixture(scope="module")
def switch() -> tuple[_Switch, object]:
    net = _Switch()
    selector = fit_selector(
        net,
        _switch_data(4000, 0),
        PLACES,
        budget=SELECTION_BUDGET,
        n_iter=1500,
        generator=torch.Generator().manual_seed(0),
    )
    return net, selector


def test_the_selector_finds_each_rows_needs(switch) -> None:
    """Rows with x2 well above 0 need x0, x2 and the category; well below, x1, x2 and the
    category (near 0 both x0 and x1 count); no row needs the noise column."""
    net, selector = switch
    data = _switch_data(2000, 1)
    p = selection_probabilities(net, selector, data).numpy()
    assert p.shape == (2000, 5) and ((p >= 0) & (p <= 1)).all()
    x2 = data.numeric[:, 2].numpy()
    clear = np.abs(x2) > 0.5
    truth = np.zeros((2000, 5), dtype=bool)
    truth[:, 2] = truth[:, 4] = True
    truth[x2 > 0, 0] = True
    truth[x2 <= 0, 1] = True
    selected = p >= 0.5
    assert (selected == truth)[clear].all(axis=1).mean() > 0.9
    assert not selected[:, 3].any()
    assert selected[~clear][:, :2].all(axis=1).mean() > 0.5  # near the switch: both branches
    # the selection is enough: drawing the rest barely moves the output, drawing it moves it
    kept, dropped = _residual(net, data, selected, 2), _residual(net, data, ~selected, 2)
    assert kept / selector.scale < 0.1 and dropped / selector.scale > 0.8
    # the training loss: per row, with gradients to the selector only
    pool = _input_channels_of(net, data)
    g = torch.Generator().manual_seed(0)
    per_row = selection_loss(net, selector, pool[:8], pool, budget=0.02, generator=g)
    assert per_row.shape == (8,) and per_row.requires_grad


def _input_channels_of(net: _Switch, data: TensorData) -> torch.Tensor:
    return net.inputs(data.numeric, data.codes).float()


def test_the_scale_is_the_mean_change_of_a_whole_replacement(switch) -> None:
    """``scale``: E|f(x') - f(x)| over independent rows, here by simulation of the stand-in's
    formula with standard normal columns and a fair coin for the category."""
    _, selector = switch
    rng = np.random.default_rng(0)

    def f(x: np.ndarray, b: np.ndarray) -> np.ndarray:
        gate = 1 / (1 + np.exp(-8 * x[:, 2]))
        return gate * 4 * x[:, 0] + (1 - gate) * 4 * x[:, 1] + 3 * b

    n = 400_000
    x, xp = rng.normal(size=(n, 3)), rng.normal(size=(n, 3))
    b, bp = rng.integers(0, 2, n), rng.integers(0, 2, n)
    assert selector.scale == pytest.approx(np.abs(f(xp, bp) - f(x, b)).mean(), rel=0.05)


def test_core_refuses_bad_settings() -> None:
    net, data = _Switch(), _switch_data(20, 0)
    g = torch.Generator()
    with pytest.raises(ValueError, match=r"budget=0\.0 must be a positive number"):
        fit_selector(net, data, PLACES, budget=0.0, n_iter=1, generator=g)
    with pytest.raises(ValueError, match="n_iter=0 must be >= 1"):
        fit_selector(net, data, PLACES, budget=0.1, n_iter=0, generator=g)
    with pytest.raises(ValueError, match="background needs at least 2 rows"):
        fit_selector(net, data.take(slice(0, 1)), PLACES, budget=0.1, n_iter=1, generator=g)
    with pytest.raises(ValueError, match="columns must name every place of the network's"):
        fit_selector(net, data, PLACES[:4], budget=0.1, n_iter=1, generator=g)
    with pytest.raises(ValueError, match="columns must name every place of the network's"):
        fit_selector(net, data, [*PLACES, PLACES[0]], budget=0.1, n_iter=1, generator=g)
    flat = TensorData(torch.zeros(20, 4), torch.ones(20, 1, dtype=torch.int64))
    with pytest.raises(ValueError, match="do not change when the columns are drawn"):
        fit_selector(net, flat, PLACES, budget=0.1, n_iter=1, generator=g)


def test_input_channels_follow_the_layout() -> None:
    inputs = TabularInput(
        numeric_mean=[0.0] * 3,
        numeric_std=[1.0] * 3,
        cardinalities=[5, 4],
        cat_emb_dim=2,
        numeric_embedding="periodic",
        numeric_embedding_dim=4,
    )
    assert inputs.channels("numeric", 0) == slice(0, 4)
    assert inputs.channels("numeric", 2) == slice(8, 12)
    assert inputs.channels("codes", 0) == slice(12, 14)
    assert inputs.channels("codes", 1) == slice(14, 16) and inputs.output_dim == 16


# ---- the selector a fit learns ---------------------------------------------------------------
def _table(n: int = 400, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    X = pd.DataFrame(rng.normal(size=(n, 4)), columns=["a", "b", "noise0", "noise1"])
    X["k"] = pd.Categorical(rng.choice(["u", "v", "w"], size=n))
    return X


def _target(X: pd.DataFrame) -> np.ndarray:
    return ((2 * X["a"] + (X["k"] == "u") * 2.0) > 0.5).astype(int).to_numpy()


@pytest.fixture(scope="module")
def binary() -> tuple[TabNetClassifier, pd.DataFrame]:
    X = _table(2000)
    est = TabNetClassifier(**{**TINY_FIT, "max_epochs": 60, "early_stopping": False}).fit(
        X, _target(X)
    )
    return est, X


def test_a_fit_learns_the_selector_explain_reads(binary) -> None:
    """``explain(X).selected``: the fit's selector's probability >= 0.5, per input column; the
    column the target leans on is selected, the noise columns are not."""
    est, X = binary
    before = X.copy()
    got = est.explain(X.iloc[:500])
    pd.testing.assert_frame_equal(X, before)
    p = got.selection_probabilities
    assert p is not None and p.shape == (500, 5) and ((p >= 0) & (p <= 1)).all()
    np.testing.assert_array_equal(got.selected, p >= 0.5)
    data = est._tensor_data(est._encode(X.iloc[:500]), None, None, est.device_)
    want = selection_probabilities(est.network_, SelectorNet.from_state(est.selector_), data)
    np.testing.assert_array_equal(p, want.numpy())
    rate = dict(zip(got.feature_names, got.selection_rate(), strict=True))
    assert rate["a"] > 0.9 and max(rate["noise0"], rate["noise1"]) < 0.1, rate
    # the masks read more than the prediction needs; both are kept
    assert got.importances.shape == (500, 5) and got.masks.shape == (2, 500, 5)


def test_the_selector_trains_for_a_share_of_the_fit(monkeypatch: pytest.MonkeyPatch) -> None:
    """At most SELECTOR_STEPS steps of SELECTOR_BATCH rows, and at most SELECTOR_SHARE of the rows
    the fit trained on; on up to SELECTOR_ROWS training rows."""
    seen: list[dict[str, object]] = []
    real = _explaining.fit_selector

    def spy(network, pool, columns, **kwargs):  # type: ignore[no-untyped-def]
        seen.append({"rows": len(pool), **kwargs})
        return real(network, pool, columns, **kwargs)

    monkeypatch.setattr(_explaining, "fit_selector", spy)
    X = _table(300)
    est = TabNetClassifier(**{**TINY_FIT, "max_epochs": 4}).fit(X, _target(X))
    work = _explaining.SELECTOR_SHARE * est.n_iter_ * 300 / _explaining.SELECTOR_BATCH
    assert seen[-1]["n_iter"] == min(_explaining.SELECTOR_STEPS, max(1, math.ceil(work)))
    assert seen[-1]["batch_size"] == _explaining.SELECTOR_BATCH and seen[-1]["rows"] == 300
    assert seen[-1]["budget"] == SELECTION_BUDGET and seen[-1]["lr"] == _explaining.SELECTOR_LR
    monkeypatch.setattr(_explaining, "SELECTOR_ROWS", 100)
    est.fit(X, _target(X))
    assert seen[-1]["rows"] == 100


def test_the_selector_changes_nothing_else_in_the_fit(monkeypatch: pytest.MonkeyPatch) -> None:
    """It is learned last: the weights, predictions, importances and background are those of a
    fit that learns none, bit for bit, and the network is left in eval mode, frozen as it was."""
    X = _table(300, seed=1)
    y = _target(X)
    with_selector = TabNetClassifier(**TINY_FIT).fit(X, y)
    monkeypatch.setattr(_explaining.Explaining, "_learn_selector", lambda self, *a: None)
    without = TabNetClassifier(**TINY_FIT).fit(X, y)
    assert hasattr(with_selector, "selector_") and not hasattr(without, "selector_")
    for k, v in without.network_.state_dict().items():
        torch.testing.assert_close(with_selector.network_.state_dict()[k], v, rtol=0, atol=0)
    np.testing.assert_array_equal(with_selector.predict_proba(X), without.predict_proba(X))
    np.testing.assert_array_equal(with_selector.feature_importances_, without.feature_importances_)
    np.testing.assert_array_equal(
        with_selector.background_["numeric"], without.background_["numeric"]
    )
    assert not with_selector.network_.training
    assert all(p.requires_grad for p in with_selector.network_.parameters())
    # without a selector, selected falls back to where the masks read
    e = without.explain(X.iloc[:20])
    assert e.selection_probabilities is None
    np.testing.assert_array_equal(e.selected, e.importances > 0)


def test_the_selector_is_seeded_by_the_fit() -> None:
    X = _table(300, seed=2)
    y = _target(X)
    one, two = (TabNetClassifier(**TINY_FIT).fit(X, y) for _ in range(2))
    other = TabNetClassifier(**{**TINY_FIT, "random_state": 1}).fit(X, y)
    for name, value in one.selector_.items():
        np.testing.assert_array_equal(two.selector_[name], value)
    assert not np.array_equal(one.selector_["layers.0.weight"], other.selector_["layers.0.weight"])
    state = torch.random.get_rng_state()
    one.explain(X.iloc[:5])
    assert torch.equal(torch.random.get_rng_state(), state)  # explain draws nothing


def test_a_datetime_column_is_one_selected_column_unless_parts_are_asked_for() -> None:
    rng = np.random.default_rng(3)
    X = pd.DataFrame(
        {
            "a": rng.normal(size=300),
            "when": pd.Timestamp("2024-01-01") + pd.to_timedelta(rng.integers(0, 900, 300), "D"),
        }
    )
    y = (X["a"] > 0).astype(int).to_numpy()
    est = TabNetClassifier(**{**TINY_FIT, "datetime_features": "expand"}).fit(X, y)
    whole, parts = est.explain(X.iloc[:30]), est.explain(X.iloc[:30], datetime_parts=True)
    assert whole.selection_probabilities.shape == (30, 2)
    owner = list(est.encoder_.input_positions)
    assert parts.feature_names == list(est.encoder_.feature_names) and len(owner) > 2
    np.testing.assert_array_equal(
        parts.selection_probabilities, whole.selection_probabilities[:, owner]
    )


def test_sparse_rows_are_selected_as_dense() -> None:
    rng = np.random.default_rng(2)
    dense = rng.normal(size=(300, 5)) * (rng.random((300, 5)) < 0.5)
    y = (dense[:, 0] + dense[:, 1] > 0).astype(int)
    est = TabNetClassifier(**TINY_FIT).fit(dense, y)
    a, b = est.explain(sp.csr_matrix(dense[:40])), est.explain(dense[:40])
    np.testing.assert_allclose(a.selection_probabilities, b.selection_probabilities, rtol=1e-6)


def test_a_regressor_selects_and_a_pickled_one_selects_the_same() -> None:
    X = _table(seed=3)
    y = (3 * X["b"] + X["a"]).to_numpy()
    est = TabNetRegressor(**{**TINY_FIT, "max_epochs": 10}).fit(X, y)
    got = est.explain(X.iloc[:50])
    assert got.selection_probabilities.shape == (50, 5)
    back = pickle.loads(pickle.dumps(est))
    np.testing.assert_array_equal(
        back.explain(X.iloc[:50]).selection_probabilities, got.selection_probabilities
    )


def test_the_selector_is_saved_and_checked(binary, tmp_path: Path) -> None:
    est, X = binary
    path = tmp_path / "m.tabsparse"
    tabsparse.save(est, path)
    back = tabsparse.load(path)
    np.testing.assert_array_equal(
        back.explain(X.iloc[:50]).selection_probabilities,
        est.explain(X.iloc[:50]).selection_probabilities,
    )
    good = est.selector_
    bad_states = {
        "reads 3 input channels, the network has": {
            **good,
            "layers.0.weight": good["layers.0.weight"][:, :3],
            "channel_column": good["channel_column"][:3],
        },
        "scale must be > 0": {**good, "scale": -1.0},
        "finite float32 weights": {
            **good,
            "layers.4.bias": np.full_like(good["layers.4.bias"], np.nan),
        },
        "one int64 column position per input channel": {
            **good,
            "channel_column": np.full_like(good["channel_column"], 7),
        },
        "not the state of a column selector": {
            k: v for k, v in good.items() if k != "layers.2.bias"
        },
    }
    for message, state in bad_states.items():
        est.selector_ = state
        try:
            with pytest.raises(ValueError, match=message):
                est.explain(X.iloc[:5])
            tabsparse.save(est, tmp_path / "bad.tabsparse")
            with pytest.raises(ModelFileError, match=message):
                tabsparse.load(tmp_path / "bad.tabsparse")
        finally:
            est.selector_ = good


def test_a_pretrainer_and_an_interrupted_fit_have_no_selector() -> None:
    X = _table(seed=4)
    pre = TabNetPretrainer(**TINY_FIT).fit(X.drop(columns="k"))
    assert not hasattr(pre, "selector_")

    class Stop(Callback):
        def on_epoch_end(self, trainer, record):  # type: ignore[no-untyped-def]
            raise KeyboardInterrupt

    est = TabNetClassifier(**{**TINY_FIT, "callbacks": [Stop()]})
    with pytest.warns(RuntimeWarning, match="interrupted"), pytest.raises(KeyboardInterrupt):
        est.fit(X, _target(X))
    assert hasattr(est, "network_") and not hasattr(est, "selector_")
    e = est.explain(X.iloc[:5])
    np.testing.assert_array_equal(e.selected, e.importances > 0)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_fit_learns_the_selector_on_the_gpu() -> None:
    """On a CUDA fit the selector trains and selects on the GPU (draws from CPU generators)."""
    X = _table(seed=5)
    y = _target(X)
    est = TabNetClassifier(**{**TINY_FIT, "max_epochs": 10, "device": "cuda"}).fit(X, y)
    got = est.explain(X.iloc[:60])
    assert got.selection_probabilities.shape == (60, 5)
    cpu = TabNetClassifier(**{**TINY_FIT, "max_epochs": 10}).fit(X, y)
    assert set(cpu.selector_) == set(est.selector_)
