"""The container of model files: a zip archive of stored members, written atomically.

Reading checks the zip directory before any member is read (no compressed, encrypted,
duplicated or overlapping members; declared sizes inside the file, so nothing can expand beyond
the bytes on disk) and reads members with explicit size limits. :func:`checksums` and
:func:`verify_checksums` are the one integrity check of a file: a ``SHA256SUMS`` member in the
format of coreutils' ``sha256sum`` that covers every other member.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import re
import secrets
import zipfile
from typing import Any, NoReturn

from tabsparse.io._errors import bad

__all__ = [
    "CHECKSUM_MEMBER",
    "MAX_MEMBERS",
    "atomic_write",
    "check_layout",
    "checksums",
    "looks_like",
    "parse_json",
    "read_member",
    "verify_checksums",
]

MAX_MEMBERS = 100_000  # zip members of a file
CHECKSUM_MEMBER = "SHA256SUMS"
_CHECKSUM_LINE = re.compile(r"([0-9a-f]{64})  ([A-Za-z0-9._/-]{1,200})\Z")


# ---- writing -------------------------------------------------------------------------------------


def checksums(members: list[tuple[str, bytes]]) -> bytes:
    """The ``SHA256SUMS`` member covering ``members`` (``sha256sum -c`` checks it)."""
    lines = [f"{hashlib.sha256(data).hexdigest()}  {name}\n" for name, data in members]
    return "".join(lines).encode("ascii")


def _zip_info(name: str) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
    info.compress_type = zipfile.ZIP_STORED
    info.external_attr = 0o644 << 16
    return info


def atomic_write(path: str, members: list[tuple[str, bytes]]) -> None:
    """Write the zip to a fresh temporary file next to ``path``, then rename it over ``path``.

    A failure at any point leaves no temporary file and ``path`` as it was. Members are stored
    uncompressed with a fixed time stamp, so the same members give the same bytes.
    """
    folder = os.path.dirname(os.path.abspath(path))
    base = os.path.basename(path)
    if not os.path.isdir(folder):  # as open() would: the folder is never created
        missing = not os.path.exists(folder)
        raise (FileNotFoundError if missing else NotADirectoryError)(
            errno.ENOENT if missing else errno.ENOTDIR,
            f"cannot save to {path!r}: the folder {folder!r} "
            + ("does not exist (create it first)" if missing else "is not a folder"),
        )
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
    for _ in range(100):
        tmp = os.path.join(folder, f".{base}.{secrets.token_hex(8)}.tmp")
        try:
            fd = os.open(tmp, flags, 0o666)
        except FileExistsError:
            continue
        except OSError as exc:  # name the destination and its folder, not the temporary file
            raise type(exc)(
                exc.errno, f"cannot save to {path!r}: {exc.strerror} in the folder {folder!r}"
            ) from None
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


# ---- reading -------------------------------------------------------------------------------------


def looks_like(head: bytes, last: bytes) -> str:
    """A hint for a file that is not a zip: its first bytes and last byte say what it is."""
    if head[:1] == b"\x80" or (last == b"." and head[:1] and head[:1] in b"(c]})NIFLSV"):
        return "; it looks like a pickle (or joblib) file, which tabsparse.load never unpickles"
    if head.startswith(b"\x93NUMPY"):
        return "; it is a bare .npy file"
    return ""


def check_layout(infos: list[zipfile.ZipInfo], size: int) -> None:
    """Members stored, unencrypted, not overlapping and inside the file (no zip bombs)."""
    if len(infos) > MAX_MEMBERS:
        bad(f"{len(infos)} zip members (at most {MAX_MEMBERS} allowed)")
    names = [i.filename for i in infos]
    if len(set(names)) != len(names):
        dups = sorted({n for n in names if names.count(n) > 1})[:5]
        bad(f"duplicated zip member(s) {dups}")
    for info in infos:
        if info.flag_bits & 0x1:
            bad(f"member {info.filename!r} is encrypted")
        if info.compress_type != zipfile.ZIP_STORED:
            bad(
                f"member {info.filename!r} is compressed (method {info.compress_type}); "
                "tabsparse model files store members uncompressed"
            )
        if info.file_size != info.compress_size:
            bad(f"member {info.filename!r} declares inconsistent sizes")
    ordered = sorted(infos, key=lambda i: i.header_offset)
    for info, nxt in zip(ordered, [*ordered[1:], None], strict=True):
        end = info.header_offset + info.compress_size
        if info.header_offset < 0 or end > (size if nxt is None else nxt.header_offset):
            bad(f"member {info.filename!r} declares {info.file_size} bytes, more than it holds")


def read_member(zf: zipfile.ZipFile, info: zipfile.ZipInfo, limit: int) -> bytes:
    """The bytes of a member that declares at most ``limit`` bytes (and holds what it declares)."""
    if info.file_size > limit:
        bad(f"member {info.filename!r} declares {info.file_size} bytes (at most {limit} expected)")
    with zf.open(info) as fh:
        data = fh.read(limit + 1)
    if len(data) != info.file_size:
        bad(f"member {info.filename!r} is truncated")
    return data


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        bad("a JSON object has duplicated keys")
    return out


def parse_json(raw: bytes, member: str) -> dict[str, Any]:
    """Strict JSON: UTF-8, no ``NaN``/``Infinity`` constants, no duplicated keys, an object."""

    def no_constant(name: str) -> NoReturn:
        bad(f"{member} contains the non-standard JSON constant {name}")

    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        bad(f"{member} is not UTF-8 text")
    try:
        doc = json.loads(text, parse_constant=no_constant, object_pairs_hook=_unique_keys)
    except (json.JSONDecodeError, RecursionError) as exc:
        bad(f"{member} is not valid JSON ({exc})")
    if not isinstance(doc, dict):
        bad(f"{member} must hold a JSON object")
    return doc


def verify_checksums(members: dict[str, bytes], listing: bytes) -> None:
    """Check ``SHA256SUMS`` against every other member: the same names, and every digest.

    Raises :class:`~tabsparse.io._errors.FileProblem` for a malformed listing, a member it does
    not list or lists but the file lacks, and a digest that differs (edited or corrupted).
    """
    try:
        text = listing.decode("ascii")
    except UnicodeDecodeError:
        bad(f"{CHECKSUM_MEMBER} is not ASCII text")
    lines = text.split("\n")
    if lines[-1] != "":
        bad(f"{CHECKSUM_MEMBER} must end with a newline")
    listed: dict[str, str] = {}
    for line in lines[:-1]:
        match = _CHECKSUM_LINE.match(line)
        if match is None or match.group(2) in listed:
            bad(f"{CHECKSUM_MEMBER} has a malformed or repeated line {line[:80]!r}")
        listed[match.group(2)] = match.group(1)
    extra = sorted(set(members) - set(listed))
    missing = sorted(set(listed) - set(members))
    if extra:
        bad(f"unexpected member(s) {extra[:5]} (not covered by {CHECKSUM_MEMBER})")
    if missing:
        bad(f"missing member(s) {missing[:5]} (listed in {CHECKSUM_MEMBER})")
    for name, digest in listed.items():
        if hashlib.sha256(members[name]).hexdigest() != digest:
            bad(
                f"member {name!r}: checksum mismatch (the file is corrupted or was edited "
                "after it was saved)"
            )
