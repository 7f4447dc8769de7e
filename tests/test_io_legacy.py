"""Model files of format_version 1 (``.npy`` members, only the tensors checksummed), as written by
tabsparse before the safetensors format: tests/data/model_v1.tabsparse was written by that code
(commit cb216da) together with its predictions. They load, with a warning that says how to
re-save them; damaged or hostile ones are refused as before."""

from __future__ import annotations

import hashlib
import io
import json
import pickle
import warnings
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from model_file_helpers import assert_rejected, read_members, write_members

from tabsparse import load, save
from tabsparse.io import CHECKSUM_MEMBER, JSON_MEMBER, WEIGHTS_MEMBER

DATA = Path(__file__).parent / "data"
V1 = DATA / "model_v1.tabsparse"


@pytest.fixture(scope="module")
def expected() -> dict[str, Any]:
    return json.loads((DATA / "model_v1_expected.json").read_text())


def frame(expected: dict[str, Any]) -> pd.DataFrame:
    X = expected["X"]
    return pd.DataFrame({"num": X["num"], "color": pd.Categorical(X["color"])})


def test_version_1_file_loads_with_the_same_predictions(expected: dict[str, Any]) -> None:
    """The same predictions as the code that wrote it, to float32 rounding (the network code
    changes; the weights are bit for bit those of the file)."""
    with pytest.warns(UserWarning, match=r"format_version 1 .*tabsparse\.save\(tabsparse\.load"):
        model = load(V1)
    X = frame(expected)
    proba = np.array(expected["predict_proba"])
    np.testing.assert_allclose(model.predict_proba(X), proba, rtol=1e-5, atol=1e-7)
    np.testing.assert_array_equal(model.predict(X), np.array(expected["predict"]))


def test_version_1_file_resaves_in_the_current_format(
    expected: dict[str, Any], tmp_path: Path
) -> None:
    with pytest.warns(UserWarning):
        model = load(V1)
    path = tmp_path / "m.tabsparse"
    save(model, path)
    with zipfile.ZipFile(path) as zf:
        assert zf.namelist() == [JSON_MEMBER, WEIGHTS_MEMBER, CHECKSUM_MEMBER]
        assert json.loads(zf.read(JSON_MEMBER))["format_version"] == 2
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        again = load(path)
    X = frame(expected)
    np.testing.assert_array_equal(again.predict_proba(X), model.predict_proba(X))


# ---- damaged and hostile version-1 files ---------------------------------------------------------


def edit_v1(members: list[tuple[str, bytes]], edit: Callable[[dict], Any]) -> list:
    out = []
    for name, data in members:
        if name == JSON_MEMBER:
            doc = json.loads(data)
            edit(doc)
            data = json.dumps(doc).encode()
        out.append((name, data))
    return out


def _entry(doc: dict, name: str) -> dict:
    return next(e for e in doc["tensors"] if e["name"] == name)


def npy_bytes(arr: np.ndarray, allow_pickle: bool = False) -> bytes:
    buf = io.BytesIO()
    np.save(buf, arr, allow_pickle=allow_pickle)
    return buf.getvalue()


def replace_tensor(
    members: list[tuple[str, bytes]], tensor: str, data: bytes, **index_fields: Any
) -> list[tuple[str, bytes]]:
    """Put ``data`` in the file of ``tensor`` and fix its sha256 (and other index fields)."""
    doc = json.loads(dict(members)[JSON_MEMBER])
    entry = _entry(doc, tensor)
    file = entry["file"]
    assert sum(e["file"] == file for e in doc["tensors"]) == 1
    entry["sha256"] = hashlib.sha256(data).hexdigest()
    entry.update(index_fields)
    out = []
    for name, blob in members:
        if name == JSON_MEMBER:
            blob = json.dumps(doc).encode()
        elif name == file:
            blob = data
        out.append((name, blob))
    return out


SHARED = "encoder.initial.shared.layers.0.fc.weight"  # tied to encoder.shared.0.weight
CASES: dict[str, tuple[Callable[[dict], Any], str]] = {
    "checksum": (lambda d: _entry(d, "head.bias").update(sha256="0" * 64), "checksum mismatch"),
    "index shape": (
        lambda d: _entry(d, "head.bias").update(shape=[3]),
        "disagrees with the index",
    ),
    "huge index shape": (lambda d: _entry(d, "head.bias").update(shape=[2**40, 2**40]), "shape"),
    "index dtype": (lambda d: _entry(d, "head.bias").update(dtype="|O"), "unsupported dtype '|O'"),
    "index file": (lambda d: _entry(d, "head.bias").update(file="../x.npy"), "bad file name"),
    "extra tensor": (
        lambda d: d["tensors"].append({**_entry(d, "head.bias"), "name": "evil"}),
        "unexpected tensors: ['evil']",
    ),
    "missing tensor": (
        lambda d: d.update(tensors=[e for e in d["tensors"] if e["name"] != SHARED]),
        f"tensors missing from the file: [{SHARED!r}]",
    ),
    "renamed tensor": (lambda d: d["tensors"][0].update(name="__class__"), "unexpected tensors"),
    "index not a list": (lambda d: d.update(tensors={}), "'tensors' must be a JSON list"),
    "missing index": (lambda d: d.pop("tensors"), "missing keys ['tensors']"),
    "unknown class": (lambda d: d.update(estimator="os.system"), "unknown estimator class"),
    "huge params": (
        lambda d: d["params"].update(n_d=10**9),
        "the architecture implies a network of about",
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_bad_version_1_files_are_rejected(case: str, tmp_path: Path) -> None:
    edit, fragment = CASES[case]
    path = tmp_path / "bad.tabsparse"
    write_members(path, edit_v1(read_members(V1), edit))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert_rejected(path, fragment)


def test_extra_and_missing_members_of_version_1_files(tmp_path: Path) -> None:
    members = read_members(V1)
    path = tmp_path / "bad.tabsparse"
    write_members(path, [*members, ("payload.pkl", b"\x80\x04K\x01.")])
    assert_rejected(path, "unexpected member")
    write_members(path, members[:-1])
    assert_rejected(path, "missing member")


def test_npy_with_wrong_dtype_or_trailing_bytes(tmp_path: Path) -> None:
    path = tmp_path / "bad.tabsparse"
    members = read_members(V1)
    write_members(path, replace_tensor(members, "head.bias", npy_bytes(np.zeros(2))))
    assert_rejected(path, "(<f8, [2]) disagrees with the index")
    write_members(path, replace_tensor(members, "head.bias", npy_bytes(np.zeros(2)), dtype="<f8"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert_rejected(
            path,
            "tensor 'head.bias' is torch.float64 [2], but the architecture implies torch.float32",
        )
    data = npy_bytes(np.zeros(2, dtype=np.float32)) + b"\x00" * 4
    write_members(path, replace_tensor(members, "head.bias", data))
    assert_rejected(path, "size its header declares")
    write_members(path, replace_tensor(members, "head.bias", b"\x00" * 90))
    assert_rejected(path, "not an .npy file")


def _touch(path: str) -> None:
    Path(path).write_text("the payload ran")


class Payload:
    """Unpickling this calls ``_touch(path)``: the marker file proves code ran."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self) -> tuple[Any, ...]:
        return (_touch, (self.path,))


def test_object_npy_payload_never_runs(tmp_path: Path) -> None:
    marker = tmp_path / "MARKER"
    pickle.loads(pickle.dumps(Payload(str(marker))))  # the payload is live...
    assert marker.exists()
    marker.unlink()
    obj = np.array([Payload(str(marker))], dtype=object)
    data = npy_bytes(obj, allow_pickle=True)
    path = tmp_path / "evil.tabsparse"
    members = read_members(V1)
    write_members(path, replace_tensor(members, "head.bias", data))
    assert_rejected(path, "object dtype")
    write_members(path, replace_tensor(members, "head.bias", data, dtype="|O", shape=[1]))
    assert_rejected(path, "unsupported dtype '|O'")
    assert not marker.exists()  # ...and loading never ran it
