"""Model files that never run code on load: :func:`save` and :func:`load`.

A model file is a zip archive (members stored uncompressed) holding

* ``tabsparse.json``: format name and version, the estimator class name, its parameters, every
  fitted attribute, the :class:`~tabsparse.data.TableEncoder` state and an index of the network
  tensors (name, file, dtype, shape, SHA-256 of the file);
* ``tensors/<k>.npy``: one ``.npy`` file per distinct network tensor (tensors that the network
  shares, such as the shared GLU weights, are stored once and named several times in the index).

Loading parses JSON and ``.npy`` headers only: nothing is unpickled, imported or called by name
from the file. The estimator class comes from an explicit allow-list (:data:`ESTIMATORS`, extended
with :func:`register_estimator`); every value, size and shape is checked before it is used, and any
problem raises :class:`ModelFileError` naming the file. The format is described in
``docs/model_files.md``.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import math
import os
import re
import secrets
import warnings
import zipfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, NoReturn

import numpy as np
import torch
from sklearn.utils.validation import check_is_fitted

from tabsparse.data import TableEncoder
from tabsparse.estimators import TabNetClassifier, TabNetPretrainer, TabNetRegressor
from tabsparse.estimators._base import TabNetBase, resolve_device
from tabsparse.nn.network import column_groups

__all__ = [
    "ESTIMATORS",
    "FORMAT_NAME",
    "FORMAT_VERSION",
    "EstimatorSpec",
    "ModelFileError",
    "load",
    "register_estimator",
    "save",
]

FORMAT_NAME = "tabsparse-model"
FORMAT_VERSION = 1
JSON_MEMBER = "tabsparse.json"

MAX_MEMBERS = 100_000  # zip members (the JSON file plus the tensor files)
MAX_JSON_BYTES = 256 * 2**20  # uncompressed size of tabsparse.json
NPY_HEADER_LIMIT = 10_000  # bytes of an .npy header dictionary (numpy's own default limit)
NETWORK_SLACK = 2**20  # values the parameters may imply beyond twice what the file holds

_TOP_KEYS = frozenset(
    {
        "format",
        "format_version",
        "tabsparse_version",
        "estimator",
        "params",
        "param_notes",
        "attributes",
        "notes",
        "device",
        "encoder",
        "tensors",
    }
)
_TENSOR_KEYS = frozenset({"name", "file", "dtype", "shape", "sha256"})
_TENSOR_FILE = re.compile(r"tensors/(0|[1-9][0-9]{0,5})\.npy\Z")
_SHA256 = re.compile(r"[0-9a-f]{64}\Z")
_DEVICE = re.compile(r"(cpu|cuda(:[0-9]{1,4})?)\Z")
# numpy dtype strings allowed for tensors (always written little-endian).
_TENSOR_DTYPES = frozenset({"<f2", "<f4", "<f8", "|i1", "<i2", "<i4", "<i8", "|u1", "|b1"})
# numpy dtype strings allowed for arrays and scalars stored in the JSON document.
_JSON_DTYPE = re.compile(r"[<>|](b1|i[1248]|u[1248]|f[248]|U[0-9]{1,9}|O)\Z")
_MARK = "$type"
_NONFINITE = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}
_SKIPPED_STATE = frozenset(
    {"network_", "encoder_", "device_", "_sklearn_output_config", "_metadata_request"}
)


class ModelFileError(ValueError):
    """A file cannot be loaded as a tabsparse model (corrupt, truncated, foreign or unsafe).

    Parameters
    ----------
    path : str
        The file that was being loaded.
    problem : str
        What is wrong with it.

    Attributes
    ----------
    path : str
    problem : str
    """

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(f"cannot load {path!r} as a tabsparse model: {problem}")
        self.path = path
        self.problem = problem

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.path, self.problem))


class _Bad(Exception):
    """Internal: a problem found in the file (becomes a ModelFileError with the path)."""


def _bad(problem: str) -> NoReturn:
    raise _Bad(problem)


# ---- the allow-list of estimator classes ---------------------------------------------------------


@dataclass(frozen=True)
class EstimatorSpec:
    """How one estimator class is stored.

    Parameters
    ----------
    cls : type
        The estimator class (a :class:`~tabsparse.estimators._base.TabNetBase` subclass); the
        only classes :func:`load` ever instantiates are the ``cls`` of registered specs.
    attributes : tuple of str
        Fitted attributes of this class beyond the common ones (``n_features_in_``,
        ``feature_names_in_``, ``feature_importances_``, ``history_``, ``n_iter_``,
        ``best_iteration_``, ``compiled_``), saved with their types and restored after checks.
    check : callable
        ``check(estimator)`` validates those attributes once they are set on a fresh estimator
        (together with its ``encoder_``), raising ``ValueError`` or ``TypeError`` when they are
        inconsistent.
    optional : tuple of str
        Those of ``attributes`` that a fitted estimator may lack (saved when present; a file
        without them, such as one written before they existed, loads without them).
    """

    cls: type[TabNetBase]
    attributes: tuple[str, ...]
    check: Callable[[TabNetBase], None]
    optional: tuple[str, ...] = ()


ESTIMATORS: dict[str, EstimatorSpec] = {}
"""Registered estimator classes by class name: the allow-list :func:`load` instantiates from."""

_COMMON_ATTRIBUTES = (
    "n_features_in_",
    "feature_names_in_",
    "feature_importances_",
    "history_",
    "n_iter_",
    "best_iteration_",
    "compiled_",
)
# files written before compile= existed have no compiled_
_OPTIONAL_ATTRIBUTES = frozenset({"feature_names_in_", "compiled_"})


def register_estimator(
    cls: type[TabNetBase],
    *,
    attributes: Iterable[str],
    check: Callable[[TabNetBase], None],
    optional: Iterable[str] = (),
) -> None:
    """Allow :func:`save` and :func:`load` to handle another estimator class.

    Parameters
    ----------
    cls : type
        A :class:`~tabsparse.estimators._base.TabNetBase` subclass; it is stored in files under
        ``cls.__name__``, which must not already name a different registered class.
    attributes : iterable of str
        Its own fitted attributes (beyond the common ones), see :class:`EstimatorSpec`.
    check : callable
        Validates those attributes after loading, see :class:`EstimatorSpec`.
    optional : iterable of str
        Those of ``attributes`` that may be absent, see :class:`EstimatorSpec`.
    """
    if not (isinstance(cls, type) and issubclass(cls, TabNetBase)):
        raise TypeError(f"{cls!r} is not a TabNetBase subclass")
    name = cls.__name__
    known = ESTIMATORS.get(name)
    if known is not None and known.cls is not cls:
        raise ValueError(f"another class named {name!r} is already registered")
    ESTIMATORS[name] = EstimatorSpec(
        cls=cls, attributes=tuple(attributes), check=check, optional=tuple(optional)
    )


def _is_int(v: object) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def _is_real(v: object) -> bool:
    return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(
        v, (bool, np.bool_)
    )


def _check_common(est: Any) -> None:
    enc: TableEncoder = est.encoder_
    if not _is_int(est.n_features_in_) or est.n_features_in_ != enc.n_features:
        raise ValueError(f"n_features_in_={est.n_features_in_!r} disagrees with the encoder")
    if enc.has_feature_names != hasattr(est, "feature_names_in_"):
        raise ValueError("feature_names_in_ is present exactly when the encoder has names")
    if enc.has_feature_names:
        names = est.feature_names_in_
        if (
            not isinstance(names, np.ndarray)
            or names.dtype != object
            or names.tolist() != list(enc.feature_names)
        ):
            raise ValueError("feature_names_in_ must be the encoder's names as an object array")
    imp = est.feature_importances_
    if not isinstance(imp, np.ndarray) or imp.dtype.kind != "f" or imp.shape != (enc.n_features,):
        raise ValueError(f"feature_importances_ must be a float array of shape ({enc.n_features},)")
    history = est.history_
    if not isinstance(history, list) or not all(
        isinstance(r, dict) and all(isinstance(k, str) and _is_real(v) for k, v in r.items())
        for r in history
    ):
        raise ValueError("history_ must be a list of dicts of numbers")
    if not _is_int(est.n_iter_) or est.n_iter_ < 0:
        raise ValueError(f"n_iter_={est.n_iter_!r} must be an integer >= 0")
    if est.best_iteration_ is not None and not _is_int(est.best_iteration_):
        raise ValueError(f"best_iteration_={est.best_iteration_!r} must be an integer or None")
    compiled = getattr(est, "compiled_", False)
    if not isinstance(compiled, (bool, np.bool_)):
        raise ValueError(f"compiled_={compiled!r} must be a bool")


def _check_labels(classes: Any, what: str) -> None:
    if not isinstance(classes, np.ndarray) or classes.ndim != 1 or len(classes) < 2:
        raise ValueError(f"{what} must be a 1-D array of at least 2 labels")
    if classes.dtype.kind not in "biufUO":
        raise ValueError(f"{what} has unsupported dtype {classes.dtype}")
    if len(np.unique(classes)) != len(classes):
        raise ValueError(f"{what} contains duplicates")


def _check_classifier(est: Any) -> None:
    """Single-output (files from before multi-output support have only ``classes_``),
    multi-label or multi-task; see ``tabsparse/estimators/_multioutput.py``."""
    from tabsparse.estimators import _multioutput as mo

    kind = est._target_kind  # the class default ("single") when the file has none
    if kind not in mo.KINDS:
        raise ValueError(f"_target_kind={kind!r} must be one of {list(mo.KINDS)}")
    n = getattr(est, "n_outputs_", 1)
    if not _is_int(n) or n < 1 or (n == 1) != (kind == mo.SINGLE):
        raise ValueError(f"n_outputs_={n!r} does not fit a {kind} target")
    if kind in mo.MULTILABEL:
        classes = est.classes_
        if not isinstance(classes, np.ndarray) or classes.tolist() != list(range(n)):
            raise ValueError(f"classes_ of a multi-label model must be arange({n})")
        fitted = "sparsemax" if kind == mo.MULTILABEL_SPARSEMAX else "bce"
        if est.multilabel_loss != fitted:
            raise ValueError(f"multilabel_loss={est.multilabel_loss!r} disagrees with {kind}")
    if kind == mo.MULTILABEL_SPARSEMAX:
        m = getattr(est, "mean_label_count_", None)
        if not isinstance(m, float) or not 1.0 <= m <= n + 1:
            raise ValueError(f"mean_label_count_={m!r} must be a float in [1, {n + 1}]")
    elif hasattr(est, "mean_label_count_"):
        raise ValueError("mean_label_count_ belongs to sparsemax multi-label models only")
    if kind == mo.MULTITASK:
        if not isinstance(est.classes_, list) or len(est.classes_) != n:
            raise ValueError(f"classes_ of a multi-task model must be a list of {n} arrays")
        for j, classes in enumerate(est.classes_):
            _check_labels(classes, f"classes_[{j}]")
    elif kind == mo.SINGLE:
        _check_labels(est.classes_, "classes_")


def _check_regressor(est: Any) -> None:
    n = est.n_outputs_
    if not _is_int(n) or n < 1:
        raise ValueError(f"n_outputs_={n!r} must be an integer >= 1")
    for name in ("target_mean_", "target_scale_"):
        v = getattr(est, name)
        if not isinstance(v, np.ndarray) or v.dtype.kind != "f" or v.shape != (n,):
            raise ValueError(f"{name} must be a float array of shape ({n},)")
        if not np.all(np.isfinite(v)):
            raise ValueError(f"{name} must be finite")
    if not np.all(est.target_scale_ > 0):
        raise ValueError("target_scale_ must be positive")
    if est._y_ndim not in (1, 2) or isinstance(est._y_ndim, bool):
        raise ValueError(f"_y_ndim={est._y_ndim!r} must be 1 or 2")
    if est._y_ndim == 1 and n != 1:
        raise ValueError("_y_ndim=1 needs n_outputs_=1")


register_estimator(
    TabNetClassifier,
    attributes=("classes_", "n_outputs_", "_target_kind", "mean_label_count_"),
    check=_check_classifier,
    optional=("n_outputs_", "_target_kind", "mean_label_count_"),
)
register_estimator(TabNetPretrainer, attributes=(), check=lambda est: None)
register_estimator(
    TabNetRegressor,
    attributes=("n_outputs_", "target_mean_", "target_scale_", "_y_ndim"),
    check=_check_regressor,
)


# ---- typed JSON values ---------------------------------------------------------------------------


class _NotStorable(TypeError):
    pass


def _float_json(v: float) -> Any:
    if math.isfinite(v):
        return v
    return {_MARK: "float", "value": "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")}


def _encode(v: Any) -> Any:
    """Python/numpy data -> JSON data; ``_NotStorable`` for anything else."""
    if isinstance(v, np.generic):
        if v.dtype.kind not in "biufU":
            raise _NotStorable(f"numpy scalar of dtype {v.dtype}")
        return {_MARK: "scalar", "dtype": v.dtype.str, "value": _encode(v.item())}
    if v is None or isinstance(v, (bool, str)):
        return v
    if isinstance(v, int):
        return int(v)
    if isinstance(v, float):
        return _float_json(float(v))
    if isinstance(v, np.ndarray):
        return _encode_array(v)
    if isinstance(v, list):
        return [_encode(x) for x in v]
    if isinstance(v, tuple):
        return {_MARK: "tuple", "items": [_encode(x) for x in v]}
    if isinstance(v, dict):
        if all(isinstance(k, str) and not k.startswith("$") for k in v):
            return {k: _encode(x) for k, x in v.items()}
        return {_MARK: "dict", "items": [[_encode(k), _encode(x)] for k, x in v.items()]}
    raise _NotStorable(type(v).__name__)


def _encode_array(a: np.ndarray) -> dict[str, Any]:
    kind = a.dtype.kind
    if kind not in "biufUO":
        raise _NotStorable(f"array of dtype {a.dtype}")
    items = a.ravel().tolist()
    if kind == "f":
        data = [_float_json(x) for x in items]
    elif kind == "O":
        if not all(x is None or isinstance(x, (bool, int, float, str, np.generic)) for x in items):
            raise _NotStorable("object array holding something other than scalars")
        data = [_encode(x) for x in items]
    else:
        data = items
    return {_MARK: "ndarray", "dtype": a.dtype.str, "shape": list(a.shape), "data": data}


def _marker_keys(d: dict[str, Any], keys: set[str]) -> None:
    if set(d) != keys | {_MARK}:
        _bad(f"a {d[_MARK]!r} value must have exactly the keys {sorted(keys | {_MARK})}")


def _decode(v: Any) -> Any:
    """JSON data written by :func:`_encode` -> Python/numpy data, checking every marker."""
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, list):
        return [_decode(x) for x in v]
    if not isinstance(v, dict):
        _bad(f"unexpected JSON value of type {type(v).__name__}")
    if _MARK not in v:
        return {k: _decode(x) for k, x in v.items()}
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
        return tuple(_decode(x) for x in v["items"])
    if mark == "dict":
        _marker_keys(v, {"items"})
        pairs = v["items"]
        if not isinstance(pairs, list) or not all(
            isinstance(p, list) and len(p) == 2 for p in pairs
        ):
            _bad("dict items must be a list of [key, value] pairs")
        out = {}
        for key, value in pairs:
            k = _decode(key)
            if isinstance(k, (list, dict, np.ndarray)):
                _bad(f"unhashable dict key of type {type(k).__name__}")
            out[k] = _decode(value)
        return out
    if mark == "scalar":
        _marker_keys(v, {"dtype", "value"})
        dtype = _json_dtype(v["dtype"])
        value = _decode(v["value"])
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
        or not all(_is_int(d) and d >= 0 for d in shape)
    ):
        _bad(f"bad array shape {shape!r}")
    data = v["data"]
    if not isinstance(data, list) or len(data) != math.prod(shape):
        _bad(f"array data does not have the {math.prod(shape)} values its shape {shape} needs")
    values = [_decode(x) for x in data]
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


# ---- save ----------------------------------------------------------------------------------------


def _spec_for(estimator: object) -> EstimatorSpec:
    spec = ESTIMATORS.get(type(estimator).__name__)
    if spec is None or type(estimator) is not spec.cls:
        allowed = ", ".join(sorted(ESTIMATORS))
        raise TypeError(
            f"tabsparse.save handles the registered estimator classes ({allowed}), "
            f"got {type(estimator).__name__}; see tabsparse.io.register_estimator"
        )
    return spec


def _tensor_files(
    state: dict[str, torch.Tensor],
) -> tuple[list[dict[str, Any]], list[tuple[str, bytes]]]:
    """The tensor index and the ``.npy`` members; tensors sharing storage are written once."""
    index: list[dict[str, Any]] = []
    members: list[tuple[str, bytes]] = []
    seen: dict[tuple[Any, ...], dict[str, Any]] = {}
    for name, tensor in state.items():
        key = (
            tensor.device,
            tensor.untyped_storage().data_ptr(),
            tensor.storage_offset(),
            tuple(tensor.shape),
            tensor.stride(),
            tensor.dtype,
        )
        entry = seen.get(key)
        if entry is None:
            arr = tensor.detach().to("cpu").contiguous().numpy()
            arr = arr.astype(arr.dtype.newbyteorder("<"), order="C", copy=False)
            if arr.dtype.str not in _TENSOR_DTYPES:
                raise ValueError(f"cannot save tensor {name!r} of dtype {tensor.dtype}")
            buf = io.BytesIO()
            np.save(buf, arr, allow_pickle=False)
            data = buf.getvalue()
            entry = {
                "file": f"tensors/{len(members)}.npy",
                "dtype": arr.dtype.str,
                "shape": list(arr.shape),
                "sha256": hashlib.sha256(data).hexdigest(),
            }
            members.append((entry["file"], data))
            seen[key] = entry
        index.append({"name": name, **entry})
    return index, members


def _document(estimator: TabNetBase, spec: EstimatorSpec) -> tuple[dict[str, Any], list[Any]]:
    from tabsparse import __version__

    params: dict[str, Any] = {}
    param_notes: dict[str, str] = {}
    for name, value in estimator.get_params(deep=False).items():
        try:
            params[name] = _encode(value)
        except _NotStorable as exc:
            params[name] = None
            param_notes[name] = f"not stored ({exc} is not JSON data); loads as the default"
    attributes: dict[str, Any] = {}
    for name in (*_COMMON_ATTRIBUTES, *spec.attributes):
        if name in vars(estimator) or (hasattr(estimator, name) and name not in spec.optional):
            try:
                attributes[name] = _encode(getattr(estimator, name))
            except _NotStorable as exc:
                raise ValueError(f"cannot save fitted attribute {name}: {exc}") from exc
        elif name not in _OPTIONAL_ATTRIBUTES and name not in spec.optional:
            raise ValueError(f"cannot save: the fitted attribute {name} is missing")
    notes = []
    for name in sorted(vars(estimator)):
        if name not in params and name not in attributes and name not in _SKIPPED_STATE:
            notes.append(f"attribute {name} was not saved")
            warnings.warn(
                f"tabsparse.save does not know the attribute {name!r} of "
                f"{type(estimator).__name__}; it is not saved (register it in tabsparse.io)",
                UserWarning,
                stacklevel=3,
            )
    index, members = _tensor_files(estimator.network_.state_dict())
    doc = {
        "format": FORMAT_NAME,
        "format_version": FORMAT_VERSION,
        "tabsparse_version": __version__,
        "estimator": type(estimator).__name__,
        "params": params,
        "param_notes": param_notes,
        "attributes": attributes,
        "notes": notes,
        "device": str(torch.device(estimator.device_)),
        "encoder": estimator.encoder_.to_dict(),
        "tensors": index,
    }
    return doc, members


def _zip_info(name: str) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
    info.compress_type = zipfile.ZIP_STORED
    info.external_attr = 0o644 << 16
    return info


def _atomic_write(path: str, members: list[tuple[str, bytes]]) -> None:
    """Write the zip to a fresh temporary file next to ``path``, then rename it over ``path``."""
    folder = os.path.dirname(os.path.abspath(path))
    base = os.path.basename(path)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
    for _ in range(100):
        tmp = os.path.join(folder, f".{base}.{secrets.token_hex(8)}.tmp")
        try:
            fd = os.open(tmp, flags, 0o666)
        except FileExistsError:
            continue
        break
    else:  # pragma: no cover - 100 collisions of 64 random bits
        raise FileExistsError(f"could not create a temporary file in {folder!r}")
    try:
        with os.fdopen(fd, "wb") as fh:
            with zipfile.ZipFile(fh, "w", compression=zipfile.ZIP_STORED, allowZip64=True) as zf:
                for name, data in members:
                    zf.writestr(_zip_info(name), data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    with contextlib.suppress(OSError, AttributeError):  # make the rename durable (POSIX)
        dir_fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


def save(estimator: TabNetBase, path: str | os.PathLike[str]) -> None:
    """Save a fitted estimator to a model file that :func:`load` reads without running code.

    The file is written to a temporary file in the same folder and then renamed over ``path``,
    so a failed save leaves no partial file and never damages an existing one. Tensors are
    written from CPU copies, so a model trained on CUDA loads on a machine without a GPU.

    Parameters
    ----------
    estimator : TabNetClassifier or TabNetRegressor
        A fitted estimator of a registered class (see :func:`register_estimator`).
    path : str or os.PathLike
        Destination file (replaced if it exists).

    Raises
    ------
    sklearn.exceptions.NotFittedError
        If the estimator is not fitted.
    TypeError
        If the estimator's class is not registered.

    Notes
    -----
    Parameters that are not JSON data (``callbacks`` objects, a callable ``scoring``, a
    ``numpy.random.RandomState``) are stored as ``null`` with a note in ``param_notes`` and come
    back as the parameter's default.
    """
    spec = _spec_for(estimator)
    check_is_fitted(estimator)
    doc, tensor_members = _document(estimator, spec)
    text = json.dumps(doc, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    _atomic_write(os.fspath(path), [(JSON_MEMBER, text.encode("utf-8")), *tensor_members])


# ---- load ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _TensorEntry:
    name: str
    file: str
    dtype: str
    shape: tuple[int, ...]
    sha256: str

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.numel * np.dtype(self.dtype).itemsize


def _check_layout(infos: list[zipfile.ZipInfo], size: int) -> None:
    """Members stored, unencrypted, not overlapping and inside the file (no zip bombs)."""
    if len(infos) > MAX_MEMBERS:
        _bad(f"{len(infos)} zip members (at most {MAX_MEMBERS} allowed)")
    names = [i.filename for i in infos]
    if len(set(names)) != len(names):
        dups = sorted({n for n in names if names.count(n) > 1})[:5]
        _bad(f"duplicated zip member(s) {dups}")
    for info in infos:
        if info.flag_bits & 0x1:
            _bad(f"member {info.filename!r} is encrypted")
        if info.compress_type != zipfile.ZIP_STORED:
            _bad(
                f"member {info.filename!r} is compressed (method {info.compress_type}); "
                "tabsparse model files store members uncompressed"
            )
        if info.file_size != info.compress_size:
            _bad(f"member {info.filename!r} declares inconsistent sizes")
    ordered = sorted(infos, key=lambda i: i.header_offset)
    for info, nxt in zip(ordered, [*ordered[1:], None], strict=True):
        end = info.header_offset + info.compress_size
        if info.header_offset < 0 or end > (size if nxt is None else nxt.header_offset):
            _bad(f"member {info.filename!r} declares {info.file_size} bytes, more than it holds")


def _read_member(zf: zipfile.ZipFile, info: zipfile.ZipInfo, limit: int) -> bytes:
    if info.file_size > limit:
        _bad(f"member {info.filename!r} declares {info.file_size} bytes (at most {limit} expected)")
    with zf.open(info) as fh:
        data = fh.read(limit + 1)
    if len(data) != info.file_size:
        _bad(f"member {info.filename!r} is truncated")
    return data


def _no_constant(name: str) -> NoReturn:
    _bad(f"{JSON_MEMBER} contains the non-standard JSON constant {name}")


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        _bad(f"{JSON_MEMBER} contains an object with duplicated keys")
    return out


def _read_json(zf: zipfile.ZipFile, info: zipfile.ZipInfo) -> dict[str, Any]:
    raw = _read_member(zf, info, MAX_JSON_BYTES)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        _bad(f"{JSON_MEMBER} is not UTF-8 text")
    try:
        doc = json.loads(text, parse_constant=_no_constant, object_pairs_hook=_unique_keys)
    except (json.JSONDecodeError, RecursionError) as exc:
        _bad(f"{JSON_MEMBER} is not valid JSON ({exc})")
    if not isinstance(doc, dict):
        _bad(f"{JSON_MEMBER} must hold a JSON object")
    return doc


def _check_header(doc: dict[str, Any]) -> EstimatorSpec:
    if doc.get("format") != FORMAT_NAME:
        _bad(f"wrong format name {doc.get('format')!r} (expected {FORMAT_NAME!r})")
    version: Any = doc.get("format_version")
    if not _is_int(version) or version < 1:
        _bad(f"invalid format_version {version!r}")
    if version > FORMAT_VERSION:
        _bad(
            f"unsupported format_version {version}: the file was written by a newer tabsparse "
            f"(this one reads format_version {FORMAT_VERSION}); upgrade tabsparse"
        )
    missing = sorted(_TOP_KEYS - set(doc))
    extra = sorted(set(doc) - _TOP_KEYS)
    if missing or extra:
        _bad(f"{JSON_MEMBER} has missing keys {missing} / unexpected keys {extra}")
    name = doc["estimator"]
    spec = ESTIMATORS.get(name) if isinstance(name, str) else None
    if spec is None:
        _bad(f"unknown estimator class {name!r} (allowed: {', '.join(sorted(ESTIMATORS))})")
    for key, kind in (
        ("tabsparse_version", str),
        ("params", dict),
        ("param_notes", dict),
        ("attributes", dict),
        ("notes", list),
        ("device", str),
        ("encoder", dict),
        ("tensors", list),
    ):
        if not isinstance(doc[key], kind):
            _bad(f"{key!r} must be a JSON {'object' if kind is dict else kind.__name__}")
    return spec


def _parse_index(raw: list[Any]) -> list[_TensorEntry]:
    if len(raw) > MAX_MEMBERS:
        _bad(f"the tensor index lists {len(raw)} tensors (at most {MAX_MEMBERS} allowed)")
    entries: list[_TensorEntry] = []
    by_file: dict[str, _TensorEntry] = {}
    for item in raw:
        if not isinstance(item, dict) or set(item) != _TENSOR_KEYS:
            _bad(f"tensor index entries must have exactly the keys {sorted(_TENSOR_KEYS)}")
        name, file, dtype, shape, sha = (
            item[k] for k in ("name", "file", "dtype", "shape", "sha256")
        )
        if not isinstance(name, str) or not name:
            _bad(f"bad tensor name {name!r}")
        if not isinstance(file, str) or not _TENSOR_FILE.match(file):
            _bad(f"tensor {name!r}: bad file name {file!r}")
        if not isinstance(dtype, str) or dtype not in _TENSOR_DTYPES:
            _bad(f"tensor {name!r}: unsupported dtype {dtype!r}")
        if not isinstance(shape, list) or len(shape) > 32:
            _bad(f"tensor {name!r}: bad shape {shape!r}")
        if not all(_is_int(d) and 0 <= d < 2**48 for d in shape):
            _bad(f"tensor {name!r}: bad shape {shape!r}")
        if not isinstance(sha, str) or not _SHA256.match(sha):
            _bad(f"tensor {name!r}: bad sha256 {sha!r}")
        entry = _TensorEntry(name, file, dtype, tuple(shape), sha)
        other = by_file.setdefault(file, entry)
        if (other.dtype, other.shape, other.sha256) != (dtype, entry.shape, sha):
            _bad(f"tensors {other.name!r} and {name!r} share {file} but disagree about it")
        entries.append(entry)
    names = [e.name for e in entries]
    if len(set(names)) != len(names):
        _bad("the tensor index names a tensor twice")
    return entries


def _npy_size_limit(info: zipfile.ZipInfo, entry: _TensorEntry) -> int:
    """Check a tensor member's declared size against its index entry; return the upper bound."""
    low, high = entry.nbytes + 10, entry.nbytes + NPY_HEADER_LIMIT + 12
    if not low <= info.file_size <= high:
        _bad(
            f"member {entry.file!r} (tensor {entry.name!r}) holds {info.file_size} bytes, but a "
            f"{entry.dtype} tensor of shape {list(entry.shape)} needs {entry.nbytes} bytes plus "
            "a header"
        )
    return high


def _read_npy(zf: zipfile.ZipFile, info: zipfile.ZipInfo, entry: _TensorEntry) -> np.ndarray:
    where = f"member {entry.file!r} (tensor {entry.name!r})"
    data = _read_member(zf, info, _npy_size_limit(info, entry))
    if hashlib.sha256(data).hexdigest() != entry.sha256:
        _bad(f"{where}: checksum mismatch (the file is corrupted or was edited)")
    buf = io.BytesIO(data)
    if not data.startswith(b"\x93NUMPY"):
        _bad(f"{where} is not an .npy file")
    version = np.lib.format.read_magic(buf)
    if version == (1, 0):
        header = np.lib.format.read_array_header_1_0(buf, max_header_size=NPY_HEADER_LIMIT)
    elif version == (2, 0):
        header = np.lib.format.read_array_header_2_0(buf, max_header_size=NPY_HEADER_LIMIT)
    else:
        _bad(f"{where}: unsupported .npy version {version}")
    shape, fortran_order, dtype = header
    if dtype.hasobject:
        _bad(f"{where} has an object dtype (it would need unpickling; refused)")
    if dtype.str != entry.dtype or tuple(shape) != entry.shape:
        _bad(f"{where}: the .npy header ({dtype.str}, {list(shape)}) disagrees with the index")
    if buf.tell() + entry.nbytes != len(data):
        _bad(f"{where}: the data does not have the size its header declares")
    # The header is checked; the data is raw bytes of that dtype (numpy.load with
    # allow_pickle=False does the same, but would parse the header a second time).
    flat = np.frombuffer(data, dtype=dtype, count=entry.numel, offset=buf.tell())
    return flat.reshape(shape, order="F" if fortran_order else "C").copy(order="C")


def _build_estimator(doc: dict[str, Any], spec: EstimatorSpec) -> Any:
    cls = spec.cls
    defaults = cls().get_params(deep=False)
    notes = doc["param_notes"]
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in notes.items()):
        _bad("'param_notes' must map parameter names to strings")
    if not all(isinstance(n, str) for n in doc["notes"]):
        _bad("'notes' must be a list of strings")
    unknown = sorted(set(doc["params"]) - set(defaults))
    if unknown:
        _bad(f"unknown parameter(s) {unknown} for {cls.__name__}")
    kwargs = {
        name: _decode(value)
        for name, value in doc["params"].items()
        if not (name in notes and value is None)
    }
    est = cls(**kwargs)
    try:
        est._validate_params()
    except ValueError as exc:
        _bad(f"invalid parameters: {exc}")
    try:
        est.encoder_ = TableEncoder.from_dict(doc["encoder"])
    except ValueError as exc:
        _bad(f"bad encoder state: {exc}")
    attrs = doc["attributes"]
    names = (*_COMMON_ATTRIBUTES, *spec.attributes)
    optional = _OPTIONAL_ATTRIBUTES | set(spec.optional)
    missing = [n for n in names if n not in attrs and n not in optional]
    extra = sorted(set(attrs) - set(names))
    if missing or extra:
        _bad(f"fitted attributes: missing {missing}, unexpected {extra}")
    for name in names:
        if name in attrs:
            setattr(est, name, _decode(attrs[name]))
    try:
        _check_common(est)
        spec.check(est)
    except (ValueError, TypeError) as exc:
        _bad(f"inconsistent fitted attributes: {exc}")
    return est


def _network_size_estimate(est: Any) -> int:
    """Number of values a fitted estimator's network allocates, from parameters and encoder.

    :func:`load` compares this with the tensors in the file before building the network, so
    that edited parameters (``n_d=10**9``) cannot make it allocate far more memory than the
    file holds. It mirrors the architecture of :class:`tabsparse.nn.TabNet` (of
    :class:`tabsparse.nn.decoder.PretrainingNetwork` for a pretrainer).

    Parameters
    ----------
    est : TabNetClassifier, TabNetRegressor or TabNetPretrainer
        With parameters, ``encoder_`` and the target attributes set.

    Returns
    -------
    int
    """
    enc: TableEncoder = est.encoder_
    n_num, n_cat = len(enc.numeric_columns), len(enc.categorical_columns)
    input_dim = n_num + n_cat * est.cat_emb_dim
    grouped = est.grouped_features
    if grouped is not None:
        grouped = [[est._column_index(c) for c in group] for group in grouped]
    n_groups = max(column_groups(enc.n_features, grouped)) + 1
    width = est.n_d + est.n_a
    glu_bn = 4 * 2 * width + 1
    shared = 2 * width * (input_dim + (est.n_shared - 1) * width) if est.n_shared else 0
    ind_in = width if est.n_shared else input_dim
    indep = 2 * width * (ind_in + (est.n_independent - 1) * width) if est.n_independent else 0
    transformer = indep + (est.n_shared + est.n_independent) * glu_bn
    attention = n_groups * est.n_a + 4 * n_groups + 1
    inputs = 3 * n_num + n_cat + sum(enc.cardinalities) * est.cat_emb_dim
    return int(
        shared
        + (est.n_steps + 1) * transformer
        + est.n_steps * attention
        + inputs
        + 2 * enc.n_features
        + input_dim
        + _after_encoder_size(est)
    )


def _after_encoder_size(est: Any) -> int:
    """Values of what follows the encoder: the linear head, or a pretrainer's decoder."""
    n_out = est._n_outputs()
    if not isinstance(est, TabNetPretrainer):
        return int(n_out * (est.n_d + 1))
    n_d, n_sh, n_ind = est.n_d, est.n_shared_decoder, est.n_indep_decoder
    glu_bn = 4 * 2 * n_d + 1
    shared = 2 * n_d * n_d * n_sh
    transformer = 2 * n_d * n_d * n_ind + (n_sh + n_ind) * glu_bn
    return int(shared + est.n_steps * transformer + n_out * (est.n_steps * n_d + 1))


def _check_network_size(est: Any, entries: list[_TensorEntry]) -> None:
    """Refuse parameters that imply a network far larger than the tensors in the file."""
    held = sum({e.file: e.numel for e in entries}.values())
    implied = _network_size_estimate(est)
    if implied > 2 * held + NETWORK_SLACK:
        _bad(
            f"the parameters imply a network of about {implied} values, but the file holds "
            f"only {held}"
        )


def _expected_network(est: Any, entries: list[_TensorEntry]) -> torch.nn.Module:
    """Build the network the parameters imply and check the tensor index against it."""
    network = est._build_network(0)
    expected = network.state_dict()
    by_name = {e.name: e for e in entries}
    missing = sorted(set(expected) - set(by_name))
    extra = sorted(set(by_name) - set(expected))
    if missing or extra:
        _bad(f"tensors missing from the file: {missing[:5]}; unexpected tensors: {extra[:5]}")
    for name, tensor in expected.items():
        entry = by_name[name]
        want_dtype = tensor.numpy().dtype.newbyteorder("<").str
        if entry.dtype != want_dtype or entry.shape != tuple(tensor.shape):
            _bad(
                f"tensor {name!r} is {entry.dtype} {list(entry.shape)}, but the parameters "
                f"imply {want_dtype} {list(tensor.shape)}"
            )
    return network


def _fill_network(
    est: Any,
    network: torch.nn.Module,
    entries: list[_TensorEntry],
    arrays: dict[str, np.ndarray],
    device: torch.device,
) -> None:
    state = {e.name: torch.from_numpy(arrays[e.file]) for e in entries}
    network.load_state_dict(state, strict=True)
    for name, tensor in network.state_dict().items():
        if tensor.numpy().tobytes() != state[name].numpy().tobytes():
            _bad(
                f"tensor {name!r} is tied to another tensor in the network but differs in the file"
            )
    network.eval()
    est.network_ = network.to(device)
    est.device_ = device


def _runtime_device(saved: str, requested: torch.device | None) -> torch.device:
    if not _DEVICE.match(saved):
        _bad(f"bad device {saved!r}")
    if requested is not None:
        return requested
    dev = torch.device(saved)
    if dev.type == "cuda":
        index = 0 if dev.index is None else dev.index
        if not torch.cuda.is_available() or index >= torch.cuda.device_count():
            return torch.device("cpu")
    return dev


def _looks_like(head: bytes, last: bytes) -> str:
    if head[:1] == b"\x80" or (last == b"." and head[:1] and head[:1] in b"(c]})NIFLSV"):
        return "; it looks like a pickle (or joblib) file, which tabsparse.load never unpickles"
    if head.startswith(b"\x93NUMPY"):
        return "; it is a bare .npy file"
    return ""


def _load(fh: Any, device: torch.device | None) -> TabNetBase:
    size = os.fstat(fh.fileno()).st_size
    head = fh.read(8)
    fh.seek(max(size - 1, 0))
    last = fh.read(1)
    fh.seek(0)
    try:
        zf = zipfile.ZipFile(fh)
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, ValueError, EOFError):
        _bad(f"not a zip archive{_looks_like(head, last)}")
    with zf:
        infos = zf.infolist()
        names = {i.filename for i in infos}
        if JSON_MEMBER not in names:
            hint = ""
            if any(n.endswith("data.pkl") for n in names):
                hint = "; it looks like a torch.save file, which tabsparse.load never unpickles"
            _bad(f"missing member {JSON_MEMBER!r}{hint}")
        _check_layout(infos, size)
        doc = _read_json(zf, zf.getinfo(JSON_MEMBER))
        spec = _check_header(doc)
        runtime = _runtime_device(doc["device"], device)
        entries = _parse_index(doc["tensors"])
        files = {e.file: e for e in entries}
        extra = sorted(names - set(files) - {JSON_MEMBER})
        missing = sorted(set(files) - names)
        if extra:
            _bad(f"unexpected member(s) {extra[:5]} (not listed in the tensor index)")
        if missing:
            _bad(f"missing member(s) {missing[:5]}")
        for file, entry in files.items():  # cheap checks first: sizes, then the JSON content
            _npy_size_limit(zf.getinfo(file), entry)
        est = _build_estimator(doc, spec)
        _check_network_size(est, entries)
        arrays = {f: _read_npy(zf, zf.getinfo(f), e) for f, e in files.items()}
    network = _expected_network(est, entries)
    _fill_network(est, network, entries, arrays, runtime)
    return est  # type: ignore[no-any-return]


def load(path: str | os.PathLike[str], *, device: str | torch.device | None = None) -> TabNetBase:
    """Load an estimator saved by :func:`save`, without unpickling or running anything.

    Parameters
    ----------
    path : str or os.PathLike
        The model file.
    device : str, torch.device or None, default=None
        Where to put the network: ``None`` uses the device it was saved from when that device
        exists here, else the CPU; ``"cpu"``, ``"cuda"``, ``"cuda:N"`` or ``"auto"`` choose.
        The ``device`` *parameter* of the estimator is restored as saved either way.

    Returns
    -------
    TabNetClassifier or TabNetRegressor
        The fitted estimator; its predictions equal those of the saved one.

    Raises
    ------
    ModelFileError
        If the file is not a valid tabsparse model file (not a zip, a pickle or torch file,
        missing or unexpected members, bad JSON, wrong format name, a newer format_version, an
        unknown estimator class, checksum, dtype or shape mismatches, ...). The message names
        the file and the problem.
    OSError
        If the file cannot be opened.
    ValueError
        If the requested ``device`` does not exist here.
    """
    requested = None if device is None else resolve_device(str(device))
    name = os.fspath(path)
    with open(name, "rb") as fh:
        try:
            return _load(fh, requested)
        except _Bad as exc:
            raise ModelFileError(name, str(exc)) from None
        except Exception as exc:
            raise ModelFileError(name, f"unreadable ({type(exc).__name__}: {exc})") from exc
