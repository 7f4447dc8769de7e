"""explain_effects: how far each column moves each prediction when replaced by marginal draws."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
import torch
from conftest import TINY_FIT
from sklearn.exceptions import NotFittedError

from tabsparse import TabNetClassifier, TabNetPretrainer, TabNetRegressor
from tabsparse.explain import Effects
from tabsparse.importance import MATERIAL_SHARE
from tabsparse.training import TensorData
from tabsparse.training.effects import column_effects


def _table(n: int = 300, noise: int = 2, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    X = pd.DataFrame(rng.normal(size=(n, 2 + noise)), columns=["a", "b", *map(str, range(noise))])
    X.columns = ["a", "b", *[f"noise{i}" for i in range(noise)]]
    X["k"] = pd.Categorical(rng.choice(["u", "v", "w"], size=n))
    return X


@pytest.fixture(scope="module")
def binary() -> tuple[TabNetClassifier, pd.DataFrame]:
    X = _table()
    y = ((X["a"] + (X["k"] == "u") * 1.5) > 0.3).astype(int).to_numpy()
    return TabNetClassifier(**TINY_FIT).fit(X, y), X


def _replaced(X: pd.DataFrame, column: str, value: object) -> pd.DataFrame:
    Z = X.copy()
    Z[column] = pd.Series([value] * len(Z), index=Z.index, dtype=X[column].dtype)
    return Z


def _fixed_background(X: pd.DataFrame, row: int) -> pd.DataFrame:
    """Two copies of one row: every draw replaces a column by that row's value."""
    return X.iloc[[row, row]].reset_index(drop=True)


def test_binary_effects_are_the_change_of_the_log_odds(binary) -> None:
    est, X = binary
    rows, bg = X.iloc[:25], _fixed_background(X, 40)
    got = est.explain_effects(rows, background=bg, n_draws=3)
    lo = lambda P: np.log(P[:, 1].astype(np.float64)) - np.log(P[:, 0].astype(np.float64))  # noqa: E731
    base = lo(est.predict_proba(rows))
    for j, name in enumerate(X.columns):
        moved = lo(est.predict_proba(_replaced(rows, name, bg[name].iloc[0])))
        np.testing.assert_allclose(got.effects[:, j], np.abs(moved - base), rtol=2e-3, atol=2e-5)
    assert got.feature_names == list(X.columns)


def test_multiclass_effects_sum_the_centred_logit_changes() -> None:
    X = _table(seed=1)
    y = np.select([X["a"] > 0.5, X["b"] < -0.5], [0, 1], 2)
    est = TabNetClassifier(**TINY_FIT).fit(X, y)
    rows, bg = X.iloc[:20], _fixed_background(X, 170)
    got = est.explain_effects(rows, background=bg, n_draws=2)

    def centred(P: np.ndarray) -> np.ndarray:
        logp = np.log(P.astype(np.float64))
        return logp - logp.mean(axis=1, keepdims=True)

    base = centred(est.predict_proba(rows))
    for j, name in enumerate(X.columns):
        moved = centred(est.predict_proba(_replaced(rows, name, bg[name].iloc[0])))
        np.testing.assert_allclose(
            got.effects[:, j], np.abs(moved - base).sum(axis=1), rtol=2e-3, atol=2e-5
        )


def test_regression_shares_are_the_shares_of_the_prediction_changes() -> None:
    X = _table(seed=2)
    y = 3.0 * X["a"].to_numpy() - X["b"].to_numpy() + 100.0
    est = TabNetRegressor(**TINY_FIT).fit(X, y)
    rows, bg = X.iloc[:20], _fixed_background(X, 150)
    got = est.explain_effects(rows, background=bg, n_draws=1)
    base = est.predict(rows).astype(np.float64)
    change = np.stack(
        [np.abs(est.predict(_replaced(rows, name, bg[name].iloc[0])) - base) for name in X.columns],
        axis=1,
    )
    shares = change / change.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(got.importances, shares, rtol=2e-3, atol=1e-4)


def test_a_column_no_step_reads_moves_nothing() -> None:
    X = _table(n=400, noise=8, seed=3)
    y = (X["a"] > 0).astype(int).to_numpy()
    est = TabNetClassifier(**{**TINY_FIT, "max_epochs": 8}).fit(X, y)
    assert est.first_mask_ == "shared"  # with the per-row first mask every column can steer
    masks = est.explain(X.iloc[:200]).masks
    unread = (masks == 0).all(axis=0)
    assert unread.any() and not unread.all()  # the test needs both kinds of cells
    got = est.explain_effects(X.iloc[:200], n_draws=4)
    assert (got.effects[unread] == 0).all()
    assert (got.effects[~unread] > 0).mean() > 0.5


def test_shares_selection_and_global_importances(binary) -> None:
    est, X = binary
    got = est.explain_effects(X.iloc[:60], n_draws=4)
    np.testing.assert_allclose(got.importances.sum(axis=1), 1.0, rtol=1e-12)
    np.testing.assert_array_equal(got.selected, got.importances >= MATERIAL_SHARE)
    mean, std = got.global_importances()
    np.testing.assert_allclose(mean, got.importances.mean(axis=0) / got.importances.mean(0).sum())
    assert mean.sum() == pytest.approx(1.0) and (std >= 0).all()
    strict = est.explain_effects(X.iloc[:60], n_draws=4, material_share=0.3)
    np.testing.assert_array_equal(strict.selected, got.importances >= 0.3)
    assert strict.selected.sum() < got.selected.sum()
    assert got.to_frame().shape == (60, X.shape[1])
    assert got.top_features(0, k=2)[0][1] == pytest.approx(got.importances[0].max())


def test_draws_are_seeded_and_leave_x_alone(binary) -> None:
    est, X = binary
    rows = X.iloc[:30]
    before = rows.copy()
    a = est.explain_effects(rows, random_state=5)
    b = est.explain_effects(rows, random_state=5)
    c = est.explain_effects(rows, random_state=6)
    np.testing.assert_array_equal(a.effects, b.effects)
    assert not np.array_equal(a.effects, c.effects)
    pd.testing.assert_frame_equal(rows, before)


def test_sparse_input_gives_the_dense_effects() -> None:
    rng = np.random.default_rng(4)
    dense = rng.normal(size=(200, 5)) * (rng.random((200, 5)) < 0.5)
    y = (dense[:, 0] > 0).astype(int)
    est = TabNetClassifier(**TINY_FIT).fit(dense, y)
    a = est.explain_effects(dense[:50], n_draws=3)
    b = est.explain_effects(sp.csr_matrix(dense[:50]), n_draws=3)
    np.testing.assert_allclose(a.effects, b.effects, rtol=1e-6)


def test_bad_arguments_are_refused(binary) -> None:
    est, X = binary
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match=r"n_draws=.* must be an integer >= 1"):
            est.explain_effects(X.iloc[:5], n_draws=bad)
    with pytest.raises(ValueError, match=r"rows of X, which has 1 row\(s\); pass background="):
        est.explain_effects(X.iloc[:1])
    with pytest.raises(ValueError, match=r"rows of background, which has 1 row"):
        est.explain_effects(X.iloc[:5], background=X.iloc[:1])
    with pytest.raises(
        ValueError, match=r"The columns of background do not match.*missing columns: \[.a.\]"
    ):
        est.explain_effects(X.iloc[:5], background=X.drop(columns="a"))
    with pytest.raises(ValueError, match=r"material_share=1.5 must be in \[0, 1\]"):
        est.explain_effects(X.iloc[:5], material_share=1.5)
    with pytest.raises(NotFittedError):
        TabNetClassifier().explain_effects(X)
    pre = TabNetPretrainer(**TINY_FIT).fit(X)
    with pytest.raises(TypeError, match="TabNetPretrainer has no predictions to explain"):
        pre.explain_effects(X)


def test_effects_checks_its_shape() -> None:
    with pytest.raises(ValueError, match=r"effects \(2, 3\) must be \(n_samples, 2\)"):
        Effects(np.ones((2, 3)), ["a", "b"])
    got = Effects(np.array([[0.0, 0.0], [1.0, 3.0]]), ["a", "b"])
    np.testing.assert_array_equal(got.importances, [[0, 0], [0.25, 0.75]])
    np.testing.assert_array_equal(got.selected, [[False, False], [True, True]])


def test_core_refuses_bad_places_and_draws(binary) -> None:
    est, _ = binary
    data = TensorData(torch.zeros(3, 4), torch.zeros(3, 1, dtype=torch.int64))
    g = torch.Generator().manual_seed(0)
    with pytest.raises(ValueError, match="n_draws=0 must be >= 1"):
        column_effects(est.network_, data, data, [("numeric", 0)], n_draws=0, generator=g)
    with pytest.raises(ValueError, match=r"column place \('numeric', 4\) is not in the data"):
        column_effects(est.network_, data, data, [("numeric", 4)], n_draws=1, generator=g)
    with pytest.raises(ValueError, match=r"column place \('other', 0\)"):
        column_effects(est.network_, data, data, [("other", 0)], n_draws=1, generator=g)


class _Recorder(torch.nn.Module):
    """A stand-in network whose output is its first numeric column: the effect of column 0 is
    then the mean distance of the drawn values from the row's own."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[torch.Tensor] = []

    def forward(self, numeric: torch.Tensor, codes: torch.Tensor, *, with_masks: bool):  # type: ignore[no-untyped-def]
        from tabsparse.nn.network import NetworkOutput

        self.seen.append(numeric[:, 0].clone())
        return NetworkOutput(numeric[:, :1], torch.empty(0), torch.zeros(()), torch.empty(0))


def test_draws_are_stratified_over_the_background() -> None:
    """Each row's k-th draw is the background's quantile in slice k: with 100 background values
    0..99 and 4 draws, every row gets one value from each of 0-24, 25-49, 50-74 and 75-99."""
    rows = TensorData(torch.zeros(50, 1), torch.zeros(50, 0, dtype=torch.int64))
    values = torch.randperm(100, generator=torch.Generator().manual_seed(1)).double()
    background = TensorData(values.unsqueeze(1), torch.zeros(100, 0, dtype=torch.int64))
    net = _Recorder()
    got = column_effects(
        net, rows, background, [("numeric", 0)], n_draws=4, generator=torch.Generator()
    )
    drawn = net.seen[1].view(4, 50)  # the base pass first, then column 0's draws
    np.testing.assert_array_equal((drawn // 25).numpy(), np.repeat(np.arange(4), 50).reshape(4, 50))
    assert len(set(drawn[0].tolist())) > 10  # a different value within the slice for each row
    np.testing.assert_allclose(got[:, 0].numpy(), drawn.mean(dim=0).numpy(), rtol=1e-6)
    # the mean over many rows is the mean distance from 0 of a uniform draw of 0..99
    many = TensorData(torch.zeros(4000, 1), torch.zeros(4000, 0, dtype=torch.int64))
    mean = column_effects(
        _Recorder(), many, background, [("numeric", 0)], n_draws=4, generator=torch.Generator()
    ).mean()
    assert float(mean) == pytest.approx(49.5, abs=0.5)


def test_a_sparse_background_draws_the_dense_values() -> None:
    rng = np.random.default_rng(5)
    dense = rng.normal(size=(120, 4)) * (rng.random((120, 4)) < 0.5)
    y = (dense[:, 0] > 0).astype(int)
    model = TabNetClassifier(**TINY_FIT).fit(dense, y)
    a = model.explain_effects(dense[:30], background=dense, n_draws=3)
    b = model.explain_effects(dense[:30], background=sp.csr_matrix(dense), n_draws=3)
    np.testing.assert_array_equal(a.effects, b.effects)
