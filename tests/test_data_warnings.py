"""Tests for tabsparse.data.column_warnings and tabsparse.data.datetimes: columns that are not
features (identifiers, dates as strings) and datetime columns expanded into numeric parts."""

from __future__ import annotations

import datetime as dt
import json
import warnings

import numpy as np
import pandas as pd
import pytest

from tabsparse.data import DATETIME_PARTS, ColumnWarning, TableEncoder, describe_columns


def _fit_recording(enc: TableEncoder, X: object) -> list[warnings.WarningMessage]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        enc.fit(X)
    return list(caught)


def _column_warnings(caught: list[warnings.WarningMessage]) -> dict[str, str]:
    """Message per column named in a ColumnWarning; fails on a second warning for a column."""
    out: dict[str, str] = {}
    for w in caught:
        assert issubclass(w.category, ColumnWarning), w.message
        name = str(w.message).split("'")[1]
        assert name not in out, f"two warnings for {name!r}"
        out[name] = str(w.message)
    return out


# ---- warnings --------------------------------------------------------------------------------


def test_column_warning_is_a_user_warning() -> None:
    assert issubclass(ColumnWarning, UserWarning)


def test_nearly_unique_text_column_warns_once_naming_it() -> None:
    n = 200
    df = pd.DataFrame(
        {
            "user_id": [f"u{i:04d}" for i in range(n)],
            "title": [f"A title number {i}" for i in range(n)],
            "colour": ["red", "green", "blue", "red"] * (n // 4),
            "x": np.arange(n, dtype=float),  # unique numbers are fine
            "cat": pd.Categorical([f"c{i}" for i in range(n)]),  # a declared dtype is fine
        }
    )
    messages = _column_warnings(_fit_recording(TableEncoder(), df))
    assert sorted(messages) == ["title", "user_id"]
    assert messages["user_id"].startswith(
        "Column 'user_id' is nearly unique per row (200 distinct values in 200 rows)"
    )
    assert "Drop it from X" in messages["user_id"]


@pytest.mark.parametrize(
    ("n_rows", "n_distinct", "warned"),
    [(49, 49, False), (50, 50, True), (100, 95, False), (100, 96, True), (100, 100, True)],
)
def test_nearly_unique_thresholds(n_rows: int, n_distinct: int, warned: bool) -> None:
    values = [f"v{i % n_distinct}" for i in range(n_rows)]
    caught = _fit_recording(TableEncoder(), pd.DataFrame({"s": values}))
    assert (list(_column_warnings(caught)) == ["s"]) is warned


def test_missing_values_do_not_count_as_rows() -> None:
    values: list[object] = [f"v{i}" for i in range(60)] + [None] * 140
    messages = _column_warnings(_fit_recording(TableEncoder(), pd.DataFrame({"s": values})))
    assert "(60 distinct values in 60 rows)" in messages["s"]


@pytest.mark.parametrize(
    "dates",
    [
        ["2024-03-01", "2024-03-02", "2024-04-11", "2023-12-31", "2024-01-05", "2024-02-29"],
        ["2024-03-01T12:30:00Z", "2024-03-01 13:00", "2024-03-02T00:00:00.5+01:00"] * 2,
        ["01/03/2024", "31/12/2023", "1.2.2024", "12/31/2023", "5/6/2021", "07-08-2020"],
        ["2024/03/01 10:00:00", "2024/3/2", "2024/12/01 23:59", "2020/01/01"] * 2,
        ["05-Jan-2024", "Jan 5, 2024", "5 January 2024", "Sep. 30, 2021", "1 Mar 2020 10:00"],
    ],
)
def test_dates_stored_as_strings_warn_once_with_advice(dates: list[str]) -> None:
    df = pd.DataFrame({"when": dates, "x": np.arange(len(dates), dtype=float)})
    caught = _fit_recording(TableEncoder(), df)
    messages = _column_warnings(caught)  # also: no pandas format-guessing warning
    assert list(messages) == ["when"]
    assert messages["when"].startswith("Column 'when' looks like dates stored as strings (e.g. '")
    assert "datetime_features='expand'" in messages["when"]
    assert "pandas.to_datetime" in messages["when"]


def test_unique_dates_get_only_the_date_warning() -> None:
    days = pd.date_range("2020-01-01", periods=80).strftime("%Y-%m-%d").tolist()
    messages = _column_warnings(_fit_recording(TableEncoder(), pd.DataFrame({"d": days})))
    assert list(messages) == ["d"] and "looks like dates" in messages["d"]


@pytest.mark.parametrize(
    "values",
    [
        ["2024-03-01", "2024-03-02", "not a date", "n/a", "2024-01-01", "x"],  # too few dates
        ["12345678", "2024", "3/4", "10:30", "1-2-3", "2024-13-01"],  # not dates
        ["2024-03-01", "2024-03-02", "2024-03-03"],  # fewer than 5 values
    ],
)
def test_text_that_is_not_mostly_dates_does_not_warn(values: list[str]) -> None:
    assert _fit_recording(TableEncoder(), pd.DataFrame({"s": values})) == []


def test_object_array_columns_are_checked_and_named_by_position() -> None:
    X = np.array([[f"id{i}", "2021-05-06", i % 3] for i in range(60)], dtype=object)
    messages = _column_warnings(_fit_recording(TableEncoder(), X))
    assert sorted(messages) == ["x0", "x1"]
    assert "looks like dates" in messages["x1"]


def test_warning_points_at_the_callers_line() -> None:
    df = pd.DataFrame({"id": [f"u{i}" for i in range(60)]})
    with pytest.warns(ColumnWarning) as record:
        TableEncoder().fit_transform(df)
    assert record[0].filename == __file__


def test_warning_skips_every_tabsparse_frame() -> None:
    # as through an estimator: a function of a tabsparse module calls the encoder
    namespace = {"__name__": "tabsparse.estimators.fake", "TableEncoder": TableEncoder}
    exec("def fit(X):\n    return TableEncoder().fit(X)\n", namespace)
    df = pd.DataFrame({"id": [f"u{i}" for i in range(60)]})
    with pytest.warns(ColumnWarning) as record:
        namespace["fit"](df)  # type: ignore[operator]
    assert record[0].filename == __file__


def test_partial_fit_warns_on_the_first_chunk_only() -> None:
    chunk = pd.DataFrame({"id": [f"u{i}" for i in range(60)]})
    enc = TableEncoder()
    assert list(_column_warnings(_fit_recording_partial(enc, chunk))) == ["id"]
    assert _fit_recording_partial(enc, chunk) == []
    enc.fit(chunk.iloc[:10])  # a new fit checks again (10 rows: too few to say)


def _fit_recording_partial(enc: TableEncoder, X: object) -> list[warnings.WarningMessage]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        enc.partial_fit(X)
    return list(caught)


# ---- datetime expansion ------------------------------------------------------------------------


def test_datetime_columns_are_refused_by_default_with_the_option_named() -> None:
    df = pd.DataFrame({"t": pd.date_range("2020-01-01", periods=3)})
    with pytest.raises(TypeError, match=r"has datetime values.*datetime_features='expand'"):
        TableEncoder().fit(df)
    with pytest.raises(ValueError, match="datetime_features must be 'error' or 'expand'"):
        TableEncoder(datetime_features="parts").fit(df)


def test_expanded_parts_values_and_names() -> None:
    when = pd.to_datetime(
        np.array(["2021-03-04T05:06:07", "2022-12-31T23:59:58", "NaT", "2024-02-29"], "M8[s]")
    )
    df = pd.DataFrame({"a": [1.0, 2.0, 3.0, 4.0], "when": when, "c": ["u", "v", "u", "v"]})
    enc = TableEncoder(datetime_features="expand")
    out = enc.fit_transform(df)
    assert enc.input_names == ["a", "when", "c"]
    assert enc.feature_names == ["a", *[f"when__{p}" for p in DATETIME_PARTS], "c"]
    assert enc.datetime_parts == {"when": list(DATETIME_PARTS)}
    assert enc.datetime_zones == {"when": None}
    assert enc.kinds == ["numeric"] * 9 + ["categorical"]
    assert enc.numeric_columns == list(range(9)) and enc.categorical_columns == [9]
    expected = np.array(
        [
            [1, 2021, 3, 4, 3, 63, 5, 6, 7],
            [2, 2022, 12, 31, 5, 365, 23, 59, 58],
            [3] + [np.nan] * 8,  # NaT: missing in every part
            [4, 2024, 2, 29, 3, 60, 0, 0, 0],
        ],
        dtype=np.float32,
    )
    np.testing.assert_array_equal(out.numeric, expected)
    np.testing.assert_array_equal(out.codes[:, 0], [2, 3, 2, 3])
    assert enc.numeric_missing.tolist() == [False] + [True] * 8
    assert describe_columns(enc)[1] == ("when__year", "numeric", 0)


def test_only_varying_parts_are_kept() -> None:
    days = pd.Series(np.array(["2021-01-04", "2021-01-05", "NaT", "2021-01-11"], "M8[ns]"))
    enc = TableEncoder(datetime_features="expand").fit(pd.DataFrame({"d": days}))
    assert enc.datetime_parts == {"d": ["day", "dayofweek", "dayofyear"]}
    assert enc.feature_names == ["d__day", "d__dayofweek", "d__dayofyear"]
    constant = pd.DataFrame({"d": pd.to_datetime(["2021-01-04"] * 3)})
    assert TableEncoder(datetime_features="expand").fit(constant).feature_names == ["d__year"]
    all_missing = pd.DataFrame({"d": pd.Series([pd.NaT, pd.NaT], dtype="datetime64[ns]")})
    enc = TableEncoder(datetime_features="expand")
    assert np.isnan(enc.fit_transform(all_missing).numeric).all()
    assert enc.feature_names == ["d__year"]


def test_unseen_values_at_transform_use_the_fitted_parts() -> None:
    fit = pd.DataFrame({"d": pd.to_datetime(["2021-01-04", "2021-02-05"])})
    enc = TableEncoder(datetime_features="expand").fit(fit)
    assert enc.datetime_parts["d"] == ["month", "day", "dayofweek", "dayofyear"]
    new = pd.DataFrame({"d": pd.to_datetime(["2030-07-14 18:30"])})
    np.testing.assert_array_equal(enc.transform(new).numeric, [[7, 14, 6, 195]])


def test_timezone_aware_columns_use_the_fitted_zone() -> None:
    paris = pd.Series(pd.to_datetime(["2021-06-01 23:30", "2021-06-02 08:15"])).dt.tz_localize(
        "Europe/Paris"
    )
    enc = TableEncoder(datetime_features="expand")
    out = enc.fit_transform(pd.DataFrame({"t": paris}))
    assert enc.datetime_zones == {"t": "Europe/Paris"}
    assert enc.datetime_parts["t"] == ["day", "dayofweek", "dayofyear", "hour", "minute"]
    np.testing.assert_array_equal(out.numeric[:, 3], [23, 8])  # Paris wall-clock hours
    utc = pd.DataFrame({"t": paris.dt.tz_convert("UTC")})  # same instants, another zone
    np.testing.assert_array_equal(enc.transform(utc).numeric, out.numeric)
    with pytest.raises(ValueError, match="'t' was in time zone 'Europe/Paris' at fit but is "):
        enc.transform(pd.DataFrame({"t": paris.dt.tz_localize(None)}))
    naive = TableEncoder(datetime_features="expand").fit(
        pd.DataFrame({"t": paris.dt.tz_localize(None)})
    )
    with pytest.raises(ValueError, match="timezone-naive at fit but is in time zone 'UTC'"):
        naive.transform(utc)


def test_numpy_datetime64_and_object_dates_expand() -> None:
    arr = np.array(["2020-01-01", "2020-03-01", "NaT"], dtype="datetime64[D]").reshape(-1, 1)
    enc = TableEncoder(datetime_features="expand")
    out = enc.fit_transform(arr)
    assert enc.feature_names == ["x0__month", "x0__dayofweek", "x0__dayofyear"]
    np.testing.assert_array_equal(out.numeric[:2], [[1, 2, 1], [3, 6, 61]])
    assert np.isnan(out.numeric[2]).all()
    objects = np.array([[dt.date(2020, 1, 1), 1.0], [None, 2.0], [dt.date(2021, 1, 1), 3.0]])
    enc = TableEncoder(datetime_features="expand")
    out = enc.fit_transform(objects)
    assert enc.feature_names == ["x0__year", "x0__dayofweek", "x1"]
    np.testing.assert_array_equal(out.numeric[[0, 2]], [[2020, 2, 1], [2021, 4, 3]])


def test_categorical_datetime_columns_and_name_clashes() -> None:
    df = pd.DataFrame({"t": pd.date_range("2020-01-01", periods=3), "x": [1, 2, 3]})
    with pytest.raises(TypeError, match="has datetime values"):
        TableEncoder(categorical_features=["t"], datetime_features="expand").fit(df)
    clash = df.assign(t__day=[1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match=r"clash with other column names: \['t__day'\]"):
        TableEncoder(datetime_features="expand").fit(clash)


def test_expanded_columns_are_matched_by_input_name() -> None:
    df = pd.DataFrame({"t": pd.date_range("2020-01-01", periods=3), "x": [1.0, 2.0, 3.0]})
    enc = TableEncoder(datetime_features="expand").fit(df)
    reordered = enc.transform(df[["x", "t"]]).numeric
    np.testing.assert_array_equal(reordered, enc.transform(df).numeric)
    with pytest.raises(ValueError, match=r"missing columns: \['t'\]"):
        enc.transform(df[["x"]])
    with pytest.raises(ValueError, match="X has 1 features, but the encoder was fitted with 2"):
        enc.transform(np.ones((2, 1)))


# ---- state -------------------------------------------------------------------------------------


def _expanded_encoder() -> tuple[TableEncoder, pd.DataFrame]:
    t = pd.Series(pd.date_range("2021-01-01", periods=5, freq="37h", tz="Asia/Tokyo"))
    df = pd.DataFrame({"x": [0.5, 1.0, 1.5, 2.0, 2.5], "t": t, "c": list("abcab")})
    return TableEncoder(datetime_features="expand").fit(df), df


def test_state_version_2_round_trips_expanded_columns() -> None:
    enc, df = _expanded_encoder()
    state = json.loads(json.dumps(enc.to_dict()))
    assert state["version"] == 2
    assert state["datetime_features"] == "expand" and state["input_names"] == ["x", "t", "c"]
    assert state["datetime_columns"] == [
        {"name": "t", "parts": ["day", "dayofweek", "dayofyear", "hour"], "zone": "Asia/Tokyo"}
    ]
    back = TableEncoder.from_dict(state)
    assert (
        repr(back) == "TableEncoder(categorical_features='from_dtype', datetime_features='expand')"
    )
    assert back.feature_names == enc.feature_names and back.input_names == enc.input_names
    np.testing.assert_array_equal(back.transform(df).numeric, enc.transform(df).numeric)


def test_default_state_stays_version_1_and_loads() -> None:
    enc = TableEncoder().fit(pd.DataFrame({"x": [1.0, 2.0]}))
    state = enc.to_dict()
    assert state["version"] == 1 and "input_names" not in state
    back = TableEncoder.from_dict(state)
    assert back.input_names == ["x"] and back.datetime_parts == {}
    assert back.datetime_features == "error"


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda s: s.update(datetime_features="maybe"), "'datetime_features' must be"),
        (lambda s: s.update(datetime_features="error"), "requires datetime_features 'expand'"),
        (lambda s: s["datetime_columns"][0].update(parts=["hour", "day"]), "bad parts"),
        (lambda s: s["datetime_columns"][0].update(parts=["week"]), "bad parts"),
        (lambda s: s["datetime_columns"][0].update(zone="Mars/Olympus"), "unknown time zone"),
        (lambda s: s["datetime_columns"][0].update(name="x"), "do not match"),
        (lambda s: s["datetime_columns"][0].update(name="nope"), "not a distinct input"),
        (lambda s: s.update(input_names=["x", "t", "t"]), "distinct strings"),
        (lambda s: s.update(version=3), "unsupported version 3"),
    ],
)
def test_malformed_version_2_states_are_refused(edit: object, message: str) -> None:
    enc, _ = _expanded_encoder()
    state = json.loads(json.dumps(enc.to_dict()))
    edit(state)  # type: ignore[operator]
    with pytest.raises(ValueError, match="Invalid TableEncoder state: .*" + message):
        TableEncoder.from_dict(state)


def test_partial_fit_expands_later_chunks_with_the_first_chunks_parts() -> None:
    t = pd.Series(pd.date_range("2021-01-01 06:00", periods=40, freq="29h"))
    df = pd.DataFrame({"t": t, "x": np.linspace(0.0, 1.0, 40)})
    streamed = TableEncoder(datetime_features="expand")
    for start in range(0, 40, 15):
        streamed.partial_fit(df.iloc[start : start + 15])
    # parts are decided on the first chunk (18 days: the month does not vary there yet)
    assert streamed.datetime_parts == {"t": ["day", "dayofweek", "dayofyear", "hour"]}
    whole = TableEncoder(datetime_features="expand").fit(df)
    assert whole.datetime_parts == {"t": ["month", "day", "dayofweek", "dayofyear", "hour"]}
    shared = [whole.feature_names.index(name) for name in streamed.feature_names]
    np.testing.assert_allclose(streamed.numeric_mean, whole.numeric_mean[shared], rtol=1e-12)
    np.testing.assert_allclose(streamed.numeric_std, whole.numeric_std[shared], rtol=1e-10)
    np.testing.assert_array_equal(
        streamed.transform(df).numeric, whole.transform(df).numeric[:, shared]
    )
