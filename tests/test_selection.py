"""fit_selector: a learned per-row column selector, trained against a fitted network."""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
import torch
from conftest import TINY_FIT
from sklearn.exceptions import NotFittedError

from tabsparse import (
    ColumnSelector,
    Selection,
    TabNetClassifier,
    TabNetPretrainer,
    TabNetRegressor,
)
from tabsparse.nn.inputs import TabularInput
from tabsparse.nn.network import NetworkOutput
from tabsparse.training import TensorData
from tabsparse.training.selection import (
    SELECTION_BUDGET,
    fit_selector,
    held_out_loss,
    residual_change,
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


PLACES = [("numeric", 0), ("numeric", 1), ("numeric", 2), ("numeric", 3), ("codes", 0)]


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
    keep = torch.from_numpy(selected)
    g = torch.Generator().manual_seed(2)
    kept = residual_change(net, selector, data, data, keep, n_draws=4, generator=g)
    dropped = residual_change(net, selector, data, data, ~keep, n_draws=4, generator=g)
    assert float(kept.mean()) < 0.1 and float(dropped.mean()) > 0.8


def test_residual_change_by_hand(switch) -> None:
    """With a background whose x0 is one constant, a row that keeps all but x0 moves by exactly
    ``4 sigmoid(8 x2) |x0 - c|``, over the selector's scale; keeping everything moves nothing."""
    net, selector = switch
    data = _switch_data(50, 3)
    data.numeric[:, 2] = 1.0
    background = _switch_data(10, 4)
    background.numeric[:, 0] = 0.25
    keep = torch.ones(50, 5, dtype=torch.bool)
    g = torch.Generator().manual_seed(0)
    got = residual_change(net, selector, data, background, keep, n_draws=3, generator=g)
    np.testing.assert_array_equal(got.numpy(), np.zeros(50))
    keep[:, 0] = False
    got = residual_change(net, selector, data, background, keep, n_draws=3, generator=g)
    gate = torch.sigmoid(8 * data.numeric[:, 2])
    want = 4 * gate * (data.numeric[:, 0] - 0.25).abs() / selector.scale
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5)


def test_the_held_out_loss_by_hand(switch) -> None:
    """A selector that keeps every column pays only ``budget * sum softplus(logit)``; one that
    keeps none moves each row to the (one) background row: ``|f(c) - f(x)| / scale``."""
    net, trained = switch
    data = _switch_data(60, 5)
    background = TensorData(
        torch.tensor([[0.5, -1.0, 2.0, 0.3]]).repeat(2, 1), torch.tensor([[2], [2]])
    )
    selector = copy.deepcopy(trained)
    last = selector.layers[-1]
    with torch.no_grad():
        last.weight.zero_()
        last.bias.fill_(30.0)
    g = torch.Generator().manual_seed(0)
    got = held_out_loss(net, selector, data, background, budget=0.02, n_draws=3, generator=g)
    assert got == pytest.approx(0.02 * 5 * 30.0, rel=1e-6)
    with torch.no_grad():
        last.bias.fill_(-30.0)
    got = held_out_loss(net, selector, data, background, budget=0.02, n_draws=3, generator=g)
    x = data.numeric
    gate = torch.sigmoid(8 * x[:, 2])
    fx = gate * 4 * x[:, 0] + (1 - gate) * 4 * x[:, 1] + 3 * (data.codes[:, 0] == 2)
    fc = torch.sigmoid(torch.tensor(16.0)) * 2 + (1 - torch.sigmoid(torch.tensor(16.0))) * -4 + 3
    want = float((fc - fx).abs().mean()) / selector.scale
    assert got == pytest.approx(want, rel=1e-5)
    # the trained selector's objective on new rows: below both extremes
    rows = _switch_data(2000, 6)
    loss = held_out_loss(net, trained, rows, rows, budget=SELECTION_BUDGET, n_draws=2, generator=g)
    keep_all = 0.02 * 5 * 30.0
    assert loss < 0.5 and loss < keep_all
    # the training loss is the same function: per row, with gradients to the selector only
    pool = _input_channels_of(net, rows)
    per_row = selection_loss(net, trained, pool[:8], pool, budget=0.02, generator=g)
    assert per_row.shape == (8,) and per_row.requires_grad
    with pytest.raises(ValueError, match="n_draws=0 must be >= 1"):
        held_out_loss(net, trained, rows, rows, budget=0.02, n_draws=0, generator=g)


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
    with pytest.raises(ValueError, match="columns must name every input column once"):
        fit_selector(net, data, PLACES[:4], budget=0.1, n_iter=1, generator=g)
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


# ---- the estimators ------------------------------------------------------------------------
def _table(n: int = 400, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    X = pd.DataFrame(rng.normal(size=(n, 4)), columns=["a", "b", "noise0", "noise1"])
    X["k"] = pd.Categorical(rng.choice(["u", "v", "w"], size=n))
    return X


@pytest.fixture(scope="module")
def binary() -> tuple[TabNetClassifier, pd.DataFrame, ColumnSelector]:
    X = _table()
    y = ((2 * X["a"] + (X["k"] == "u") * 2.0) > 0.5).astype(int).to_numpy()
    est = TabNetClassifier(**{**TINY_FIT, "max_epochs": 20}).fit(X, y)
    return est, X, est.fit_selector(X, n_iter=300)


def test_fit_selector_explains_rows(binary) -> None:
    _, X, selector = binary
    before = X.copy()
    got = selector.explain(X.iloc[:100])
    pd.testing.assert_frame_equal(X, before)
    assert isinstance(got, Selection) and got.feature_names == list(X.columns)
    assert got.probabilities.shape == (100, 5) and got.residual.shape == (100,)
    np.testing.assert_array_equal(got.selected, got.probabilities >= 0.5)
    np.testing.assert_allclose(got.importances.sum(axis=1), 1.0)
    np.testing.assert_allclose(
        got.importances, got.probabilities / got.probabilities.sum(axis=1, keepdims=True)
    )
    assert (got.residual >= 0).all()
    assert selector.budget == SELECTION_BUDGET and selector.scale > 0
    assert repr(selector) == (
        "ColumnSelector(TabNetClassifier, budget=0.02, rows=400, n_selectors=1)"
    )
    assert got.probabilities_std is None
    # the column the target leans on most is selected more often than either noise column
    rate = dict(zip(got.feature_names, got.selection_rate(), strict=True))
    assert rate["a"] > max(rate["noise0"], rate["noise1"])
    mean, std = got.global_importances()
    np.testing.assert_allclose(mean, got.importances.mean(axis=0) / got.importances.mean(0).sum())
    assert std.shape == (5,)


def test_fit_selector_leaves_the_model_as_it_was(binary) -> None:
    est, X, _ = binary
    state = {k: v.clone() for k, v in est.network_.state_dict().items()}
    flags = [p.requires_grad for p in est.network_.parameters()]
    proba = est.predict_proba(X)
    est.network_.train()
    est.fit_selector(X, n_iter=5)
    assert est.network_.training
    est.network_.eval()
    for k, v in est.network_.state_dict().items():
        torch.testing.assert_close(v, state[k], rtol=0, atol=0)
    assert [p.requires_grad for p in est.network_.parameters()] == flags
    np.testing.assert_array_equal(est.predict_proba(X), proba)


def test_selection_is_reproducible_and_seeded(binary) -> None:
    est, X, _ = binary
    one = est.fit_selector(X, n_iter=20, random_state=3).explain(X.iloc[:30], random_state=1)
    two = est.fit_selector(X, n_iter=20, random_state=3).explain(X.iloc[:30], random_state=1)
    other = est.fit_selector(X, n_iter=20, random_state=4).explain(X.iloc[:30], random_state=1)
    np.testing.assert_array_equal(one.probabilities, two.probabilities)
    np.testing.assert_array_equal(one.residual, two.residual)
    assert not np.array_equal(one.probabilities, other.probabilities)


def test_the_loss_on_held_out_rows_ranks_selectors(binary) -> None:
    """``ColumnSelector.loss``: the objective on other rows; a trained selector beats one of a
    single step, the value is reproducible, and it is the core's ``held_out_loss``."""
    est, X, selector = binary
    held = _table(200, seed=9)
    untrained = est.fit_selector(X, n_iter=1)
    assert selector.loss(held) < untrained.loss(held)
    assert selector.loss(held, random_state=3) == selector.loss(held, random_state=3)
    data = est._tensor_data(est._encode(held), None, None, est.device_)
    g = torch.Generator().manual_seed(int(np.random.RandomState(0).randint(2**31 - 1)))
    want = held_out_loss(
        est.network_, selector._nets[0], data, selector._pool, budget=0.02, n_draws=4, generator=g
    )
    assert selector.loss(held) == pytest.approx(want, rel=1e-6)
    with pytest.raises(ValueError, match=r"n_draws=0 must be an integer >= 1"):
        selector.loss(held, n_draws=0)


def test_several_selectors_are_averaged_with_their_spread(binary) -> None:
    """``n_selectors=3``: three selectors of their own weights, one scale; ``probabilities`` their
    mean, ``probabilities_std`` their spread, ``selected`` and the residual from the mean."""
    est, X, _ = binary
    selector = est.fit_selector(X, n_iter=30, n_selectors=3, random_state=2)
    assert selector.n_selectors == 3 and "n_selectors=3" in repr(selector)
    nets = selector._nets
    assert len({n.scale for n in nets}) == 1
    rows = X.iloc[:40]
    got = selector.explain(rows, random_state=0)
    data = est._tensor_data(est._encode(rows), None, None, est.device_)
    each = np.stack([selection_probabilities(est.network_, n, data).numpy() for n in nets])
    assert not np.array_equal(each[0], each[1])
    np.testing.assert_allclose(got.probabilities, each.mean(axis=0), rtol=1e-6)
    np.testing.assert_allclose(got.probabilities_std, each.std(axis=0, ddof=1), rtol=1e-5)
    np.testing.assert_array_equal(got.selected, got.probabilities >= 0.5)
    keep = torch.from_numpy(each.mean(axis=0) >= 0.5)
    g = torch.Generator().manual_seed(int(np.random.RandomState(0).randint(2**31 - 1)))
    want = residual_change(
        est.network_, nets[0], data, selector._pool, keep, n_draws=8, generator=g
    )
    np.testing.assert_allclose(got.residual, want.numpy(), rtol=1e-5)


def test_sparse_rows_are_explained_as_dense() -> None:
    rng = np.random.default_rng(2)
    dense = rng.normal(size=(300, 5)) * (rng.random((300, 5)) < 0.5)
    y = (dense[:, 0] + dense[:, 1] > 0).astype(int)
    est = TabNetClassifier(**TINY_FIT).fit(dense, y)
    selector = est.fit_selector(dense, n_iter=20)
    a = selector.explain(sp.csr_matrix(dense[:40]), random_state=0)
    b = selector.explain(dense[:40], random_state=0)
    np.testing.assert_allclose(a.probabilities, b.probabilities, rtol=1e-6)
    np.testing.assert_allclose(a.residual, b.residual, rtol=1e-5)
    sparse_loss = selector.loss(sp.csr_matrix(dense[:40]))
    assert sparse_loss == pytest.approx(selector.loss(dense[:40]), rel=1e-5)
    # a sparse table to learn on is densified: the same selector
    c = est.fit_selector(sp.csr_matrix(dense), n_iter=20).explain(dense[:40], random_state=0)
    np.testing.assert_array_equal(c.probabilities, b.probabilities)
    np.testing.assert_array_equal(c.residual, b.residual)


def test_a_regressor_and_a_pickled_selector() -> None:
    X = _table(seed=3)
    y = (3 * X["b"] + X["a"]).to_numpy()
    est = TabNetRegressor(**{**TINY_FIT, "max_epochs": 10}).fit(X, y)
    selector = est.fit_selector(X, n_iter=150)
    got = selector.explain(X.iloc[:50])
    back = pickle.loads(pickle.dumps(selector))
    again = back.explain(X.iloc[:50])
    np.testing.assert_array_equal(again.probabilities, got.probabilities)
    np.testing.assert_array_equal(again.residual, got.residual)


def test_bad_input_is_refused(binary) -> None:
    est, X, selector = binary
    for bad in (0, -1.0, float("nan"), float("inf"), True, "0.1"):
        with pytest.raises(ValueError, match=rf"budget={bad!r} must be a positive number"):
            est.fit_selector(X, budget=bad)  # type: ignore[arg-type]
    for bad in (0, -3, 1.5, True):
        with pytest.raises(ValueError, match=rf"n_iter={bad!r} must be an integer >= 1"):
            est.fit_selector(X, n_iter=bad)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match=rf"n_selectors={bad!r} must be an integer >= 1"):
            est.fit_selector(X, n_selectors=bad)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match=rf"n_draws={bad!r} must be an integer >= 1"):
            selector.explain(X, n_draws=bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"rows of X, which has 1 row\(s\); pass at least 2"):
        est.fit_selector(X.iloc[:1])
    with pytest.raises(ValueError, match="The columns of X do not match"):
        selector.explain(X[["b", "a", "noise0", "noise1", "k"]].rename(columns={"b": "c"}))
    with pytest.raises(NotFittedError):
        TabNetClassifier().fit_selector(X)
    pre = TabNetPretrainer(**TINY_FIT).fit(X.drop(columns="k"))
    with pytest.raises(TypeError, match="TabNetPretrainer has no predictions to explain"):
        pre.fit_selector(X.drop(columns="k"))


def test_a_refitted_estimator_needs_a_new_selector() -> None:
    X = _table(seed=4)
    y = (X["a"] > 0).astype(int).to_numpy()
    est = TabNetClassifier(**TINY_FIT).fit(X, y)
    selector = est.fit_selector(X, n_iter=5)
    est.fit(X, y)  # the same weights again: the selector still holds
    selector.explain(X.iloc[:5])
    est.set_params(random_state=1).fit(X, y)
    with pytest.raises(ValueError, match="refitted after fit_selector: fit a new selector"):
        selector.explain(X)
    with pytest.raises(ValueError, match="refitted after fit_selector: fit a new selector"):
        selector.loss(X)


def test_selection_checks_its_shapes() -> None:
    with pytest.raises(ValueError, match=r"probabilities \(3,\) must be \(n_samples, 2\)"):
        Selection(np.zeros(3), np.zeros(3), ["a", "b"])
    with pytest.raises(ValueError, match=r"residual \(2,\) must be \(3,\)"):
        Selection(np.zeros((3, 2)), np.zeros(2), ["a", "b"])
    with pytest.raises(ValueError, match=r"probabilities_std \(2, 2\) must be \(3, 2\)"):
        Selection(np.zeros((3, 2)), np.zeros(3), ["a", "b"], np.zeros((2, 2)))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_fit_selector_and_effects() -> None:
    """On a CUDA fit the selector trains and explains on the GPU (draws from CPU generators)."""
    X = _table(seed=5)
    y = ((2 * X["a"] + (X["k"] == "u") * 2.0) > 0.5).astype(int).to_numpy()
    est = TabNetClassifier(**{**TINY_FIT, "max_epochs": 10, "device": "cuda"}).fit(X, y)
    proba = est.predict_proba(X)
    selector = est.fit_selector(X, n_iter=50)
    got = selector.explain(X.iloc[:60])
    assert got.probabilities.shape == (60, 5) and np.isfinite(got.residual).all()
    assert 0 < selector.loss(X.iloc[:60]) < float("inf")
    eff = est.explain_effects(X.iloc[:60], n_draws=2)
    assert eff.effects.shape == (60, 5) and (eff.effects >= 0).all()
    np.testing.assert_array_equal(est.predict_proba(X), proba)
