"""Fuzzed model files: every damaged or edited file is refused with ModelFileError or loads to
the very same predictions; files whose checksums were recomputed after an edit (anyone can do
that: the check is not a signature) raise ModelFileError or load, never anything else. Also the
typed JSON value codec."""

from __future__ import annotations

import io
import json
import re
import struct
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from model_file_helpers import (
    TINY,
    edit_doc,
    make_frame,
    read_members_bytes,
    resign,
    set_path,
    zip_bytes,
)

from tabsparse import TabNetClassifier, load, save
from tabsparse.io import JSON_MEMBER, WEIGHTS_MEMBER, ModelFileError, decode_value, encode_value


@pytest.fixture(scope="module")
def X() -> pd.DataFrame:
    return make_frame()


@pytest.fixture(scope="module")
def saved(X: pd.DataFrame, tmp_path_factory: pytest.TempPathFactory) -> Path:
    y = np.where(X["num"] > 0, "yes", "no")
    path = tmp_path_factory.mktemp("fuzz") / "model.tabsparse"
    save(TabNetClassifier(**TINY).fit(X, y), path)
    return path


def _structure_offsets(raw: bytes) -> list[int]:
    """Offsets of every local header, data start/end, central entry and the end record."""
    offsets = [0, 1, 4, len(raw) - 22, len(raw) - 1]
    with zipfile.ZipFile(io.BytesIO(raw)) as zf:
        for info in zf.infolist():
            h = info.header_offset
            n, m = struct.unpack_from("<HH", raw, h + 26)
            data = h + 30 + n + m
            offsets += [h, h + 1, h + 14, h + 30, data, data + 1, data + info.compress_size - 1]
    pos = raw.find(b"PK\x01\x02")
    while pos != -1:
        offsets += [pos, pos + 20, pos + 46]
        pos = raw.find(b"PK\x01\x02", pos + 1)
    return sorted({o for o in offsets if 0 <= o < len(raw)})


def _json_paths(value: Any, prefix: tuple = ()) -> list[tuple]:
    paths = [prefix] if prefix else []
    if isinstance(value, dict):
        for k, v in value.items():
            paths += _json_paths(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value[:3]):
            paths += _json_paths(v, (*prefix, i))
    return paths


WRONG_VALUES: list[Any] = [
    None,
    "x",
    -1,
    0,
    1.5,
    True,
    [],
    {},
    10**30,
    [1, 2, 3],
    {"$type": "ndarray", "dtype": "<f8", "shape": [10**12], "data": []},
    {"$type": "ndarray", "dtype": "|O", "shape": [1], "data": [[1]]},
    {"$type": "scalar", "dtype": "<U999999999", "value": "a"},
    {"$type": "dict", "items": [[[1], 2]]},
    {"$type": "float", "value": "x"},
    "A" * 1000,
]


def _json_edits(
    members: list[tuple[str, bytes]], rng: np.random.Generator, n: int, sign: bool
) -> list[tuple[str, bytes]]:
    doc = json.loads(dict(members)[JSON_MEMBER])
    paths = _json_paths(doc)
    out = []
    for j in rng.permutation(len(paths))[:n]:
        path = paths[j]
        value = WRONG_VALUES[int(rng.integers(len(WRONG_VALUES)))]
        edited = edit_doc(members, set_path(list(path), value), sign=sign)
        out.append((f"json {path}={value!r:.40}", zip_bytes(edited)))
    return out


def _weights_flips(
    members: list[tuple[str, bytes]], rng: np.random.Generator, n: int, sign: bool
) -> list[tuple[str, bytes]]:
    """Bytes of the safetensors member changed (mostly in its JSON header)."""
    weights = dict(members)[WEIGHTS_MEMBER]
    header = 8 + struct.unpack_from("<Q", weights)[0]
    out = []
    for _ in range(n):
        b = bytearray(weights)
        pos = int(rng.integers(0, header if rng.random() < 0.8 else len(b)))
        b[pos] ^= int(rng.integers(1, 256))
        edited = [(name, bytes(b) if name == WEIGHTS_MEMBER else d) for name, d in members]
        out.append((f"weights {pos}", zip_bytes(resign(edited) if sign else edited)))
    return out


def _mutations(raw: bytes, rng: np.random.Generator) -> list[tuple[str, bytes]]:
    """Damage and edits as they come: nothing recomputes the checksums."""
    out: list[tuple[str, bytes]] = []
    members = read_members_bytes(raw)
    for _ in range(600):  # random byte flips
        b = bytearray(raw)
        for pos in rng.integers(0, len(raw), size=rng.integers(1, 4)):
            b[pos] ^= int(rng.integers(1, 256))
        out.append((f"flip {pos}", bytes(b)))
    structural = _structure_offsets(raw)  # truncations at every kind of offset
    picked = rng.choice(structural, size=min(250, len(structural)), replace=False).tolist()
    for off in [*picked, *rng.integers(0, len(raw), size=60).tolist()]:
        out.append((f"truncate {off}", raw[:off]))
    for i in range(len(members)):  # removed / duplicated members
        out.append((f"remove {i}", zip_bytes(members[:i] + members[i + 1 :])))
        out.append((f"duplicate {i}", zip_bytes([*members, members[i]])))
    out += _json_edits(members, rng, 260, sign=False)
    out += _weights_flips(members, rng, 150, sign=False)
    starts = [m.start() for m in re.finditer(b"PK\x01\x02|PK\x03\x04", raw)]
    for s in rng.choice(starts, size=60).tolist():  # huge declared sizes
        b = bytearray(raw)
        field = 20 if raw[s : s + 4] == b"PK\x01\x02" else 18
        value = int(rng.choice([0xFFFFFFFF, 2**31, len(raw) + 1, 0]))
        struct.pack_into("<I", b, s + field + 4 * int(rng.integers(2)), value)
        out.append((f"size {s}={value}", bytes(b)))
    return out


def test_fuzzed_files_are_refused_or_load_identically(
    saved: Path, X: pd.DataFrame, tmp_path: Path
) -> None:
    raw = saved.read_bytes()
    reference = load(saved)
    expected = reference.predict_proba(X), reference.predict(X)
    mutations = _mutations(raw, np.random.default_rng(12345))
    assert len(mutations) >= 1000
    path = tmp_path / "fuzz.tabsparse"
    outcomes = {"rejected": 0, "loaded": 0}
    escaped, changed = [], []
    for label, data in mutations:
        path.write_bytes(data)
        try:
            model = load(path)
        except ModelFileError as exc:
            assert str(path) in str(exc)
            outcomes["rejected"] += 1
        except BaseException as exc:  # anything else is a bug
            escaped.append(f"{label}: {type(exc).__name__}: {exc}")
        else:
            outcomes["loaded"] += 1
            proba, labels = model.predict_proba(X), model.predict(X)
            if not (np.array_equal(proba, expected[0]) and np.array_equal(labels, expected[1])):
                changed.append(label)
    assert not escaped, "\n".join(escaped[:20])
    assert not changed, (
        f"{len(changed)} mutated files loaded with other predictions: {changed[:20]}"
    )
    assert outcomes["rejected"] > 0.9 * len(mutations)


def test_consistent_hostile_files_raise_model_file_error_or_load(
    saved: Path, tmp_path: Path
) -> None:
    """Edits with the checksums recomputed reach every check behind the integrity check."""
    members = read_members_bytes(saved.read_bytes())
    rng = np.random.default_rng(54321)
    mutations = _json_edits(members, rng, 300, sign=True)
    mutations += _weights_flips(members, rng, 150, sign=True)
    path = tmp_path / "fuzz.tabsparse"
    escaped = []
    rejected = 0
    for label, data in mutations:
        path.write_bytes(data)
        try:
            load(path)
        except ModelFileError as exc:
            assert str(path) in str(exc)
            rejected += 1
        except BaseException as exc:  # anything else is a bug
            escaped.append(f"{label}: {type(exc).__name__}: {exc}")
    assert not escaped, "\n".join(escaped[:20])
    assert rejected > 0.5 * len(mutations)


# ---- typed JSON values ---------------------------------------------------------------------------

scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False)
    | st.text(max_size=5)
)
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.tuples(inner, inner)
        | st.dictionaries(st.text(max_size=3) | st.integers(), inner, max_size=3)
    ),
    max_leaves=10,
)


@settings(max_examples=60, deadline=None)
@given(values)
def test_value_codec_round_trips(value: Any) -> None:
    text = json.dumps(encode_value(value), allow_nan=False)
    assert decode_value(json.loads(text)) == value


@pytest.mark.parametrize(
    "array",
    [
        np.array([1.5, np.nan, -np.inf, np.inf], dtype=np.float16),
        np.arange(6, dtype=np.uint8).reshape(2, 3),
        np.array([[True, False]]),
        np.array(["", "a", "bcd"]),
        np.array([None, 1, 2.5, "x", True, np.int16(3)], dtype=object),
        np.zeros((0, 3), dtype=np.int64),
        np.array(7.0),
    ],
)
def test_array_codec_round_trips(array: np.ndarray) -> None:
    back = decode_value(json.loads(json.dumps(encode_value(array), allow_nan=False)))
    assert back.dtype == array.dtype and back.shape == array.shape
    assert [type(x) for x in back.ravel()] == [type(x) for x in array.ravel()]
    np.testing.assert_array_equal(back, array)
