"""The JSON state of a :class:`~tabsparse.data.TableEncoder`: writing and validating it.

:func:`encoder_to_dict` gives plain JSON-able data; :func:`encoder_from_dict` checks every field
(types, lengths, canonical vocabulary order, consistent statistics) and rebuilds a fitted encoder,
raising ``ValueError("Invalid TableEncoder state: ...")`` for anything malformed.

Versions: an encoder with ``datetime_features="error"`` (the default) writes version 1, the
format older releases read; ``datetime_features="expand"`` writes version 2, which adds
``"datetime_features"``, ``"input_names"`` (the input columns, matched at transform) and
``"datetime_columns"`` (``{"name", "parts", "zone"}`` per expanded column; its features are
``"<name>__<part>"`` in ``"feature_names"``). Both versions are read; a version 1 state has no
expanded columns.

``"categorical_missing"`` (both versions) counts the missing values of each categorical column at
fit; it is optional when read (states written before it have none), and without it the drift
check at transform does not judge a categorical column's missing values and a column counts as
missing in every fitted row when its vocabulary is empty.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from tabsparse.data.categories import TYPE_NAMES, Category, in_int64, type_name, value_key
from tabsparse.data.datetimes import DATETIME_PARTS, part_name
from tabsparse.data.encoded import CODE_MISSING, CODE_OFFSET, CODE_UNSEEN

if TYPE_CHECKING:
    from tabsparse.data.encoder import TableEncoder

STATE_VERSION = 2
"""The newest state version this library writes and reads (it reads every older one)."""
_STATE_FORMAT = "tabsparse.TableEncoder"


def _json_scalar(v: object) -> object:
    if isinstance(v, np.generic):
        return v.item()
    return v


def encoder_to_dict(enc: TableEncoder) -> dict[str, Any]:
    """The fitted state of ``enc`` as JSON-serialisable plain Python data (see
    :meth:`TableEncoder.to_dict`)."""
    spec = enc.categorical_features
    if isinstance(spec, (np.ndarray, pd.Index, pd.Series)):
        spec = np.asarray(spec).tolist()
    elif isinstance(spec, (tuple, set, frozenset)):
        spec = list(spec)
    if isinstance(spec, list):
        spec = [_json_scalar(v) for v in spec]
    count, _, m2, _, _ = enc._stats

    def floats(a: np.ndarray) -> list[float | None]:
        return [float(v) if np.isfinite(v) else None for v in a]

    state: dict[str, Any] = {
        "format": _STATE_FORMAT,
        "version": 1,
        "categorical_features": spec,
        "feature_names": list(enc.feature_names),
        "has_feature_names": bool(enc.has_feature_names),
        "n_features": int(enc.n_features),
        "kinds": list(enc.kinds),
        "numeric_columns": list(enc.numeric_columns),
        "categorical_columns": list(enc.categorical_columns),
        "categories": [list(c) for c in enc.categories],
        "category_types": [[type_name(v) for v in c] for c in enc.categories],
        "cardinalities": list(enc.cardinalities),
        "codes": {"missing": CODE_MISSING, "unseen": CODE_UNSEEN, "offset": CODE_OFFSET},
        "numeric_mean": floats(enc.numeric_mean),
        "numeric_std": floats(enc.numeric_std),
        "numeric_min": floats(enc.numeric_min),
        "numeric_max": floats(enc.numeric_max),
        "numeric_missing": [bool(v) for v in enc.numeric_missing],
        "numeric_count": [int(v) for v in count],
        "numeric_m2": floats(m2),
        "n_rows_seen": int(enc.n_rows_seen),
    }
    if enc._cat_missing is not None:
        state["categorical_missing"] = [int(v) for v in enc._cat_missing]
    if enc.datetime_features != "error":
        state["version"] = 2
        state["datetime_features"] = enc.datetime_features
        state["input_names"] = list(enc.input_names)
        state["datetime_columns"] = [
            {"name": name, "parts": list(parts), "zone": enc.datetime_zones[name]}
            for name, parts in enc.datetime_parts.items()
        ]
    return state


def _bad_state(detail: str) -> ValueError:
    return ValueError(f"Invalid TableEncoder state: {detail}")


def _get(d: dict[str, Any], key: str, kind: type | tuple[type, ...], what: str) -> Any:
    if key not in d:
        raise _bad_state(f"missing key {key!r}")
    value = d[key]
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise _bad_state(f"{key!r} must be {what}, got {type(value).__name__}")
    return value


def _list_of(
    d: dict[str, Any], key: str, length: int, check: Any, what: str, allow_none: bool = False
) -> list[Any]:
    values = _get(d, key, list, "a list")
    if len(values) != length:
        raise _bad_state(f"{key!r} must have {length} entries, got {len(values)}")
    for v in values:
        if v is None and allow_none:
            continue
        if not check(v):
            raise _bad_state(f"{key!r} must contain {what}, got {v!r}")
    return list(values)


def _is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_finite_number(v: object) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _check_category(v: object, type_name: object, where: str) -> Category:
    if type_name not in TYPE_NAMES:
        raise _bad_state(f"{where}: unknown category type {type_name!r}")
    ok = (
        (type_name == "bool" and isinstance(v, bool))
        or (type_name == "int" and _is_int(v))
        or (
            type_name == "float"
            and isinstance(v, float)
            and math.isfinite(v)
            and not (v.is_integer() and in_int64(v))
        )
        or (type_name == "str" and isinstance(v, str))
    )
    if not ok:
        raise _bad_state(f"{where}: value {v!r} is not a valid {type_name} category")
    assert isinstance(v, (bool, int, float, str))
    return v


def encoder_from_dict(cls: type[TableEncoder], d: object) -> TableEncoder:
    """Validate the state ``d`` and rebuild a fitted ``cls`` from it (see
    :meth:`TableEncoder.from_dict`)."""
    if not isinstance(d, dict):
        raise _bad_state(f"expected a dict, got {type(d).__name__}")
    if d.get("format") != _STATE_FORMAT:
        raise _bad_state(f"'format' must be {_STATE_FORMAT!r}, got {d.get('format')!r}")
    version = _get(d, "version", int, "an integer")
    if version not in (1, STATE_VERSION):
        raise _bad_state(f"unsupported version {version} (this library reads 1 to {STATE_VERSION})")
    n = _get(d, "n_features", int, "an integer")
    if n < 1:
        raise _bad_state(f"'n_features' must be at least 1, got {n}")
    names = _list_of(d, "feature_names", n, lambda v: isinstance(v, str), "strings")
    if len(set(names)) != n:
        raise _bad_state("'feature_names' contains duplicates")
    has_names = _get(d, "has_feature_names", bool, "a bool")
    kinds = _list_of(
        d, "kinds", n, lambda v: v in ("numeric", "categorical"), "'numeric' or 'categorical'"
    )
    num_cols = [j for j, k in enumerate(kinds) if k == "numeric"]
    cat_cols = [j for j, k in enumerate(kinds) if k == "categorical"]
    for key, expected in (("numeric_columns", num_cols), ("categorical_columns", cat_cols)):
        if _get(d, key, list, "a list") != expected:
            raise _bad_state(f"{key!r} does not match 'kinds' (expected {expected})")
    n_cat = len(cat_cols)
    raw_cats = _list_of(d, "categories", n_cat, lambda v: isinstance(v, list), "lists")
    raw_types = _list_of(d, "category_types", n_cat, lambda v: isinstance(v, list), "lists")
    categories: list[list[Category]] = []
    vocab_keys: list[set[tuple[int, Category]]] = []
    for k, (values, types) in enumerate(zip(raw_cats, raw_types, strict=True)):
        where = f"categories of column {names[cat_cols[k]]!r}"
        if len(values) != len(types):
            raise _bad_state(f"{where}: {len(values)} values but {len(types)} types")
        vocab = [_check_category(v, t, where) for v, t in zip(values, types, strict=True)]
        keys = [value_key(v) for v in vocab]
        if len(set(keys)) != len(keys):
            raise _bad_state(f"{where}: duplicated values")
        if keys != sorted(keys):
            raise _bad_state(f"{where}: values are not in canonical order")
        categories.append(vocab)
        vocab_keys.append(set(keys))
    cards = _list_of(d, "cardinalities", n_cat, _is_int, "integers")
    if cards != [len(c) + CODE_OFFSET for c in categories]:
        raise _bad_state("'cardinalities' must be len(categories) + 2 per column")
    codes = d.get("codes")
    if codes != {"missing": CODE_MISSING, "unseen": CODE_UNSEEN, "offset": CODE_OFFSET}:
        raise _bad_state(f"unsupported 'codes' convention {codes!r}")
    n_rows = _get(d, "n_rows_seen", int, "an integer")
    if n_rows < 1:
        raise _bad_state(f"'n_rows_seen' must be at least 1, got {n_rows}")
    n_num = len(num_cols)
    count = _list_of(d, "numeric_count", n_num, lambda v: _is_int(v) and 0 <= v <= n_rows, "ints")
    m2 = _list_of(d, "numeric_m2", n_num, lambda v: _is_finite_number(v) and v >= 0, "numbers >= 0")
    mean = _list_of(d, "numeric_mean", n_num, _is_finite_number, "finite numbers")
    std = _list_of(d, "numeric_std", n_num, lambda v: _is_finite_number(v) and v > 0, "numbers > 0")
    lo = _list_of(d, "numeric_min", n_num, _is_finite_number, "finite numbers", allow_none=True)
    hi = _list_of(d, "numeric_max", n_num, _is_finite_number, "finite numbers", allow_none=True)
    missing = _list_of(d, "numeric_missing", n_num, lambda v: isinstance(v, bool), "bools")
    for j in range(n_num):
        where = f"statistics of column {names[num_cols[j]]!r}"
        if (count[j] == 0) != (lo[j] is None) or (count[j] == 0) != (hi[j] is None):
            raise _bad_state(f"{where}: min/max must be null exactly when the count is 0")
        if lo[j] is not None and hi[j] is not None and lo[j] > hi[j]:
            raise _bad_state(f"{where}: min > max")
        if missing[j] != (count[j] < n_rows):
            raise _bad_state(f"{where}: 'numeric_missing' disagrees with the count")

    cat_missing = None
    if "categorical_missing" in d:
        cat_missing = _list_of(
            d,
            "categorical_missing",
            n_cat,
            lambda v: _is_int(v) and 0 <= v <= n_rows,
            "ints between 0 and 'n_rows_seen'",
        )
    datetime_features, input_names, parts, zones = _datetime_state(d, version, names)
    enc = cls(
        categorical_features=d.get("categorical_features", "from_dtype"),
        datetime_features=datetime_features,
    )
    enc.feature_names = names
    enc.input_names = input_names
    enc.datetime_parts = parts
    enc.datetime_zones = zones
    enc.has_feature_names = has_names
    enc.n_features = n
    enc.kinds = kinds
    enc.numeric_columns = num_cols
    enc.categorical_columns = cat_cols
    enc.n_rows_seen = n_rows
    enc._vocab_keys = vocab_keys
    enc._cat_missing = None if cat_missing is None else np.asarray(cat_missing, dtype=np.int64)
    enc._stats = (
        np.asarray(count, dtype=np.float64),
        np.asarray(mean, dtype=np.float64),
        np.asarray(m2, dtype=np.float64),
        np.array([np.inf if v is None else v for v in lo], dtype=np.float64),
        np.array([-np.inf if v is None else v for v in hi], dtype=np.float64),
    )
    enc._finalize()
    # Keep the stored std (it is what consumers of the JSON spec use).
    enc.numeric_std = np.asarray(std, dtype=np.float64).reshape(-1)
    return enc


def _datetime_state(
    d: dict[str, Any], version: int, names: list[str]
) -> tuple[str, list[str], dict[str, list[str]], dict[str, str | None]]:
    """``datetime_features``, the input names and the expanded columns' parts and zones."""
    if version == 1:
        return "error", list(names), {}, {}
    option = d.get("datetime_features")
    if option not in ("error", "expand"):
        raise _bad_state(f"'datetime_features' must be 'error' or 'expand', got {option!r}")
    inputs = _get(d, "input_names", list, "a list")
    if not all(isinstance(v, str) for v in inputs) or len(set(inputs)) != len(inputs):
        raise _bad_state("'input_names' must be distinct strings")
    columns = _get(d, "datetime_columns", list, "a list")
    parts: dict[str, list[str]] = {}
    zones: dict[str, str | None] = {}
    for entry in columns:
        if not isinstance(entry, dict) or set(entry) != {"name", "parts", "zone"}:
            raise _bad_state(f"'datetime_columns' entries must be {{name, parts, zone}}: {entry!r}")
        name, got, zone = entry["name"], entry["parts"], entry["zone"]
        if name not in inputs or name in parts:
            raise _bad_state(f"datetime column {name!r} is not a distinct input column")
        if (
            not isinstance(got, list)
            or not got
            or any(p not in DATETIME_PARTS for p in got)
            or got != sorted(set(got), key=DATETIME_PARTS.index)
        ):
            raise _bad_state(f"datetime column {name!r}: bad parts {got!r}")
        if zone is not None:
            try:
                pd.DatetimeTZDtype(tz=zone)
            except Exception as exc:
                raise _bad_state(f"datetime column {name!r}: unknown time zone {zone!r}") from exc
        parts[name], zones[name] = list(got), zone
    if parts and option != "expand":
        raise _bad_state("'datetime_columns' requires datetime_features 'expand'")
    expanded = []
    for name in inputs:
        expanded += [part_name(name, p) for p in parts[name]] if name in parts else [name]
    if expanded != names:
        raise _bad_state("'feature_names' do not match 'input_names' and 'datetime_columns'")
    return option, list(inputs), parts, zones
