"""Reading format_version 1 files (tabsparse 0.1 before the safetensors format).

A version-1 file holds ``tabsparse.json`` (whose ``tensors`` key indexes the weights: name,
member, dtype, shape and the SHA-256 of the member) and one ``tensors/<k>.npy`` member per
distinct tensor. Only the ``.npy`` members are checksummed: its JSON is not covered, which is
why :func:`tabsparse.io.load` warns when it reads one (saving the loaded model writes the
current format). The ``.npy`` headers are parsed by numpy's header reader (literals only);
object dtypes are refused and the data are taken as raw bytes of the checked dtype.
"""

from __future__ import annotations

import hashlib
import io
import math
import re
import zipfile
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from tabsparse.io._archive import MAX_MEMBERS, read_member
from tabsparse.io._errors import bad
from tabsparse.io._values import is_int

__all__ = ["read_tensors_v1"]

NPY_HEADER_LIMIT = 10_000  # bytes of an .npy header dictionary (numpy's own default limit)
_TENSOR_KEYS = frozenset({"name", "file", "dtype", "shape", "sha256"})
_TENSOR_FILE = re.compile(r"tensors/(0|[1-9][0-9]{0,5})\.npy\Z")
_SHA256 = re.compile(r"[0-9a-f]{64}\Z")
# numpy dtype strings allowed for tensors (always written little-endian).
_TENSOR_DTYPES = frozenset({"<f2", "<f4", "<f8", "|i1", "<i2", "<i4", "<i8", "|u1", "|b1"})


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


def _parse_index(raw: Any) -> list[_TensorEntry]:
    if not isinstance(raw, list):
        bad("'tensors' must be a JSON list")
    if len(raw) > MAX_MEMBERS:
        bad(f"the tensor index lists {len(raw)} tensors (at most {MAX_MEMBERS} allowed)")
    entries: list[_TensorEntry] = []
    by_file: dict[str, _TensorEntry] = {}
    for item in raw:
        if not isinstance(item, dict) or set(item) != _TENSOR_KEYS:
            bad(f"tensor index entries must have exactly the keys {sorted(_TENSOR_KEYS)}")
        name, file, dtype, shape, sha = (
            item[k] for k in ("name", "file", "dtype", "shape", "sha256")
        )
        if not isinstance(name, str) or not name:
            bad(f"bad tensor name {name!r}")
        if not isinstance(file, str) or not _TENSOR_FILE.match(file):
            bad(f"tensor {name!r}: bad file name {file!r}")
        if not isinstance(dtype, str) or dtype not in _TENSOR_DTYPES:
            bad(f"tensor {name!r}: unsupported dtype {dtype!r}")
        if not isinstance(shape, list) or len(shape) > 32:
            bad(f"tensor {name!r}: bad shape {shape!r}")
        if not all(is_int(d) and 0 <= d < 2**48 for d in shape):
            bad(f"tensor {name!r}: bad shape {shape!r}")
        if not isinstance(sha, str) or not _SHA256.match(sha):
            bad(f"tensor {name!r}: bad sha256 {sha!r}")
        entry = _TensorEntry(name, file, dtype, tuple(shape), sha)
        other = by_file.setdefault(file, entry)
        if (other.dtype, other.shape, other.sha256) != (dtype, entry.shape, sha):
            bad(f"tensors {other.name!r} and {name!r} share {file} but disagree about it")
        entries.append(entry)
    names = [e.name for e in entries]
    if len(set(names)) != len(names):
        bad("the tensor index names a tensor twice")
    return entries


def _npy_size_limit(info: zipfile.ZipInfo, entry: _TensorEntry) -> int:
    """Check a tensor member's declared size against its index entry; return the upper bound."""
    low, high = entry.nbytes + 10, entry.nbytes + NPY_HEADER_LIMIT + 12
    if not low <= info.file_size <= high:
        bad(
            f"member {entry.file!r} (tensor {entry.name!r}) holds {info.file_size} bytes, but a "
            f"{entry.dtype} tensor of shape {list(entry.shape)} needs {entry.nbytes} bytes plus "
            "a header"
        )
    return high


def _read_npy(zf: zipfile.ZipFile, info: zipfile.ZipInfo, entry: _TensorEntry) -> np.ndarray:
    where = f"member {entry.file!r} (tensor {entry.name!r})"
    data = read_member(zf, info, _npy_size_limit(info, entry))
    if hashlib.sha256(data).hexdigest() != entry.sha256:
        bad(f"{where}: checksum mismatch (the file is corrupted or was edited)")
    buf = io.BytesIO(data)
    if not data.startswith(b"\x93NUMPY"):
        bad(f"{where} is not an .npy file")
    version = np.lib.format.read_magic(buf)
    if version == (1, 0):
        header = np.lib.format.read_array_header_1_0(buf, max_header_size=NPY_HEADER_LIMIT)
    elif version == (2, 0):
        header = np.lib.format.read_array_header_2_0(buf, max_header_size=NPY_HEADER_LIMIT)
    else:
        bad(f"{where}: unsupported .npy version {version}")
    shape, fortran_order, dtype = header
    if dtype.hasobject:
        bad(f"{where} has an object dtype (it would need unpickling; refused)")
    if dtype.str != entry.dtype or tuple(shape) != entry.shape:
        bad(f"{where}: the .npy header ({dtype.str}, {list(shape)}) disagrees with the index")
    if buf.tell() + entry.nbytes != len(data):
        bad(f"{where}: the data does not have the size its header declares")
    flat = np.frombuffer(data, dtype=dtype, count=entry.numel, offset=buf.tell())
    return flat.reshape(shape, order="F" if fortran_order else "C").copy(order="C")


def read_tensors_v1(zf: zipfile.ZipFile, index: Any, others: set[str]) -> dict[str, torch.Tensor]:
    """The tensors of a version-1 file, by state-dict name (tied names share one tensor).

    Parameters
    ----------
    zf : zipfile.ZipFile
        The open archive (its layout already checked).
    index : object
        The ``tensors`` value of ``tabsparse.json``.
    others : set of str
        The archive's member names other than ``tabsparse.json``: exactly the files the index
        names.
    """
    entries = _parse_index(index)
    files = {e.file: e for e in entries}
    extra = sorted(others - set(files))
    missing = sorted(set(files) - others)
    if extra:
        bad(f"unexpected member(s) {extra[:5]} (not listed in the tensor index)")
    if missing:
        bad(f"missing member(s) {missing[:5]}")
    for file, entry in files.items():  # cheap checks first: every declared size
        _npy_size_limit(zf.getinfo(file), entry)
    arrays = {f: torch.from_numpy(_read_npy(zf, zf.getinfo(f), e)) for f, e in files.items()}
    return {e.name: arrays[e.file] for e in entries}
