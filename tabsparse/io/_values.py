"""Typed JSON values: Python and numpy data <-> plain JSON, checked on the way back.

:func:`encode_value` turns parameters and fitted attributes (numbers, strings, lists, tuples,
dicts, numpy arrays and scalars) into JSON data; values JSON cannot hold are objects with a
``"$type"`` key (``ndarray``, ``scalar``, ``float`` for non-finite numbers, ``tuple``, ``dict``
with non-string keys). :func:`decode_value` reverses it and checks every marker, dtype, shape
and element type, raising :class:`~tabsparse.io._errors.FileProblem`; it only ever produces
plain data, never an object named by the file. The table is in ``docs/model_files.md``.
"""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np

from tabsparse.io._errors import bad as _bad

__all__ = ["NotStorable", "decode_value", "encode_value", "is_int", "is_real"]

# numpy dtype strings allowed for arrays and scalars stored in the JSON document.
_JSON_DTYPE = re.compile(r"[<>|](b1|i[1248]|u[1248]|f[248]|U[0-9]{1,9}|O)\Z")
_MARK = "$type"
_NONFINITE = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}


def is_int(v: object) -> bool:
    """An integer (Python or numpy), not a bool."""
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def is_real(v: object) -> bool:
    """A real number (Python or numpy), not a bool."""
    return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(
        v, (bool, np.bool_)
    )


class NotStorable(TypeError):
    """A value that typed JSON cannot hold (the message names its type)."""


def _float_json(v: float) -> Any:
    if math.isfinite(v):
        return v
    return {_MARK: "float", "value": "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")}


def encode_value(v: Any) -> Any:
    """Python/numpy data -> JSON data; ``NotStorable`` for anything else."""
    if isinstance(v, np.generic):
        if v.dtype.kind not in "biufU":
            raise NotStorable(f"numpy scalar of dtype {v.dtype}")
        return {_MARK: "scalar", "dtype": v.dtype.str, "value": encode_value(v.item())}
    if v is None or isinstance(v, (bool, str)):
        return v
    if isinstance(v, int):
        return int(v)
    if isinstance(v, float):
        return _float_json(float(v))
    if isinstance(v, np.ndarray):
        return _encode_array(v)
    if isinstance(v, list):
        return [encode_value(x) for x in v]
    if isinstance(v, tuple):
        return {_MARK: "tuple", "items": [encode_value(x) for x in v]}
    if isinstance(v, dict):
        if all(isinstance(k, str) and not k.startswith("$") for k in v):
            return {k: encode_value(x) for k, x in v.items()}
        return {_MARK: "dict", "items": [[encode_value(k), encode_value(x)] for k, x in v.items()]}
    raise NotStorable(type(v).__name__)


def _encode_array(a: np.ndarray) -> dict[str, Any]:
    kind = a.dtype.kind
    if kind not in "biufUO":
        raise NotStorable(f"array of dtype {a.dtype}")
    items = a.ravel().tolist()
    if kind == "f":
        data = [_float_json(x) for x in items]
    elif kind == "O":
        if not all(x is None or isinstance(x, (bool, int, float, str, np.generic)) for x in items):
            raise NotStorable("object array holding something other than scalars")
        data = [encode_value(x) for x in items]
    else:
        data = items
    return {_MARK: "ndarray", "dtype": a.dtype.str, "shape": list(a.shape), "data": data}


def _marker_keys(d: dict[str, Any], keys: set[str]) -> None:
    if set(d) != keys | {_MARK}:
        _bad(f"a {d[_MARK]!r} value must have exactly the keys {sorted(keys | {_MARK})}")


def decode_value(v: Any) -> Any:
    """JSON data written by :func:`encode_value` -> Python/numpy data, checking every marker."""
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, list):
        return [decode_value(x) for x in v]
    if not isinstance(v, dict):
        _bad(f"unexpected JSON value of type {type(v).__name__}")
    if _MARK not in v:
        return {k: decode_value(x) for k, x in v.items()}
    mark = v[_MARK]
    if mark == "float":
        _marker_keys(v, {"value"})
        if not isinstance(v["value"], str) or v["value"] not in _NONFINITE:
            _bad(f"bad non-finite float {v['value']!r}")
        return _NONFINITE[v["value"]]
    if mark == "tuple":
        _marker_keys(v, {"items"})
        if not isinstance(v["items"], list):
            _bad("tuple items must be a list")
        return tuple(decode_value(x) for x in v["items"])
    if mark == "dict":
        _marker_keys(v, {"items"})
        pairs = v["items"]
        if not isinstance(pairs, list) or not all(
            isinstance(p, list) and len(p) == 2 for p in pairs
        ):
            _bad("dict items must be a list of [key, value] pairs")
        out = {}
        for key, value in pairs:
            k = decode_value(key)
            if isinstance(k, (list, dict, np.ndarray)):
                _bad(f"unhashable dict key of type {type(k).__name__}")
            out[k] = decode_value(value)
        return out
    if mark == "scalar":
        _marker_keys(v, {"dtype", "value"})
        dtype = _json_dtype(v["dtype"])
        value = decode_value(v["value"])
        if dtype.kind == "O" or not isinstance(value, (bool, int, float, str)):
            _bad("bad numpy scalar")
        _check_elements(dtype, [value])
        if dtype.kind == "U":  # np.str_ sizes itself: never allocate what the dtype claims
            scalar: Any = np.str_(value)
            if scalar.dtype != dtype:
                _bad(f"string scalar does not match its dtype {dtype.str}")
            return scalar
        return np.array(value, dtype=dtype)[()]
    if mark == "ndarray":
        _marker_keys(v, {"dtype", "shape", "data"})
        return _decode_array(v)
    _bad(f"unknown value type {mark!r}")


def _json_dtype(s: object) -> np.dtype:
    if not isinstance(s, str) or not _JSON_DTYPE.match(s):
        _bad(f"unsupported dtype {s!r}")
    return np.dtype(s)


def _check_elements(dtype: np.dtype, data: list[Any]) -> None:
    kind = dtype.kind
    if kind == "b":
        ok = all(isinstance(x, bool) for x in data)
    elif kind in "iu":
        ok = all(isinstance(x, int) and not isinstance(x, bool) for x in data)
    elif kind == "f":
        ok = all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in data)
    elif kind == "U":
        ok = all(isinstance(x, str) for x in data)
    else:
        ok = all(x is None or isinstance(x, (bool, int, float, str, np.generic)) for x in data)
    if not ok:
        _bad(f"array of dtype {dtype.str} holds values of the wrong type")


def _decode_array(v: dict[str, Any]) -> np.ndarray:
    dtype = _json_dtype(v["dtype"])
    shape = v["shape"]
    if (
        not isinstance(shape, list)
        or len(shape) > 32
        or not all(is_int(d) and d >= 0 for d in shape)
    ):
        _bad(f"bad array shape {shape!r}")
    data = v["data"]
    if not isinstance(data, list) or len(data) != math.prod(shape):
        _bad(f"array data does not have the {math.prod(shape)} values its shape {shape} needs")
    values = [decode_value(x) for x in data]
    _check_elements(dtype, values)
    if dtype.kind == "U":
        chars = sum(len(s) for s in values) + len(values)
        if len(values) * (dtype.itemsize // 4) > 16 * chars + 65536:
            _bad(f"string dtype {dtype.str} is far wider than its {len(values)} strings")
    if dtype.kind == "O":
        arr = np.empty(len(values), dtype=object)
        for i, x in enumerate(values):
            arr[i] = x
    else:
        arr = np.array(values, dtype=dtype)
    return arr.reshape(shape)
