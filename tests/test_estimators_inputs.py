"""Input formats through the estimators: polars and pyarrow tables, scipy sparse matrices,
datetime columns expanded into parts (issue 25 items 1, 6 and 8)."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from tabsparse import TabNetClassifier, TabNetPretrainer, TabNetRegressor
from tabsparse.data import ColumnWarning

pl = pytest.importorskip("polars")
pa = pytest.importorskip("pyarrow")
sp = pytest.importorskip("scipy.sparse")

TINY: dict[str, Any] = {"n_d": 4, "n_a": 4, "n_steps": 2, "max_epochs": 3, "random_state": 0}


def frame(n: int = 240, seed: int = 0) -> tuple[pd.DataFrame, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = pd.DataFrame(
        {
            "a": rng.normal(size=n),
            "b": 5 * rng.normal(size=n),
            "c": rng.choice(["u", "v", "w"], size=n),
            "d": pd.array(rng.integers(0, 4, size=n), dtype="Int64"),
        }
    )
    y = ((X["a"] > 0) ^ (X["c"] == "u")).to_numpy().astype(int)
    return X, y


# ---- polars and pyarrow ------------------------------------------------------------------------


def test_polars_fit_records_names_and_predicts_as_the_pandas_fit() -> None:
    X, y = frame()
    P = pl.from_pandas(X)
    from_polars = TabNetClassifier(**TINY).fit(P, y)
    from_pandas = TabNetClassifier(**TINY).fit(X, y)
    assert list(from_polars.feature_names_in_) == ["a", "b", "c", "d"]
    assert from_polars.encoder_.kinds == from_pandas.encoder_.kinds
    expected = from_pandas.predict_proba(X)
    np.testing.assert_array_equal(from_polars.predict_proba(P), expected)
    # the pandas-fitted model given the polars frame and the Arrow table
    np.testing.assert_array_equal(from_pandas.predict_proba(P), expected)
    np.testing.assert_array_equal(from_pandas.predict_proba(P.to_arrow()), expected)
    batch = P.to_arrow().to_batches()[0]
    n = batch.num_rows
    np.testing.assert_array_equal(from_pandas.predict_proba(batch), expected[:n])


def test_a_reordered_polars_frame_is_matched_by_name() -> None:
    X, _ = frame()
    P = pl.from_pandas(X)
    model = TabNetRegressor(**TINY).fit(P, X["a"].to_numpy())
    expected = model.predict(P)
    np.testing.assert_array_equal(model.predict(P.select(["d", "c", "b", "a"])), expected)
    np.testing.assert_array_equal(
        model.predict(P.select(["d", "c", "b", "a"]).to_arrow()), expected
    )
    # the same refusal as for pandas
    with pytest.raises(ValueError, match=r"missing columns: \['c'\]") as from_pandas:
        model.predict(X[["a", "b", "d"]])
    with pytest.raises(ValueError, match=r"missing columns: \['c'\]") as from_polars:
        model.predict(P.select(["a", "b", "d"]))
    assert str(from_polars.value) == str(from_pandas.value)


def test_explain_score_and_x_val_take_polars() -> None:
    X, y = frame()
    P = pl.from_pandas(X)
    model = TabNetClassifier(**TINY).fit(P[:200], y[:200], X_val=P[200:], y_val=y[200:])
    reference = TabNetClassifier(**TINY).fit(X[:200], y[:200], X_val=X[200:], y_val=y[200:])
    assert [r["val_loss"] for r in model.history_] == [r["val_loss"] for r in reference.history_]
    explanation = model.explain(P[:5])
    assert explanation.feature_names == ["a", "b", "c", "d"]
    np.testing.assert_array_equal(explanation.importances, reference.explain(X[:5]).importances)
    assert model.score(P, y) == reference.score(X, y)


def test_pretrainer_takes_polars() -> None:
    X, _ = frame()
    P = pl.from_pandas(X)
    pre = TabNetPretrainer(**TINY, batch_size=64).fit(P)
    reference = TabNetPretrainer(**TINY, batch_size=64).fit(X)
    assert list(pre.feature_names_in_) == ["a", "b", "c", "d"]
    np.testing.assert_array_equal(
        pre.transform(P.select(["c", "a", "d", "b"])), reference.transform(X)
    )


def test_a_lazy_frame_is_refused_with_collect() -> None:
    X, y = frame()
    with pytest.raises(TypeError, match=r"lazy frame .*X\.collect\(\)"):
        TabNetClassifier(**TINY).fit(pl.from_pandas(X).lazy(), y)


# ---- scipy sparse ------------------------------------------------------------------------------


def sparse_data(n: int = 300, k: int = 12, seed: int = 0) -> tuple[Any, np.ndarray]:
    rng = np.random.default_rng(seed)
    dense = rng.normal(size=(n, k)) * (rng.random((n, k)) < 0.3)
    y = (dense[:, 0] + dense[:, 1] > 0).astype(int)
    return sp.csr_matrix(dense), y


@pytest.mark.parametrize("fmt", ["csr", "csc", "coo"])
def test_sparse_fit_predict_explain_equal_the_dense_fit(fmt: str) -> None:
    X, y = sparse_data()
    Xs = X.asformat(fmt)
    dense = X.toarray()
    sparse_model = TabNetClassifier(**TINY).fit(Xs, y)
    dense_model = TabNetClassifier(**TINY).fit(dense, y)
    assert sparse_model.n_features_in_ == 12
    assert not hasattr(sparse_model, "feature_names_in_")
    np.testing.assert_array_equal(sparse_model.predict_proba(Xs), dense_model.predict_proba(dense))
    np.testing.assert_array_equal(sparse_model.predict_proba(dense), dense_model.predict_proba(Xs))
    np.testing.assert_array_equal(sparse_model.explain(Xs).masks, dense_model.explain(dense).masks)
    np.testing.assert_array_equal(
        sparse_model.feature_importances_, dense_model.feature_importances_
    )


def test_sparse_prediction_is_encoded_block_by_block(monkeypatch: pytest.MonkeyPatch) -> None:
    import tabsparse.estimators._tables as base

    X, y = sparse_data(n=300)
    model = TabNetRegressor(**TINY).fit(X, y.astype(float))
    whole = model.predict(X)
    whole_explanation = model.explain(X)
    seen: list[int] = []
    transform = model.encoder_.transform

    def recording(table: Any) -> Any:
        seen.append(table.shape[0])
        return transform(table)

    monkeypatch.setattr(base, "SPARSE_BLOCK_ROWS", 128)
    monkeypatch.setattr(model.encoder_, "transform", recording)
    np.testing.assert_allclose(model.predict(X), whole, rtol=1e-5, atol=1e-6)
    assert seen == [128, 128, 44]
    explanation = model.explain(X)
    np.testing.assert_allclose(explanation.masks, whole_explanation.masks, rtol=1e-5, atol=1e-6)
    assert explanation.masks.shape == whole_explanation.masks.shape


def test_pretrainer_takes_sparse_input_as_the_dense_table(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import tabsparse.estimators._tables as base

    X, _ = sparse_data(n=300)
    dense = X.toarray()
    pre = TabNetPretrainer(**TINY, batch_size=64).fit(X)
    reference = TabNetPretrainer(**TINY, batch_size=64).fit(dense)
    expected = reference.transform(dense)
    np.testing.assert_array_equal(pre.transform(X), expected)
    monkeypatch.setattr(base, "SPARSE_BLOCK_ROWS", 100)  # three blocks of rows
    np.testing.assert_allclose(pre.transform(X.tocsc()), expected, rtol=1e-5, atol=1e-6)


def test_sparse_input_in_a_column_transformer_pipeline() -> None:
    from sklearn.compose import make_column_transformer
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import OneHotEncoder

    X, y = frame()
    ohe = make_column_transformer(
        (OneHotEncoder(), ["c"]), remainder="passthrough", sparse_threshold=1.0
    )
    pipe = make_pipeline(ohe, TabNetClassifier(**TINY)).fit(X[["a", "c"]], y)
    encoded = ohe.fit_transform(X[["a", "c"]])
    assert sp.issparse(encoded)
    direct = TabNetClassifier(**TINY).fit(sp.csr_matrix(encoded), y)
    np.testing.assert_array_equal(
        pipe.predict_proba(X[["a", "c"]]), direct.predict_proba(sp.csr_matrix(encoded))
    )


# ---- datetime columns --------------------------------------------------------------------------


def dated(n: int = 240, seed: int = 0) -> tuple[pd.DataFrame, np.ndarray]:
    rng = np.random.default_rng(seed)
    when = pd.Timestamp("2024-01-01") + pd.to_timedelta(rng.integers(0, 400 * 24, n), unit="h")
    X = pd.DataFrame({"a": rng.normal(size=n), "when": when})
    y = (when.month >= 6).astype(int)
    return X, np.asarray(y)


def test_datetime_features_expand_through_the_estimator() -> None:
    X, y = dated()
    with pytest.raises(TypeError, match="datetime"):
        TabNetClassifier(**TINY).fit(X, y)
    model = TabNetClassifier(**TINY, datetime_features="expand").fit(X, y)
    assert model.n_features_in_ == 2
    assert list(model.feature_names_in_) == ["a", "when"]
    parts = [f"when__{part}" for part in model.encoder_.datetime_parts["when"]]
    assert "when__month" in parts
    assert model.encoder_.feature_names == ["a", *parts]
    # one entry per input column: the parts summed back to their column
    explanation = model.explain(X[:4])
    assert explanation.feature_names == ["a", "when"]
    assert explanation.importances.shape == (4, 2)
    assert explanation.masks.shape == (model.n_steps, 4, 2)
    by_part = model.explain(X[:4], datetime_parts=True)
    assert by_part.feature_names == ["a", *parts]
    np.testing.assert_allclose(
        explanation.importances,
        np.c_[by_part.importances[:, 0], by_part.importances[:, 1:].sum(axis=1)],
        rtol=1e-6,
    )
    np.testing.assert_allclose(explanation.importances.sum(axis=1), 1.0, rtol=1e-5)
    np.testing.assert_allclose(explanation.masks.sum(axis=2), 1.0, rtol=1e-5)
    importances = pd.Series(model.feature_importances_, index=model.feature_names_in_)
    assert list(importances.index) == ["a", "when"]
    assert importances.sum() == pytest.approx(1.0, rel=1e-5)
    assert model.feature_importances_std_.shape == (2,)
    # matched by name in any order, like any DataFrame
    np.testing.assert_array_equal(model.predict_proba(X[["when", "a"]]), model.predict_proba(X))


def test_grouped_features_may_name_an_expanded_datetime_column() -> None:
    X, y = dated()
    X = X.assign(b=X["a"] * 2)
    model = TabNetClassifier(
        **TINY, datetime_features="expand", grouped_features=[["when"], ["a", "b"]]
    ).fit(X, y)
    names = model.encoder_.feature_names
    masks = model.explain(X[:20], datetime_parts=True).masks
    parts = [names.index(n) for n in names if n.startswith("when__")]
    assert len(parts) >= 3
    # a group is selected together: its columns share the group's mask weight equally
    for cols in (parts, [names.index("a"), names.index("b")]):
        np.testing.assert_allclose(masks[..., cols], masks[..., cols[:1]].repeat(len(cols), -1))


def test_datetime_features_is_a_validated_parameter() -> None:
    X, y = dated()
    assert TabNetRegressor().get_params()["datetime_features"] == "error"
    assert TabNetPretrainer().get_params()["datetime_features"] == "error"
    with pytest.raises(ValueError, match="datetime_features"):
        TabNetClassifier(**TINY, datetime_features="parts").fit(X, y)


def test_expanded_datetime_model_file_round_trip(tmp_path: Path) -> None:
    from tabsparse import load, save

    X, y = dated()
    model = TabNetClassifier(**TINY, datetime_features="expand").fit(X, y)
    save(model, tmp_path / "m.tabsparse")
    loaded = load(tmp_path / "m.tabsparse")
    assert loaded.datetime_features == "expand"
    assert loaded.encoder_.datetime_features == "expand"
    assert list(loaded.feature_names_in_) == ["a", "when"]
    np.testing.assert_array_equal(loaded.predict_proba(X), model.predict_proba(X))


def test_pretrained_schema_with_expanded_datetimes_fine_tunes() -> None:
    X, y = dated()
    pre = TabNetPretrainer(**TINY, batch_size=64, datetime_features="expand").fit(X)
    clf = TabNetClassifier(**TINY, pretrained=pre).fit(X, y)
    assert clf.encoder_.feature_names == pre.encoder_.feature_names
    assert list(clf.feature_names_in_) == ["a", "when"]
    assert clf.predict_proba(X).shape == (len(X), 2)


def test_column_warnings_reach_the_user_through_fit() -> None:
    X, y = frame()
    X = X.assign(id=[f"row-{i}" for i in range(len(X))])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        TabNetClassifier(**TINY).fit(X, y)
    column = [w for w in caught if issubclass(w.category, ColumnWarning)]
    assert len(column) == 1
    assert "'id'" in str(column[0].message) and "nearly unique" in str(column[0].message)


def test_export_refuses_expanded_datetime_columns(tmp_path: Path) -> None:
    X, y = dated()
    model = TabNetClassifier(**TINY, datetime_features="expand").fit(X, y)
    with pytest.raises(ValueError, match=r"export does not support expanded datetime .*'when'"):
        model.export(tmp_path / "m.pt2", format="torch")
    assert not (tmp_path / "m.pt2").exists()


def test_parquet_training_with_a_polars_validation_frame(tmp_path: Path) -> None:
    X, y = frame(300)
    X = X.assign(label=y)
    X.iloc[:150].to_parquet(tmp_path / "part0.parquet")
    X.iloc[150:].to_parquet(tmp_path / "part1.parquet")
    Xv, yv = frame(80, seed=1)
    params = {**TINY, "batch_size": 64}
    with_polars = TabNetClassifier(**params).fit(
        tmp_path, "label", X_val=pl.from_pandas(Xv), y_val=yv
    )
    with_pandas = TabNetClassifier(**params).fit(tmp_path, "label", X_val=Xv, y_val=yv)
    assert list(with_polars.feature_names_in_) == ["a", "b", "c", "d"]
    assert [r["val_loss"] for r in with_polars.history_] == [
        r["val_loss"] for r in with_pandas.history_
    ]
    np.testing.assert_array_equal(
        with_polars.predict_proba(pl.from_pandas(Xv)), with_pandas.predict_proba(Xv)
    )
