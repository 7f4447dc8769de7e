"""Model files that must be refused: every kind of damaged, edited, foreign or malicious file
raises ModelFileError naming the problem, and no code in a file ever runs."""

from __future__ import annotations

import json
import pickle
import struct
import zipfile
from pathlib import Path
from typing import Any

import joblib
import numpy as np
import pandas as pd
import pytest
import torch
from model_file_helpers import (
    assert_rejected,
    edit_doc,
    edit_weights,
    fit_models,
    make_frame,
    read_members,
    resign,
    set_path,
    write_members,
)

from tabsparse import load, save
from tabsparse.io import CHECKSUM_MEMBER, JSON_MEMBER, WEIGHTS_MEMBER, ModelFileError

N = 100


@pytest.fixture(scope="module")
def X() -> pd.DataFrame:
    return make_frame()


@pytest.fixture(scope="module")
def models(X: pd.DataFrame) -> dict[str, Any]:
    """One fit per kind of model, shared by the whole module."""
    return fit_models(X)


@pytest.fixture(scope="module")
def saved(models: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The binary classifier's file: the base of the hostile-file tests."""
    path = tmp_path_factory.mktemp("saved") / "model.tabsparse"
    save(models["binary_str"], path)
    return path


# ---- rejected files ------------------------------------------------------------------------------


def test_model_file_error_is_a_value_error_and_pickles() -> None:
    err = ModelFileError("/x/m.tabsparse", "bad")
    assert isinstance(err, ValueError)
    again = pickle.loads(pickle.dumps(err))
    assert str(again) == str(err) and again.path == "/x/m.tabsparse"


def _replace(name: str, data: bytes) -> Any:
    return lambda m: resign([(n, data if n == name else d) for n, d in m])


CASES: dict[str, tuple[Any, str]] = {
    "wrong format": (lambda m: edit_doc(m, set_path(["format"], "other")), "wrong format name"),
    "newer version": (
        lambda m: edit_doc(m, set_path(["format_version"], 3)),
        "unsupported format_version 3",
    ),
    "version type": (lambda m: edit_doc(m, set_path(["format_version"], "2")), "format_version"),
    "unknown class": (
        lambda m: edit_doc(m, set_path(["estimator"], "os.system")),
        "unknown estimator class 'os.system'",
    ),
    "pipeline class": (
        lambda m: edit_doc(m, set_path(["estimator"], "Pipeline")),
        "unknown estimator class",
    ),
    "missing key": (lambda m: edit_doc(m, lambda d: d.pop("encoder")), "missing keys ['encoder']"),
    "missing tied": (lambda m: edit_doc(m, lambda d: d.pop("tied")), "missing keys ['tied']"),
    "extra key": (
        lambda m: edit_doc(m, set_path(["code"], "print(1)")),
        "unexpected keys ['code']",
    ),
    "bad json": (_replace(JSON_MEMBER, b"{not json"), "JSON"),
    "not utf8": (_replace(JSON_MEMBER, b"\xff\xfe"), "UTF-8"),
    "json not object": (_replace(JSON_MEMBER, b"[]"), "object"),
    "nan constant": (
        lambda m: resign(
            [
                (n, d.replace(b'"gamma":', b'"gamma":NaN,"x":') if n == JSON_MEMBER else d)
                for n, d in m
            ]
        ),
        "NaN",
    ),
    "missing json": (lambda m: m[1:], "missing member 'tabsparse.json'"),
    "missing checksums": (lambda m: m[:-1], "missing member 'SHA256SUMS'"),
    "missing weights": (lambda m: resign(m[:1]), "missing member 'weights.safetensors'"),
    "unlisted member": (
        lambda m: [*m, ("payload.pkl", b"\x80\x04K\x01.")],
        "unexpected member",
    ),
    "listed extra member": (
        lambda m: resign([*m, ("payload.pkl", b"\x80\x04K\x01.")]),
        "unexpected member",
    ),
    "path trick": (lambda m: [*m, ("../../evil.npy", b"x")], "unexpected member"),
    "duplicated member": (lambda m: [*m, m[1]], "duplicated"),
    "checksum": (
        lambda m: edit_doc(m, set_path(["params", "tol"], 0.5), sign=False),
        "checksum mismatch",
    ),
    "checksum listing": (
        lambda m: [*m[:-1], (CHECKSUM_MEMBER, m[-1][1].replace(b"  ", b" "))],
        "malformed",
    ),
    "not safetensors": (_replace("weights.safetensors", b"\x00" * 64), "not a valid safetensors"),
    "weight shape": (
        lambda m: edit_weights(m, lambda t: t.update({"head.bias": torch.zeros(3)})),
        # the binary classifier's head: 4 members (n_members="auto") x 2 outputs
        "tensor 'head.bias' is torch.float32 [3], but the architecture implies torch.float32 [8]",
    ),
    "weight dtype": (
        lambda m: edit_weights(m, lambda t: t.update({"head.bias": t["head.bias"].double()})),
        "tensor 'head.bias' is torch.float64 [8], but the architecture implies torch.float32 [8]",
    ),
    "complex weight": (
        lambda m: edit_weights(m, lambda t: t.update({"head.bias": torch.zeros(2) * 1j})),
        "unsupported dtype",
    ),
    "extra tensor": (
        lambda m: edit_weights(m, lambda t: t.update({"evil": torch.zeros(2)})),
        "unexpected tensors: ['evil']",
    ),
    "missing tensor": (
        lambda m: edit_weights(m, lambda t: t.pop("head.bias")),
        "tensors missing from the file: ['head.bias']",
    ),
    "tied to nothing": (
        lambda m: edit_doc(m, lambda d: d["tied"].update({"x": "nowhere"})),
        "'tied' names 'x' -> 'nowhere'",
    ),
    "tied not a map": (lambda m: edit_doc(m, set_path(["tied"], [])), "'tied' must map"),
    "shape vs architecture": (
        lambda m: edit_doc(m, set_path(["attributes", "architecture_", "n_d"], 5)),
        "but the architecture implies",
    ),
    "huge architecture": (
        lambda m: edit_doc(m, set_path(["attributes", "architecture_", "n_d"], 10**9)),
        "the architecture implies a network of about",
    ),
    "many steps": (
        lambda m: edit_doc(m, set_path(["attributes", "architecture_", "n_steps"], 10**7)),
        "the architecture implies a network of at least 10000000 blocks (n_steps=10000000)",
    ),
    "many members": (
        lambda m: edit_doc(
            m,
            lambda d: (
                d["attributes"]["architecture_"].update(n_members=10**7)
                or d["attributes"].update(n_members_=10**7)
            ),
        ),
        "at least 10000000 blocks (n_members=10000000)",
    ),
    "architecture not a dict": (
        lambda m: edit_doc(m, set_path(["attributes", "architecture_"], [1, 2])),
        "architecture_ must be a dict, got list",
    ),
    "architecture entry missing": (
        lambda m: edit_doc(m, lambda d: d["attributes"]["architecture_"].pop("gamma")),
        "architecture_ has missing entries ['gamma'] / unexpected []",
    ),
    "architecture entry unknown": (
        lambda m: edit_doc(m, set_path(["attributes", "architecture_", "evil"], 1)),
        "architecture_ has missing entries [] / unexpected ['evil']",
    ),
    "architecture entry of the wrong kind": (
        lambda m: edit_doc(m, set_path(["attributes", "architecture_", "mask_type"], "softmax")),
        "architecture_['mask_type']='softmax' must be 'sparsemax' or 'entmax'",
    ),
    "architecture bool for an integer": (
        lambda m: edit_doc(m, set_path(["attributes", "architecture_", "n_steps"], True)),
        "architecture_['n_steps']=True must be an integer >= 1",
    ),
    "architecture groups outside the columns": (
        lambda m: edit_doc(
            m, set_path(["attributes", "architecture_", "grouped_features"], [[0, 9]])
        ),
        "architecture_['grouped_features'] names a feature outside 0 .. 4",
    ),
    "architecture against the resolved attributes": (
        lambda m: edit_doc(m, set_path(["attributes", "architecture_", "n_members"], 2)),
        "n_members_=4 disagrees with architecture_['n_members']=2",
    ),
    "background not rows": (
        lambda m: edit_doc(m, set_path(["attributes", "background_"], "rows")),
        "background_ must be a dict of 'numeric' and 'codes' arrays",
    ),
    "background without codes": (
        lambda m: edit_doc(m, lambda d: d["attributes"]["background_"].pop("codes")),
        "background_ must be a dict of 'numeric' and 'codes' arrays",
    ),
    "bad param": (lambda m: edit_doc(m, set_path(["params", "n_d"], -3)), "invalid parameters"),
    "unknown param": (lambda m: edit_doc(m, set_path(["params", "evil"], 1)), "unknown parameter"),
    "bad encoder": (
        lambda m: edit_doc(m, set_path(["encoder", "n_features"], "4")),
        "bad encoder state",
    ),
    "bad classes": (
        lambda m: edit_doc(m, set_path(["attributes", "classes_"], "yes")),
        "inconsistent fitted attributes",
    ),
    "missing attribute": (
        lambda m: edit_doc(m, lambda d: d["attributes"].pop("history_")),
        "missing ['history_']",
    ),
    "unknown marker": (
        lambda m: edit_doc(m, set_path(["attributes", "n_iter_"], {"$type": "callable", "x": 1})),
        "unknown value type 'callable'",
    ),
    "bad device": (lambda m: edit_doc(m, set_path(["device"], "mps")), "bad device"),
    "compressed": (lambda m: ("deflate", m), "compressed"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_bad_files_are_rejected(case: str, saved: Path, tmp_path: Path) -> None:
    mutate, fragment = CASES[case]
    result = mutate(read_members(saved))
    path = tmp_path / "bad.tabsparse"
    if isinstance(result, tuple):
        write_members(path, result[1], compression=zipfile.ZIP_DEFLATED)
    else:
        write_members(path, result)
    assert_rejected(path, fragment)


def test_tied_tensors_stored_apart_must_agree(saved: Path, tmp_path: Path) -> None:
    """A tied name stored as its own tensor loads only if it equals the tensor it is tied to."""
    name = "encoder.steps.0.shared.layers.0.fc.weight"
    members = read_members(saved)
    target = json.loads(dict(members)[JSON_MEMBER])["tied"][name]

    def untie(doc: dict) -> None:
        del doc["tied"][name]

    path = tmp_path / "untied.tabsparse"
    same = edit_weights(edit_doc(members, untie), lambda t: t.update({name: t[target].clone()}))
    write_members(path, same)
    np.testing.assert_array_equal(
        load(path).predict_proba(make_frame()), load(saved).predict_proba(make_frame())
    )
    differs = edit_weights(edit_doc(members, untie), lambda t: t.update({name: t[target] + 1.0}))
    write_members(path, differs)
    assert_rejected(path, f"tensor {name!r} is tied to another tensor", "differs in the file")


@pytest.mark.parametrize(
    "content, fragment",
    [
        (b"", "not a zip archive"),
        (b"hello world", "not a zip archive"),
        (b"PK\x03\x04" + b"\x00" * 40, "not a zip archive"),
        (b"\x93NUMPY\x01\x00v\x00{'descr': '<f8'}", "bare .npy"),
    ],
)
def test_foreign_bytes_are_rejected(content: bytes, fragment: str, tmp_path: Path) -> None:
    path = tmp_path / "foreign.bin"
    path.write_bytes(content)
    assert_rejected(path, fragment)


def test_declared_sizes_beyond_the_file_are_rejected(saved: Path, tmp_path: Path) -> None:
    raw = bytearray(saved.read_bytes())
    start = raw.rfind(b"PK\x01\x02")  # central directory entry of the last member
    for value in (0xFFFFFFFE, 10**6):
        bad = bytearray(raw)
        struct.pack_into("<II", bad, start + 20, value, value)  # compressed, uncompressed size
        path = tmp_path / "big.tabsparse"
        path.write_bytes(bytes(bad))
        assert_rejected(path, "more than it holds")


# ---- malicious files -----------------------------------------------------------------------------


def _touch(path: str) -> None:
    Path(path).write_text("the payload ran")


class Payload:
    """Unpickling this calls ``_touch(path)``: the marker file proves code ran."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self) -> tuple[Any, ...]:
        return (_touch, (self.path,))


@pytest.fixture
def marker(tmp_path: Path) -> Path:
    path = tmp_path / "MARKER"
    pickle.loads(pickle.dumps(Payload(str(path))))  # the payload is live...
    assert path.exists()
    path.unlink()  # ...and the tests below check that loading never runs it
    return path


@pytest.mark.parametrize("name", ["payload.pkl", "model.pt", "tensors/0.npy/../../x.pkl"])
def test_pickle_member_never_runs(name: str, marker: Path, saved: Path, tmp_path: Path) -> None:
    path = tmp_path / "evil.tabsparse"
    payload = pickle.dumps(Payload(str(marker)))
    write_members(path, [*read_members(saved), (name, payload)])
    assert_rejected(path, "unexpected member")
    write_members(path, resign([*read_members(saved), (name, payload)]))
    assert_rejected(path, "unexpected member")
    assert not marker.exists()


def test_pickled_weights_never_run(marker: Path, saved: Path, tmp_path: Path) -> None:
    """A pickle (or torch.save file) in place of the safetensors member is refused."""
    path = tmp_path / "evil.tabsparse"
    payload = pickle.dumps({"head.bias": Payload(str(marker))})
    write_members(path, _replace(WEIGHTS_MEMBER, payload)(read_members(saved)))
    assert_rejected(path, "not a valid safetensors file")
    assert not marker.exists()


def test_pickle_joblib_and_torch_files_are_rejected(
    marker: Path, models: dict[str, Any], tmp_path: Path
) -> None:
    plain = tmp_path / "model.pkl"
    plain.write_bytes(pickle.dumps(models["binary_str"]))
    assert_rejected(plain, "pickle")
    evil = tmp_path / "evil.pkl"
    evil.write_bytes(pickle.dumps(Payload(str(marker)), protocol=0))
    assert_rejected(evil, "pickle")
    jl = tmp_path / "model.joblib"
    joblib.dump(models["binary_str"], jl)
    assert_rejected(jl, "not a zip archive")
    pt = tmp_path / "model.pt"
    torch.save({"net": models["binary_str"].network_.state_dict(), "x": Payload(str(marker))}, pt)
    assert_rejected(pt, "torch.save")
    assert not marker.exists()
