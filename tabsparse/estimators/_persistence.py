"""Estimators <-> model-file payloads: the estimator half of :mod:`tabsparse.io`.

:mod:`tabsparse.io` reads and writes the file format and knows no estimator; this module says
what of an estimator goes into a file and how a file becomes an estimator again: the
allow-list of classes (:data:`ESTIMATORS`, extended with :func:`register_estimator`), the
parameters and fitted attributes (as typed JSON values), the table encoder, the network
tensors, and every check of them on the way back. The network a file's fitted architecture
(``architecture_``; the parameters for files written before it) describes is built on the meta
device (no memory) and compared, tensor by tensor, with the file before the real network is
built from it. :func:`save` and :func:`load` are ``tabsparse.save`` / ``tabsparse.load``.
"""

from __future__ import annotations

import os
import re
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import torch
from sklearn.utils.validation import check_is_fitted

from tabsparse import io as model_io
from tabsparse.data import TableEncoder
from tabsparse.estimators._base import TabNetBase, resolve_device
from tabsparse.estimators._fitted_checks import check_common, check_target
from tabsparse.estimators._fixed import REMOVED_PARAMS
from tabsparse.estimators.classifier import TabNetClassifier
from tabsparse.estimators.pretrainer import TabNetPretrainer
from tabsparse.estimators.regressor import TabNetRegressor
from tabsparse.io import FileProblem, ModelFileError, ModelPayload, decode_value, encode_value
from tabsparse.io._values import is_int as _is_int

__all__ = ["ESTIMATORS", "EstimatorSpec", "ModelFileError", "load", "register_estimator", "save"]

_DEVICE = re.compile(r"(cpu|cuda(:[0-9]{1,4})?)\Z")
NETWORK_SLACK = 2**20  # values the parameters may imply beyond twice what the file holds
_DOCUMENT_KEYS = frozenset({"params", "param_notes", "attributes", "notes", "device", "encoder"})
# parameters that each add modules (each with at least one tensor) to the network
_REPEATS = (
    "n_steps",
    "n_shared",
    "n_independent",
    "n_shared_decoder",
    "n_indep_decoder",
    "n_members",
)
# ``_fixed``: the fixed choices (a test may replace them on an instance): the network's are in
# ``architecture_``, the others only shaped the training
_SKIPPED_STATE = frozenset(
    {"network_", "encoder_", "device_", "_sklearn_output_config", "_metadata_request", "_fixed"}
)
# the network's settings of the first model files where they did not name them
_ADDED_PARAMS = {"first_mask": "per_row"}
_COMMON_ATTRIBUTES = (
    "n_features_in_",
    "feature_names_in_",
    "feature_importances_",
    "feature_importances_std_",
    "history_",
    "n_iter_",
    "best_iteration_",
    "compiled_",
    "n_members_",
    "numeric_embedding_",
    "first_mask_",
    "cat_emb_dim_",
    "architecture_",
    "background_",
    "selector_",
)
# files written before compile= existed have no compiled_; before the importance spread, no
# feature_importances_std_ (such a model loads without it: no spread to show); before
# n_members="auto", no n_members_ / numeric_embedding_, before the first-mask rule no first_mask_,
# before the categorical width rule no cat_emb_dim_ (a pretrainer has none of these four); before
# the fitted architecture, no architecture_: the network is then built from the parameters (which
# such files saved as fitted) and architecture_ is set from them; before attributions, no
# background_ (explain(X, attributions=True) then needs background=); a model whose outputs no
# column moves, or a pretrainer, has no selector_ (explain(X).selected: the masks')
_OPTIONAL_ATTRIBUTES = frozenset(
    {
        "feature_names_in_",
        "compiled_",
        "feature_importances_std_",
        "n_members_",
        "numeric_embedding_",
        "first_mask_",
        "cat_emb_dim_",
        "architecture_",
        "background_",
        "selector_",
    }
)


def _bad(problem: str) -> Any:
    raise FileProblem(problem)


# ---- the allow-list ------------------------------------------------------------------------------


@dataclass(frozen=True)
class EstimatorSpec:
    """How one estimator class is stored (a codec for :func:`tabsparse.io.save` / ``load``).

    Parameters
    ----------
    cls : type
        The estimator class (a :class:`~tabsparse.estimators._base.TabNetBase` subclass); the
        only classes :func:`load` ever instantiates are the ``cls`` of registered specs.
    attributes : tuple of str
        Fitted attributes of this class beyond the common ones (``n_features_in_``,
        ``feature_names_in_``, ``feature_importances_``, ``feature_importances_std_``,
        ``history_``, ``n_iter_``, ``best_iteration_``, ``compiled_``, ``n_members_``,
        ``numeric_embedding_``, ``first_mask_``, ``cat_emb_dim_``, ``architecture_``), saved
        with their types
        and restored after checks.
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

    def to_payload(self, estimator: Any) -> ModelPayload:
        """The payload of a fitted estimator of this class."""
        check_is_fitted(estimator)
        return _payload(estimator, self)

    def from_payload(self, payload: ModelPayload, device: str | torch.device | None) -> Any:
        """A fitted estimator from a payload read from a file; ``FileProblem`` if inconsistent.

        ``device`` as for :func:`load` (a string is resolved here when
        :func:`tabsparse.io.load` is called directly).
        """
        if device is not None and not isinstance(device, torch.device):
            device = resolve_device(str(device))
        return _estimator(payload, self, device)


ESTIMATORS: dict[str, EstimatorSpec] = {}
"""Registered estimator classes by class name: the allow-list :func:`load` instantiates from."""


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


register_estimator(
    TabNetClassifier,
    attributes=("classes_", "n_outputs_", "_target_kind", "mean_label_count_"),
    check=check_target,
    optional=("n_outputs_", "_target_kind", "mean_label_count_"),
)
register_estimator(TabNetPretrainer, attributes=(), check=lambda est: None)
register_estimator(
    TabNetRegressor,
    attributes=("n_outputs_", "target_mean_", "target_scale_", "_y_ndim", "_objective"),
    check=check_target,
    optional=("_objective",),
)


# ---- estimator -> payload ------------------------------------------------------------------------


def _payload(estimator: Any, spec: EstimatorSpec) -> ModelPayload:
    params: dict[str, Any] = {}
    param_notes: dict[str, str] = {}
    for name, value in estimator.get_params(deep=False).items():
        try:
            params[name] = encode_value(value)
        except model_io.NotStorable as exc:
            params[name] = None
            param_notes[name] = f"not stored ({exc} is not JSON data); loads as the default"
    attributes: dict[str, Any] = {}
    for name in (*_COMMON_ATTRIBUTES, *spec.attributes):
        if name in vars(estimator) or (hasattr(estimator, name) and name not in spec.optional):
            try:
                attributes[name] = encode_value(getattr(estimator, name))
            except model_io.NotStorable as exc:
                raise ValueError(f"cannot save fitted attribute {name}: {exc}") from exc
        elif name not in _OPTIONAL_ATTRIBUTES and name not in spec.optional:
            raise ValueError(f"cannot save: the fitted attribute {name} is missing")
    notes = []
    for name in sorted(vars(estimator)):
        if name not in params and name not in attributes and name not in _SKIPPED_STATE:
            notes.append(f"attribute {name} was not saved")
            warnings.warn(
                f"tabsparse.save does not know the attribute {name!r} of "
                f"{type(estimator).__name__}; it is not saved (register it in "
                "tabsparse.estimators._persistence)",
                UserWarning,
                stacklevel=5,
            )
    document = {
        "params": params,
        "param_notes": param_notes,
        "attributes": attributes,
        "notes": notes,
        "device": str(torch.device(estimator.device_)),
        "encoder": estimator.encoder_.to_dict(),
    }
    return ModelPayload(
        estimator=type(estimator).__name__,
        document=document,
        tensors=dict(estimator.network_.state_dict()),
    )


# ---- payload -> estimator ------------------------------------------------------------------------


def _check_document(doc: dict[str, Any]) -> None:
    missing = sorted(_DOCUMENT_KEYS - set(doc))
    extra = sorted(set(doc) - _DOCUMENT_KEYS)
    if missing or extra:
        _bad(f"{model_io.JSON_MEMBER} has missing keys {missing} / unexpected keys {extra}")
    for key, kind in (
        ("params", dict),
        ("param_notes", dict),
        ("attributes", dict),
        ("notes", list),
        ("device", str),
        ("encoder", dict),
    ):
        if not isinstance(doc[key], kind):
            _bad(f"{key!r} must be a JSON {'object' if kind is dict else kind.__name__}")
    notes = doc["param_notes"]
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in notes.items()):
        _bad("'param_notes' must map parameter names to strings")
    if not all(isinstance(n, str) for n in doc["notes"]):
        _bad("'notes' must be a list of strings")


def _build_estimator(doc: dict[str, Any], spec: EstimatorSpec) -> Any:
    cls = spec.cls
    defaults = cls().get_params(deep=False)
    notes = doc["param_notes"]
    unknown = sorted(set(doc["params"]) - set(defaults) - REMOVED_PARAMS)
    if unknown:
        _bad(f"unknown parameter(s) {unknown} for {cls.__name__}")
    kwargs = {
        name: decode_value(value)
        for name, value in doc["params"].items()
        if not (name in notes and value is None)
    }
    # settings that were parameters when the file was written: a training setting is spent,
    # the network's are in architecture_ (files from before it: taken from here below)
    former = {name: kwargs.pop(name) for name in sorted(REMOVED_PARAMS & set(kwargs))}
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
            setattr(est, name, decode_value(attrs[name]))
    if "architecture_" not in attrs:  # a file from before it: built from what it was fitted with
        arch = est._architecture()
        fitted = {**_ADDED_PARAMS, **former}
        est.architecture_ = {
            **arch,
            # a resolved fitted attribute (first_mask_, cat_emb_dim_) says what was built
            **{
                k: v
                for k, v in fitted.items()
                if k in arch and v != "auto" and f"{k}_" not in attrs
            },
        }
    try:
        check_common(est)
        spec.check(est)
    except (ValueError, TypeError) as exc:
        _bad(f"inconsistent fitted attributes: {exc}")
    return est


def _distinct_values(tensors: Iterable[torch.Tensor]) -> int:
    """Values held by distinct tensor objects (tied names count once)."""
    return sum({id(t): t.numel() for t in tensors}.values())


def _meta_network(est: Any) -> torch.nn.Module:
    """The network the estimator's parameters and encoder describe, built on the meta device."""
    with torch.device("meta"):
        return est._build_network(0)  # type: ignore[no-any-return]


def _network_size_estimate(est: Any) -> int:
    """Number of values the network of a fitted (or loaded) estimator holds, from its settings.

    Counted on a meta-device build (no memory is allocated); tied tensors count once.
    """
    return _distinct_values(_meta_network(est).state_dict(keep_vars=True).values())


def _check_network(est: Any, tensors: dict[str, torch.Tensor]) -> None:
    """Refuse settings that describe another network than the tensors in the file.

    Cheap bounds first (each repeated block adds tensors; the meta build's size against what
    the file holds), then every state-dict name, dtype and shape against the meta build.
    """
    arch = est._fitted_architecture()
    for name in _REPEATS:
        value = arch.get(name, 0)
        if _is_int(value) and value > len(tensors):
            _bad(
                f"the architecture implies a network of at least {value} blocks "
                f"({name}={value}), but the file holds only {len(tensors)} tensors"
            )
    expected = _meta_network(est).state_dict(keep_vars=True)
    held = _distinct_values(tensors.values())
    implied = _distinct_values(expected.values())
    if implied > 2 * held + NETWORK_SLACK:
        _bad(
            f"the architecture implies a network of about {implied} values, but the file holds "
            f"only {held}"
        )
    missing = sorted(set(expected) - set(tensors))
    extra = sorted(set(tensors) - set(expected))
    if missing or extra:
        _bad(f"tensors missing from the file: {missing[:5]}; unexpected tensors: {extra[:5]}")
    for name, want in expected.items():
        got = tensors[name]
        if got.dtype != want.dtype or got.shape != want.shape:
            _bad(
                f"tensor {name!r} is {got.dtype} {list(got.shape)}, but the architecture implies "
                f"{want.dtype} {list(want.shape)}"
            )


def _same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Bit-for-bit equality (NaNs included)."""
    raw = [t.detach().reshape(-1).contiguous().view(torch.uint8) for t in (a, b)]
    return a.dtype == b.dtype and a.shape == b.shape and torch.equal(*raw)


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


def _estimator(payload: ModelPayload, spec: EstimatorSpec, device: torch.device | None) -> Any:
    doc = payload.document
    _check_document(doc)
    est = _build_estimator(doc, spec)
    runtime = _runtime_device(doc["device"], device)
    _check_network(est, payload.tensors)
    network = est._build_network(0)
    network.load_state_dict(payload.tensors, strict=True)
    for name, tensor in network.state_dict().items():
        if not torch.equal(tensor, payload.tensors[name]):
            _bad(
                f"tensor {name!r} is tied to another tensor in the network but differs in the file"
            )
    network.eval()
    est.network_ = network.to(runtime)
    est.device_ = runtime
    try:
        est._selector_net()
    except ValueError as exc:
        _bad(f"inconsistent fitted attributes: {exc}")
    return est


# ---- the public functions ------------------------------------------------------------------------


def save(estimator: TabNetBase, path: str | os.PathLike[str]) -> None:
    """Save a fitted estimator to a model file that :func:`load` reads without running code.

    The file is written to a temporary file in the same folder and then renamed over ``path``,
    so a failed save leaves no partial file and never damages an existing one. Tensors are
    written from CPU copies, so a model trained on CUDA loads on a machine without a GPU.

    Parameters
    ----------
    estimator : TabNetClassifier, TabNetRegressor or TabNetPretrainer
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
    model_io.save(estimator, path, registry=ESTIMATORS)


def load(path: str | os.PathLike[str], *, device: str | torch.device | None = None) -> TabNetBase:
    """Load an estimator saved by :func:`save`, without unpickling or running anything.

    Every member of the file is checked against its SHA-256 in ``SHA256SUMS`` before use;
    files of format_version 1 (which have no checksum over their JSON) load with a warning.

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
    TabNetClassifier, TabNetRegressor or TabNetPretrainer
        The fitted estimator; its predictions equal those of the saved one.

    Raises
    ------
    ModelFileError
        If the file is not a valid tabsparse model file (not a zip, a pickle or torch file,
        missing or unexpected members, a checksum mismatch, bad JSON, wrong format name, a newer
        format_version, an unknown estimator class, dtype or shape mismatches, ...). The
        message names the file and the problem.
    OSError
        If the file cannot be opened.
    ValueError
        If the requested ``device`` does not exist here.
    """
    requested = None if device is None else resolve_device(str(device))
    return model_io.load(path, device=requested, registry=ESTIMATORS)  # type: ignore[no-any-return]


model_io.use_registry(ESTIMATORS)  # tabsparse.io.save / load without a registry use this one
