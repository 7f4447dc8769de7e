"""Edge cases of input handling where something was lost or silent: missing timestamps of an
aware datetime column, large integers among other categories, columns without information at
fit and drift at predict time, and constant regression targets."""

from __future__ import annotations

import re
import warnings
from typing import Any

import numpy as np
import pandas as pd
import pytest
from conftest import TINY_FIT

from tabsparse import TabNetClassifier, TabNetRegressor
from tabsparse.data import ColumnWarning, DriftWarning, TableEncoder
from tabsparse.data.column_warnings import DRIFT_MIN_ROWS


def _recorded(fn: Any, *args: Any) -> tuple[Any, list[warnings.WarningMessage]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = fn(*args)
    return out, list(caught)


def _messages(caught: list[warnings.WarningMessage], category: type[Warning]) -> list[str]:
    return [str(w.message) for w in caught if issubclass(w.category, category)]


# ---- 3. missing timestamps of a time-zone-aware datetime column ------------------------------


def _aware_and_naive() -> tuple[TableEncoder, TableEncoder, pd.Series]:
    when = pd.Series(pd.date_range("2024-01-01", periods=30, freq="37h", tz="UTC"))
    aware = TableEncoder(datetime_features="expand").fit(pd.DataFrame({"when": when}))
    naive = TableEncoder(datetime_features="expand").fit(
        pd.DataFrame({"when": when.dt.tz_localize(None)})
    )
    return aware, naive, when


@pytest.mark.parametrize("missing", [None, np.nan, pd.NaT], ids=["None", "NaN", "NaT"])
@pytest.mark.parametrize("rows", [1, 2], ids=["one-row", "two-rows"])
def test_a_missing_timestamp_is_missing_whatever_the_fitted_zone(missing: Any, rows: int) -> None:
    aware, naive, _ = _aware_and_naive()
    X = pd.DataFrame({"when": [missing] * rows})  # object, float or datetime64 dtype
    for enc in (aware, naive):
        numeric = enc.transform(X).numeric
        assert numeric.shape == (rows, len(enc.feature_names))
        assert np.isnan(numeric).all()


def test_a_missing_timestamp_next_to_aware_ones_is_missing_in_every_part() -> None:
    aware, _, when = _aware_and_naive()
    X = pd.DataFrame({"when": pd.Series([when[3], None], dtype=object)})
    numeric = aware.transform(X).numeric
    np.testing.assert_array_equal(
        numeric[0], aware.transform(pd.DataFrame({"when": when[3:4]})).numeric[0]
    )
    assert np.isnan(numeric[1]).all()


def test_an_aware_model_predicts_rows_with_missing_timestamps() -> None:
    rng = np.random.default_rng(0)
    when = pd.Series(pd.date_range("2024-01-01", periods=200, freq="7h", tz="Europe/Paris"))
    X = pd.DataFrame({"when": when, "x": rng.normal(size=200)})
    y = (X["x"] > 0).astype(int).to_numpy()
    model = TabNetClassifier(**TINY_FIT, datetime_features="expand").fit(X, y)
    rows = pd.DataFrame({"when": [None, np.nan, pd.NaT], "x": [0.1, 0.2, 0.3]})
    assert model.predict(rows).shape == (3,)


def test_a_column_of_numbers_where_datetimes_were_fitted_is_refused_by_name() -> None:
    _, naive, _ = _aware_and_naive()
    with pytest.raises(
        ValueError, match=re.escape("Column 'when' held datetimes at fit but holds numbers")
    ):
        naive.transform(pd.DataFrame({"when": [1.7e18, np.nan]}))


# ---- 4. large integers among other values of an object column -------------------------------


BIG = 2**60


@pytest.mark.parametrize("with_bool", [True, False], ids=["with-bool", "without-bool"])
def test_large_integers_stay_distinct_categories(with_bool: bool) -> None:
    values = ([True] if with_bool else []) + [BIG + 1, BIG, 7.5]
    X = pd.DataFrame({"c": pd.Series(values * 25, dtype=object)})
    enc = TableEncoder().fit(X)
    want = ([True] if with_bool else []) + [7.5, BIG, BIG + 1]
    assert enc.categories == [want]
    codes = enc.transform(X).codes[: len(values), 0]
    assert [want[c - 2] for c in codes] == values
    # the same values typed otherwise: an int64 column, floats, after a JSON round trip
    again = TableEncoder.from_dict(enc.to_dict())
    ints = pd.DataFrame({"c": np.array([BIG + 1, BIG, BIG + 2], dtype=np.int64)})
    np.testing.assert_array_equal(
        again.transform(ints).codes[:, 0], [want.index(BIG + 1) + 2, want.index(BIG) + 2, 1]
    )
    floats = pd.DataFrame({"c": [float(BIG), 7.5, 8.5]})
    np.testing.assert_array_equal(
        enc.transform(floats).codes[:, 0], [want.index(BIG) + 2, want.index(7.5) + 2, 1]
    )


def test_large_integers_are_kept_apart_as_scikit_learns_ordinal_encoder_does() -> None:
    from sklearn.preprocessing import OrdinalEncoder

    X = pd.DataFrame({"c": pd.Series([BIG + 1, BIG, 7.5, BIG + 3] * 10, dtype=object)})
    ours = TableEncoder().fit(X)
    theirs = OrdinalEncoder().fit(X)
    assert ours.categories[0] == list(theirs.categories_[0])


# ---- 5. columns without information at fit, drift at predict ---------------------------------


def _fit_frame(n: int = 100) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    return pd.DataFrame(
        {
            "bin": rng.choice(["0 - 10%", "11 - 23%", "24 - 50%"], n),
            "x": rng.normal(size=n),
            "empty": np.full(n, np.nan),
            "none": pd.Series([None] * n, dtype=object),
            "k": np.full(n, 3.0),
            "s": ["a"] * n,
        }
    )


def test_all_missing_and_constant_columns_warn_at_fit_naming_them() -> None:
    X = _fit_frame()
    _, caught = _recorded(TableEncoder().fit, X)
    assert sorted(_messages(caught, ColumnWarning)) == [
        "Column 'empty' is missing in all 100 rows at fit, so it carries no information; "
        "values it has at transform are treated as missing, so they cannot move predictions. "
        "Drop it from X.",
        "Column 'k' is constant at fit (3 in all 100 rows), so it carries no information; "
        "another value at transform is outside what the model was trained on. Drop it from X.",
        "Column 'none' is missing in all 100 rows at fit, so it carries no information; "
        "values it has at transform are treated as missing, so they cannot move predictions. "
        "Drop it from X.",
        "Column 's' is constant at fit ('a' in all 100 rows), so it carries no information; "
        "another value at transform is outside what the model was trained on. Drop it from X.",
    ]


def test_columns_with_one_value_and_missing_ones_or_one_row_do_not_warn() -> None:
    X = pd.DataFrame({"k": [3.0, np.nan] * 10, "s": ["a", None] * 10})
    _, caught = _recorded(TableEncoder().fit, X)
    assert _messages(caught, ColumnWarning) == []
    _, caught = _recorded(TableEncoder().fit, pd.DataFrame({"k": [3.0], "s": ["a"]}))
    assert _messages(caught, ColumnWarning) == []


def test_a_constant_declared_category_column_warns() -> None:
    X = pd.DataFrame({"c": pd.Categorical(["b"] * 10, categories=["a", "b"])})
    _, caught = _recorded(TableEncoder().fit, X)
    assert _messages(caught, ColumnWarning) == [
        "Column 'c' is constant at fit ('b' in all 10 rows), so it carries no information; "
        "another value at transform is outside what the model was trained on. Drop it from X."
    ]


def test_mostly_unseen_categories_at_transform_warn_naming_column_and_figures() -> None:
    X = _fit_frame()
    enc = _recorded(TableEncoder().fit, X)[0]
    T = X.copy()
    T["bin"] = T["bin"].str.replace(" - ", "-")  # "11-23%" instead of "11 - 23%"
    T.loc[:9, "bin"] = "0 - 10%"  # 10 of 100 rows still seen (some may be)
    seen = int((T["bin"] == "0 - 10%").sum())
    _, caught = _recorded(enc.transform, T)
    (message,) = _messages(caught, DriftWarning)
    first = T["bin"][T["bin"] != "0 - 10%"].iloc[0]
    assert message == (
        f"Column 'bin' has categories not seen at fit in {100 - seen} of 100 rows "
        f"({100 - seen}%) here (e.g. {first!r}; fit saw 3 categories); unseen categories are "
        "all encoded alike, so the model cannot tell these rows apart by this column. Check "
        "that the values are spelled and typed as in the training data."
    )


def test_a_few_unseen_categories_or_a_small_transform_do_not_warn() -> None:
    X = _fit_frame()
    enc = _recorded(TableEncoder().fit, X)[0]
    T = X.copy()
    T.loc[:49, "bin"] = "new"  # exactly half: not more than half
    assert _messages(_recorded(enc.transform, T)[1], DriftWarning) == []
    small = X.iloc[: DRIFT_MIN_ROWS - 1].assign(bin="new")
    assert _messages(_recorded(enc.transform, small)[1], DriftWarning) == []
    at_min = X.iloc[:DRIFT_MIN_ROWS].assign(bin="new")
    assert len(_messages(_recorded(enc.transform, at_min)[1], DriftWarning)) == 1


def test_mostly_missing_at_transform_where_fit_saw_few_warns() -> None:
    X = _fit_frame()
    X.loc[:4, "x"] = np.nan  # 5% missing at fit
    enc = _recorded(TableEncoder().fit, X)[0]
    T = X.copy()
    T.loc[:59, "x"] = np.nan
    T.loc[:79, "bin"] = None
    messages = _messages(_recorded(enc.transform, T)[1], DriftWarning)
    assert sorted(messages) == [
        "Column 'bin' is missing in 80 of 100 rows (80%) here but was missing in 0 of 100 rows "
        "(0%) at fit; predictions for these rows rest on the value the model learnt for a "
        "missing entry. Check how the column was produced.",
        "Column 'x' is missing in 60 of 100 rows (60%) here but was missing in 5 of 100 rows "
        "(5%) at fit; predictions for these rows rest on the value the model learnt for a "
        "missing entry. Check how the column was produced.",
    ]
    # fit saw many missing values: the same transform is no drift
    X.loc[:39, "x"] = np.nan
    enc = _recorded(TableEncoder().fit, X)[0]
    messages = _messages(_recorded(enc.transform, T)[1], DriftWarning)
    assert [m[:12] for m in messages] == ["Column 'bin'"]


def test_a_column_missing_at_fit_is_missing_at_transform_and_warns_when_filled() -> None:
    X = _fit_frame()
    enc = _recorded(TableEncoder().fit, X)[0]
    T = X.assign(empty=1.5, none="filled")
    out, caught = _recorded(enc.transform, T)
    base = enc.transform(X)
    np.testing.assert_array_equal(out.numeric, base.numeric)  # NaN in place of 1.5
    np.testing.assert_array_equal(out.codes, base.codes)  # missing, not unseen
    assert sorted(_messages(caught, DriftWarning)) == [
        "Column 'empty' was missing in every row at fit but has values in 100 of 100 rows "
        "(100%) here; the model never learnt from it, so they are treated as missing.",
        "Column 'none' was missing in every row at fit but has values in 100 of 100 rows "
        "(100%) here; the model never learnt from it, so they are treated as missing.",
    ]
    assert (T["empty"] == 1.5).all()  # the caller's data is untouched
    # also for a float32 array, which the encoder reads without a copy
    arr = np.c_[np.random.default_rng(0).normal(size=30), np.full(30, np.nan)].astype(np.float32)
    enc = _recorded(TableEncoder().fit, arr)[0]
    filled = arr.copy()
    filled[:, 1] = 4.0
    out = _recorded(enc.transform, filled)[0]
    assert np.isnan(out.numeric[:, 1]).all()
    assert (filled[:, 1] == 4.0).all()
    # and after a JSON round trip of the state
    again = TableEncoder.from_dict(enc.to_dict())
    assert np.isnan(_recorded(again.transform, filled)[0].numeric[:, 1]).all()


def test_a_column_missing_at_fit_cannot_move_predictions() -> None:
    X = _fit_frame(200).drop(columns=["k", "s"])
    y = X["x"].to_numpy() * 2
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ColumnWarning)
        model = TabNetRegressor(**TINY_FIT).fit(X, y)
    filled = X.assign(empty=5.0, none="z")
    with pytest.warns(DriftWarning, match="Column 'empty' was missing in every row at fit"):
        got = model.predict(filled)
    np.testing.assert_array_equal(got, model.predict(X))


def test_old_states_without_categorical_missing_counts_still_work() -> None:
    X = _fit_frame()
    enc = _recorded(TableEncoder().fit, X)[0]
    state = enc.to_dict()
    assert state["categorical_missing"] == [0, 100, 0]
    del state["categorical_missing"]
    old = TableEncoder.from_dict(state)
    T = X.assign(none="filled")
    np.testing.assert_array_equal(old.transform(T).codes, enc.transform(X).codes)
    bad = {**enc.to_dict(), "categorical_missing": [0, 101, 0]}
    with pytest.raises(ValueError, match="'categorical_missing' must contain ints between 0"):
        TableEncoder.from_dict(bad)


# ---- 6c. constant regression targets -----------------------------------------------------------


@pytest.mark.parametrize(
    "params",
    [{}, {"loss": "poisson"}, {"loss": "quantile", "quantile": [0.1, 0.9]}, {"loss": "huber"}],
    ids=["squared_error", "poisson", "quantiles", "huber"],
)
def test_a_constant_target_is_predicted_exactly(params: dict[str, Any]) -> None:
    X = np.random.default_rng(0).normal(size=(150, 3))
    model = TabNetRegressor(**TINY_FIT, **params).fit(X, np.full(150, 0.1))
    pred = model.predict(X)
    assert (pred == 0.1).all()
    assert model.target_mean_.tolist() == [0.1] and model.target_scale_.tolist() == [0.0]


def test_constant_outputs_of_a_multi_output_target_are_predicted_exactly() -> None:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(150, 3))
    Y = np.c_[np.full(150, 1.0), X[:, 0], np.full(150, -3.7)]
    model = TabNetRegressor(**TINY_FIT).fit(X, Y, X_val=X[:20], y_val=Y[:20] + 1.0)
    pred = model.predict(X)
    assert (pred[:, 0] == 1.0).all() and (pred[:, 2] == -3.7).all()
    assert np.unique(pred[:, 1]).size > 1  # the varying output is modelled
    assert model.target_scale_[0] == 0.0 and model.target_scale_[1] > 0
    assert np.isfinite(model.history_[-1]["val_loss"])


def test_values_that_are_no_datetimes_where_datetimes_were_fitted_are_refused_by_name() -> None:
    aware, _, _ = _aware_and_naive()
    with pytest.raises(
        ValueError,
        match=re.escape("Column 'when' held datetimes at fit, but its values here could not be"),
    ):
        aware.transform(pd.DataFrame({"when": ["not a date", None]}))


def test_the_smallest_int64_is_a_category_like_any_other() -> None:
    # -2**63 lies in the int64 range: an int category, the same as the float -2.0**63
    low = -(2**63)
    X = pd.DataFrame({"c": pd.Series([False, low, 0, float(low), "a"] * 5, dtype=object)})
    enc = TableEncoder().fit(X)
    assert enc.categories == [[False, low, 0, "a"]]
    np.testing.assert_array_equal(enc.transform(X).codes[:5, 0], [2, 3, 4, 3, 5])
    ints = pd.DataFrame({"c": np.array([low, 0], dtype=np.int64)})
    again = TableEncoder.from_dict(enc.to_dict())
    np.testing.assert_array_equal(again.transform(ints).codes[:, 0], [3, 4])
