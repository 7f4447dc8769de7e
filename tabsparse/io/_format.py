"""The model file format: a :class:`ModelPayload` <-> a file, and :func:`save` / :func:`load`.

A file (format_version 2) is a zip archive of three stored members:

* ``tabsparse.json``: the envelope (format name and version, the tabsparse version that wrote
  it, the estimator class name, ``tied``: which state-dict names are stored as another's
  tensor) and the estimator's document (parameters, fitted attributes, encoder state, ...,
  whose meaning belongs to the estimator layer, ``tabsparse.estimators._persistence``);
* ``weights.safetensors``: every distinct network tensor, by state-dict name;
* ``SHA256SUMS``: the SHA-256 of the two members above (``sha256sum -c`` format). It is the
  one integrity check: every member, the JSON included, is verified before anything in the
  file is used. It detects corruption and edits; it is not a signature.

This module knows nothing about estimators: :func:`save` and :func:`load` take a registry
mapping class names to codecs (objects with ``cls``, ``to_payload(estimator)`` and
``from_payload(payload, device)``) that the estimator layer provides.
"""

from __future__ import annotations

import json
import os
import warnings
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch

from tabsparse.io._archive import (
    CHECKSUM_MEMBER,
    atomic_write,
    check_layout,
    checksums,
    looks_like,
    parse_json,
    read_member,
    verify_checksums,
)
from tabsparse.io._errors import FileProblem, ModelFileError, bad
from tabsparse.io._legacy import read_tensors_v1
from tabsparse.io._values import is_int

__all__ = [
    "FORMAT_NAME",
    "FORMAT_VERSION",
    "JSON_MEMBER",
    "WEIGHTS_MEMBER",
    "EstimatorCodec",
    "ModelPayload",
    "load",
    "read_model_file",
    "save",
    "use_registry",
    "write_model_file",
]

FORMAT_NAME = "tabsparse-model"
FORMAT_VERSION = 2
JSON_MEMBER = "tabsparse.json"
WEIGHTS_MEMBER = "weights.safetensors"
MAX_JSON_BYTES = 256 * 2**20  # uncompressed size of tabsparse.json
_ENVELOPE = ("format", "format_version", "tabsparse_version", "estimator")
_TENSOR_DTYPES = frozenset(
    {
        torch.float16,
        torch.bfloat16,
        torch.float32,
        torch.float64,
        torch.int8,
        torch.int16,
        torch.int32,
        torch.int64,
        torch.uint8,
        torch.bool,
    }
)


@dataclass
class ModelPayload:
    """What a model file holds, independent of how it is laid out.

    Attributes
    ----------
    estimator : str
        The estimator class name (looked up in a registry, never imported).
    document : dict
        JSON data of the estimator layer (keys other than the envelope's).
    tensors : dict of str to torch.Tensor
        Every ``state_dict`` entry by name; names the network ties share one tensor.
    format_version : int
        The format the file was read from (:data:`FORMAT_VERSION` when writing).
    tabsparse_version : str
        The tabsparse that wrote the file (informational).
    """

    estimator: str
    document: dict[str, Any]
    tensors: dict[str, torch.Tensor]
    format_version: int = FORMAT_VERSION
    tabsparse_version: str = field(default="")


class EstimatorCodec(Protocol):
    """How the estimator layer turns one estimator class into a payload and back."""

    @property
    def cls(self) -> type:
        """The estimator class (files name it by ``cls.__name__``)."""

    def to_payload(self, estimator: Any) -> ModelPayload: ...

    def from_payload(self, payload: ModelPayload, device: Any) -> Any: ...


# ---- writing -------------------------------------------------------------------------------------


def _distinct_tensors(
    tensors: dict[str, torch.Tensor],
) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    """CPU copies of the distinct tensors, and the names tied to an earlier one."""
    stored: dict[str, torch.Tensor] = {}
    tied: dict[str, str] = {}
    seen: dict[tuple[Any, ...], str] = {}
    for name, tensor in tensors.items():
        key = (
            tensor.device,
            tensor.untyped_storage().data_ptr(),
            tensor.storage_offset(),
            tuple(tensor.shape),
            tensor.stride(),
            tensor.dtype,
        )
        if key in seen:
            tied[name] = seen[key]
            continue
        if tensor.dtype not in _TENSOR_DTYPES:
            raise ValueError(f"cannot save tensor {name!r} of dtype {tensor.dtype}")
        seen[key] = name
        stored[name] = tensor.detach().to("cpu", copy=True).contiguous()
    return stored, tied


def write_model_file(path: str | os.PathLike[str], payload: ModelPayload) -> None:
    """Write ``payload`` as a model file (atomically: see ``_archive.atomic_write``)."""
    from safetensors.torch import save as safetensors_bytes

    from tabsparse import __version__

    clash = sorted({*_ENVELOPE, "tied"} & set(payload.document))
    if clash:
        raise ValueError(f"the document may not use the envelope keys {clash}")
    stored, tied = _distinct_tensors(payload.tensors)
    doc = {
        "format": FORMAT_NAME,
        "format_version": FORMAT_VERSION,
        "tabsparse_version": __version__,
        "estimator": payload.estimator,
        **payload.document,
        "tied": tied,
    }
    text = json.dumps(doc, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    members = [(JSON_MEMBER, text.encode("utf-8")), (WEIGHTS_MEMBER, safetensors_bytes(stored))]
    atomic_write(os.fspath(path), [*members, (CHECKSUM_MEMBER, checksums(members))])


# ---- reading -------------------------------------------------------------------------------------


def _read_weights(data: bytes, tied: Any) -> dict[str, torch.Tensor]:
    from safetensors import SafetensorError
    from safetensors.torch import load as safetensors_load

    try:
        weights = safetensors_load(data)
    except SafetensorError as exc:
        bad(f"{WEIGHTS_MEMBER} is not a valid safetensors file ({exc})")
    for name, tensor in weights.items():
        if tensor.dtype not in _TENSOR_DTYPES:
            bad(f"tensor {name!r} has the unsupported dtype {tensor.dtype}")
    if not isinstance(tied, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in tied.items()
    ):
        bad("'tied' must map tensor names to tensor names")
    tensors = dict(weights)
    for alias, name in tied.items():
        if alias in weights or name not in weights:
            bad(f"'tied' names {alias!r} -> {name!r}, which does not fit {WEIGHTS_MEMBER}")
        tensors[alias] = weights[name]
    return tensors


def _check_envelope(doc: dict[str, Any]) -> int:
    if doc.get("format") != FORMAT_NAME:
        bad(f"wrong format name {doc.get('format')!r} (expected {FORMAT_NAME!r})")
    version: Any = doc.get("format_version")
    if not is_int(version) or version < 1:
        bad(f"invalid format_version {version!r}")
    if version > FORMAT_VERSION:
        bad(
            f"unsupported format_version {version}: the file was written by a newer tabsparse "
            f"(this one reads format_version {FORMAT_VERSION} and older); upgrade tabsparse"
        )
    return int(version)


def _read_zip(fh: Any, path: str) -> ModelPayload:
    size = os.fstat(fh.fileno()).st_size
    head = fh.read(8)
    fh.seek(max(size - 1, 0))
    last = fh.read(1)
    fh.seek(0)
    try:
        zf = zipfile.ZipFile(fh)
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, ValueError, EOFError):
        bad(f"not a zip archive{looks_like(head, last)}")
    with zf:
        infos = zf.infolist()
        names = {i.filename for i in infos}
        if JSON_MEMBER not in names:
            hint = ""
            if any(n.endswith("data.pkl") for n in names):
                hint = "; it looks like a torch.save file, which tabsparse.load never unpickles"
            bad(f"missing member {JSON_MEMBER!r}{hint}")
        check_layout(infos, size)
        raw = read_member(zf, zf.getinfo(JSON_MEMBER), MAX_JSON_BYTES)
        doc = parse_json(raw, JSON_MEMBER)
        version = _check_envelope(doc)
        if version == 1:
            envelope = {*_ENVELOPE, "tensors"}
            _check_keys(doc, envelope)
            tensors = read_tensors_v1(zf, doc["tensors"], names - {JSON_MEMBER})
            warnings.warn(
                f"{path!r} is a format_version 1 model file: its JSON is not covered by a "
                "checksum, so edits to it go unnoticed. Re-save it in the current format with "
                "tabsparse.save(tabsparse.load(path), path).",
                UserWarning,
                stacklevel=5,
            )
        else:
            envelope = {*_ENVELOPE, "tied"}
            if CHECKSUM_MEMBER not in names:
                bad(f"missing member {CHECKSUM_MEMBER!r}")
            extra = sorted(names - {JSON_MEMBER, WEIGHTS_MEMBER, CHECKSUM_MEMBER})
            if extra:
                bad(f"unexpected member(s) {extra[:5]}")
            members = {i.filename: read_member(zf, i, size) for i in infos}
            verify_checksums(
                {k: v for k, v in members.items() if k != CHECKSUM_MEMBER},
                members[CHECKSUM_MEMBER],
            )
            _check_keys(doc, envelope)
            if WEIGHTS_MEMBER not in members:
                bad(f"missing member {WEIGHTS_MEMBER!r}")
            tensors = _read_weights(members[WEIGHTS_MEMBER], doc["tied"])
    if not isinstance(doc["tabsparse_version"], str):
        bad("'tabsparse_version' must be a JSON string")
    if not isinstance(doc["estimator"], str):
        bad(f"unknown estimator class {doc['estimator']!r}")
    return ModelPayload(
        estimator=doc["estimator"],
        document={k: v for k, v in doc.items() if k not in envelope},
        tensors=tensors,
        format_version=version,
        tabsparse_version=doc["tabsparse_version"],
    )


def _check_keys(doc: dict[str, Any], envelope: set[str]) -> None:
    missing = sorted(envelope - set(doc))
    if missing:
        bad(f"{JSON_MEMBER} has missing keys {missing}")


def read_model_file(path: str | os.PathLike[str]) -> ModelPayload:
    """Read and verify a model file (any supported format_version) without running code.

    Raises
    ------
    ModelFileError
        If the file is not a valid model file; the message names it and the problem.
    OSError
        If it cannot be opened.
    """
    name = os.fspath(path)
    with open(name, "rb") as fh:
        try:
            return _read_zip(fh, name)
        except FileProblem as exc:
            raise ModelFileError(name, str(exc)) from None
        except Exception as exc:
            raise ModelFileError(name, f"unreadable ({type(exc).__name__}: {exc})") from exc


# ---- estimators through a registry ---------------------------------------------------------------

_default_registry: Mapping[str, EstimatorCodec] | None = None


def use_registry(registry: Mapping[str, EstimatorCodec]) -> None:
    """Make ``registry`` what :func:`save` and :func:`load` use when given none.

    The estimator layer (``tabsparse.estimators._persistence``) calls this when it is imported,
    with its allow-list of estimator classes.
    """
    global _default_registry
    _default_registry = registry


def _registry(registry: Mapping[str, EstimatorCodec] | None) -> Mapping[str, EstimatorCodec]:
    if registry is not None:
        return registry
    if _default_registry is None:
        raise RuntimeError(
            "no estimator classes are registered with tabsparse.io: use tabsparse.save / "
            "tabsparse.load, which register the tabsparse estimators"
        )
    return _default_registry


def save(
    estimator: Any,
    path: str | os.PathLike[str],
    *,
    registry: Mapping[str, EstimatorCodec] | None = None,
) -> None:
    """Save a fitted estimator of a registered class (see :func:`tabsparse.save`)."""
    codecs = _registry(registry)
    codec = codecs.get(type(estimator).__name__)
    if codec is None or type(estimator) is not codec.cls:
        allowed = ", ".join(sorted(codecs))
        raise TypeError(
            f"tabsparse.save handles the registered estimator classes ({allowed}), "
            f"got {type(estimator).__name__}; see register_estimator"
        )
    write_model_file(path, codec.to_payload(estimator))


def load(
    path: str | os.PathLike[str],
    *,
    device: Any = None,
    registry: Mapping[str, EstimatorCodec] | None = None,
) -> Any:
    """Load an estimator from a model file (see :func:`tabsparse.load`).

    ``device`` is passed to the codec as it is (the estimator layer resolves it first).
    """
    codecs = _registry(registry)
    payload = read_model_file(path)
    name = os.fspath(path)
    codec = codecs.get(payload.estimator)
    try:
        if codec is None:
            bad(
                f"unknown estimator class {payload.estimator!r} "
                f"(allowed: {', '.join(sorted(codecs))})"
            )
        return codec.from_payload(payload, device)
    except FileProblem as exc:
        raise ModelFileError(name, str(exc)) from None
    except Exception as exc:
        raise ModelFileError(name, f"unreadable ({type(exc).__name__}: {exc})") from exc
