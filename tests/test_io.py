"""tabsparse.io: safe model files (save / load round trips, atomicity, hostile files)."""

from __future__ import annotations

import copy
import io
import json
import os
import pickle
import re
import struct
import warnings
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import joblib
import numpy as np
import pandas as pd
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.exceptions import NotFittedError

import tabsparse.io
from tabsparse import TabNetClassifier, TabNetPretrainer, TabNetRegressor
from tabsparse.io import (
    JSON_MEMBER,
    ModelFileError,
    _decode,
    _encode,
    _network_size_estimate,
    load,
    save,
)
from tabsparse.training import Callback

TINY: dict[str, Any] = {
    "max_epochs": 2,
    "n_d": 4,
    "n_a": 4,
    "n_steps": 2,
    "random_state": 0,
    "device": "cpu",
}
N = 100


def make_frame(n: int = N, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "num": rng.normal(size=n),
            "num_nan": np.where(rng.random(n) < 0.2, np.nan, rng.normal(size=n)),
            "count": rng.integers(0, 5, size=n),
            "color": pd.Categorical(rng.choice(["red", "green", "blue"], size=n)),
            "city": rng.choice(["a", "b", None], size=n).astype(object),
        }
    )


@pytest.fixture(scope="module")
def X() -> pd.DataFrame:
    return make_frame()


@pytest.fixture(scope="module")
def models(X: pd.DataFrame) -> dict[str, Any]:
    """One fit per kind of model, shared by the whole module."""
    rng = np.random.default_rng(1)
    y_str = np.where(X["num"] + rng.normal(scale=0.5, size=N) > 0, "yes", "no")
    y_int = rng.integers(0, 3, size=N)
    y_reg = X["num"].to_numpy() * 2.0 + rng.normal(size=N)
    y_reg2 = np.column_stack([y_reg, -y_reg + 1.0])
    return {
        "binary_str": TabNetClassifier(**TINY).fit(X, y_str),
        "multiclass_int": TabNetClassifier(
            **TINY, grouped_features=[["num", "num_nan"]], cat_emb_dim=2
        ).fit(X, y_int),
        "regressor_1d": TabNetRegressor(**TINY).fit(X, y_reg),
        "regressor_2d": TabNetRegressor(**TINY, categorical_features=["color", "city"]).fit(
            X, y_reg2
        ),
        "array_input": TabNetClassifier(**TINY).fit(X[["num", "num_nan"]].to_numpy(), y_int),
    }


@pytest.fixture(scope="module")
def saved(models: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The binary classifier's file: the base of the hostile-file tests."""
    path = tmp_path_factory.mktemp("saved") / "model.tabsparse"
    save(models["binary_str"], path)
    return path


# ---- helpers -------------------------------------------------------------------------------------


def read_members(path: Path) -> list[tuple[str, bytes]]:
    with zipfile.ZipFile(path) as zf:
        return [(info.filename, zf.read(info)) for info in zf.infolist()]


def write_members(
    path: Path, members: list[tuple[str, bytes]], compression: int = zipfile.ZIP_STORED
) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # duplicated names are wanted in some tests
        with zipfile.ZipFile(path, "w", compression=compression) as zf:
            for name, data in members:
                zf.writestr(name, data)


def edit_doc(members: list[tuple[str, bytes]], edit: Callable[[dict], Any]) -> list:
    out = []
    for name, data in members:
        if name == JSON_MEMBER:
            doc = json.loads(data)
            edit(doc)
            data = json.dumps(doc).encode()
        out.append((name, data))
    return out


def npy_bytes(arr: np.ndarray, allow_pickle: bool = False) -> bytes:
    buf = io.BytesIO()
    np.save(buf, arr, allow_pickle=allow_pickle)
    return buf.getvalue()


def replace_tensor(
    members: list[tuple[str, bytes]], tensor: str, data: bytes, **index_fields: Any
) -> list[tuple[str, bytes]]:
    """Put ``data`` in the file of ``tensor`` and fix its sha256 (and other index fields)."""
    import hashlib

    doc = json.loads(dict(members)[JSON_MEMBER])
    entry = next(e for e in doc["tensors"] if e["name"] == tensor)
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


def assert_rejected(path: Path, *fragments: str) -> ModelFileError:
    with pytest.raises(ModelFileError) as info:
        load(path)
    message = str(info.value)
    assert str(path) in message
    for fragment in fragments:
        assert fragment in message, message
    return info.value


def assert_same_model(a: Any, b: Any, X: Any) -> None:
    assert type(a) is type(b)
    assert b.get_params() == a.get_params()
    skip = {"network_", "encoder_", "device_"}
    assert set(vars(a)) == set(vars(b))
    for name, value in vars(a).items():
        if name in skip:
            continue
        other = getattr(b, name)
        assert type(other) is type(value), name
        if isinstance(value, np.ndarray):
            assert other.dtype == value.dtype, name
            np.testing.assert_array_equal(other, value, err_msg=name)
        else:
            assert other == value, name
    assert b.encoder_.to_dict() == a.encoder_.to_dict()
    assert b.device_ == a.device_
    sa, sb = a.network_.state_dict(), b.network_.state_dict()
    assert list(sa) == list(sb)
    for key in sa:
        assert torch.equal(sa[key], sb[key]), key
    assert b.network_.training == a.network_.training
    np.testing.assert_array_equal(b.predict(X), a.predict(X))
    if hasattr(a, "predict_proba"):
        np.testing.assert_array_equal(b.predict_proba(X), a.predict_proba(X))
        np.testing.assert_array_equal(b.predict_log_proba(X), a.predict_log_proba(X))
    ea, eb = a.explain(X), b.explain(X)
    np.testing.assert_array_equal(eb.importances, ea.importances)
    np.testing.assert_array_equal(eb.masks, ea.masks)
    assert eb.feature_names == ea.feature_names


# ---- round trips ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kind", ["binary_str", "multiclass_int", "regressor_1d", "regressor_2d", "array_input"]
)
def test_round_trip_is_identical(
    kind: str, models: dict[str, Any], X: pd.DataFrame, tmp_path: Path
) -> None:
    model = models[kind]
    path = tmp_path / "m.tabsparse"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # every attribute is known: nothing to warn about
        save(model, path)
    loaded = load(path)
    data = X if kind != "array_input" else X[["num", "num_nan"]].to_numpy()
    assert_same_model(model, loaded, data)
    if kind.startswith("regressor"):
        assert loaded.predict(data).ndim == (1 if kind == "regressor_1d" else 2)


def test_round_trip_keeps_categories_and_unseen_values(
    models: dict[str, Any], X: pd.DataFrame, tmp_path: Path
) -> None:
    model = models["binary_str"]
    save(model, tmp_path / "m.tabsparse")
    loaded = load(tmp_path / "m.tabsparse")
    assert loaded.encoder_.kinds == model.encoder_.kinds
    assert loaded.encoder_.categories == model.encoder_.categories
    new = X.head(5).copy()
    new["city"] = ["zzz", None, "a", "b", "unseen"]
    np.testing.assert_array_equal(loaded.predict_proba(new), model.predict_proba(new))


@pytest.mark.parametrize(
    "labels",
    [
        np.array(["cat", "dog", "emu"]),
        np.array([3, 7, 11], dtype=np.int32),
        np.array([-1.0, 0.0, 2.0]),
        np.array([False, True, True]),
        np.array(["x", "yy", "zzz"], dtype=object),
    ],
    ids=["str", "int32", "float", "bool", "object"],
)
def test_class_labels_keep_their_dtype(labels: np.ndarray, X: pd.DataFrame, tmp_path: Path) -> None:
    y = labels[np.arange(N) % len(labels)]
    model = TabNetClassifier(**{**TINY, "max_epochs": 1}).fit(X, y)
    save(model, tmp_path / "m.tabsparse")
    loaded = load(tmp_path / "m.tabsparse")
    assert loaded.classes_.dtype == model.classes_.dtype
    np.testing.assert_array_equal(loaded.classes_, model.classes_)
    pred = loaded.predict(X)
    assert pred.dtype == model.predict(X).dtype
    np.testing.assert_array_equal(pred, model.predict(X))


def test_parameters_round_trip_and_non_json_ones_become_defaults(
    models: dict[str, Any], X: pd.DataFrame, tmp_path: Path
) -> None:
    model = copy.deepcopy(models["binary_str"])
    model.set_params(
        callbacks=[Callback()],
        random_state=np.random.RandomState(0),
        class_weight={"no": 1.0, "yes": np.float64(2.5)},
        early_stopping=True,
        tol=np.float32(0.5),
    )
    path = tmp_path / "m.tabsparse"
    save(model, path)
    with zipfile.ZipFile(path) as zf:
        doc = json.loads(zf.read(JSON_MEMBER))
    assert doc["params"]["callbacks"] is None and doc["params"]["random_state"] is None
    assert set(doc["param_notes"]) == {"callbacks", "random_state"}
    loaded = load(path)
    params = loaded.get_params()
    assert params["callbacks"] is None and params["random_state"] is None
    assert params["class_weight"] == {"no": 1.0, "yes": 2.5}
    assert type(params["class_weight"]["yes"]) is np.float64
    assert type(params["tol"]) is np.float32 and params["early_stopping"] is True
    np.testing.assert_array_equal(loaded.predict_proba(X), model.predict_proba(X))


def test_int_keyed_class_weight_round_trips(models: dict[str, Any], tmp_path: Path) -> None:
    model = copy.deepcopy(models["multiclass_int"]).set_params(class_weight={0: 1.0, 2: 3.0})
    save(model, tmp_path / "m.tabsparse")
    assert load(tmp_path / "m.tabsparse").class_weight == {0: 1.0, 2: 3.0}


def test_nonfinite_values_round_trip(models: dict[str, Any], tmp_path: Path) -> None:
    model = copy.deepcopy(models["regressor_1d"])
    model.history_[0]["val_score"] = float("nan")
    model.history_[1]["val_score"] = float("-inf")
    save(model, tmp_path / "m.tabsparse")
    with zipfile.ZipFile(tmp_path / "m.tabsparse") as zf:
        json.loads(zf.read(JSON_MEMBER), parse_constant=pytest.fail)  # standard JSON only
    history = load(tmp_path / "m.tabsparse").history_
    assert np.isnan(history[0]["val_score"]) and history[1]["val_score"] == float("-inf")


def test_save_is_deterministic_and_accepts_str_and_pathlike(
    models: dict[str, Any], tmp_path: Path
) -> None:
    model = models["regressor_2d"]
    save(model, str(tmp_path / "a.tabsparse"))
    save(model, tmp_path / "b.tabsparse")
    assert (tmp_path / "a.tabsparse").read_bytes() == (tmp_path / "b.tabsparse").read_bytes()
    load(str(tmp_path / "a.tabsparse"))


def test_file_layout(saved: Path, models: dict[str, Any]) -> None:
    with zipfile.ZipFile(saved) as zf:
        infos = zf.infolist()
        doc = json.loads(zf.read(JSON_MEMBER))
    assert infos[0].filename == JSON_MEMBER
    assert all(i.compress_type == zipfile.ZIP_STORED for i in infos)
    assert doc["format"] == "tabsparse-model" and doc["format_version"] == 1
    assert doc["estimator"] == "TabNetClassifier" and doc["device"] == "cpu"
    state = models["binary_str"].network_.state_dict()
    assert [e["name"] for e in doc["tensors"]] == list(state)
    # shared GLU weights are stored once
    files = {e["file"] for e in doc["tensors"]}
    assert len(files) == len(infos) - 1 < len(state)
    assert doc["attributes"]["classes_"]["dtype"] == "<U3"


def test_unfitted_and_foreign_estimators_are_refused(tmp_path: Path) -> None:
    with pytest.raises(NotFittedError):
        save(TabNetClassifier(), tmp_path / "m.tabsparse")
    with pytest.raises(TypeError, match="registered"):
        save(object(), tmp_path / "m.tabsparse")  # type: ignore[arg-type]
    assert list(tmp_path.iterdir()) == []


# ---- atomic save ---------------------------------------------------------------------------------


@pytest.mark.parametrize("where", ["writestr", "replace"])
def test_failed_save_keeps_the_old_file(
    where: str, models: dict[str, Any], saved: Path, tmp_path: Path, monkeypatch: Any
) -> None:
    path = tmp_path / "m.tabsparse"
    path.write_bytes(saved.read_bytes())
    before = path.read_bytes()
    calls = {"n": 0}
    real_writestr = zipfile.ZipFile.writestr

    def failing_writestr(self: zipfile.ZipFile, *args: Any, **kwargs: Any) -> None:
        calls["n"] += 1
        if calls["n"] == 5:
            raise OSError("disk full (simulated)")
        real_writestr(self, *args, **kwargs)

    def failing_replace(*args: Any) -> None:
        raise OSError("rename failed (simulated)")

    if where == "writestr":
        monkeypatch.setattr(zipfile.ZipFile, "writestr", failing_writestr)
    else:
        monkeypatch.setattr(os, "replace", failing_replace)
    with pytest.raises(OSError, match="simulated"):
        save(models["regressor_1d"], path)
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.tabsparse"]  # no temporary left
    monkeypatch.undo()
    assert type(load(path)) is TabNetClassifier


def test_failed_first_save_leaves_nothing(
    models: dict[str, Any], tmp_path: Path, monkeypatch: Any
) -> None:
    def boom(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("interrupted (simulated)")

    monkeypatch.setattr(os, "fsync", boom)
    with pytest.raises(RuntimeError, match="simulated"):
        save(models["binary_str"], tmp_path / "m.tabsparse")
    assert list(tmp_path.iterdir()) == []


# ---- devices -------------------------------------------------------------------------------------


def test_model_saved_on_cuda_loads_on_cpu(
    models: dict[str, Any], X: pd.DataFrame, tmp_path: Path, monkeypatch: Any
) -> None:
    model = copy.deepcopy(models["binary_str"])
    model.device_ = torch.device("cuda:0")  # as if trained on a GPU (tensors still on the CPU)
    path = tmp_path / "m.tabsparse"
    save(model, path)
    with zipfile.ZipFile(path) as zf:
        assert json.loads(zf.read(JSON_MEMBER))["device"] == "cuda:0"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    loaded = load(path)
    assert loaded.device_ == torch.device("cpu")
    assert all(t.device.type == "cpu" for t in loaded.network_.state_dict().values())
    reference = models["binary_str"]
    np.testing.assert_array_equal(loaded.predict_proba(X), reference.predict_proba(X))
    assert load(path, device="cpu").device_ == torch.device("cpu")
    with pytest.raises(ValueError, match="CUDA is not available"):
        load(path, device="cuda")


# ---- rejected files ------------------------------------------------------------------------------


def test_model_file_error_is_a_value_error_and_pickles() -> None:
    err = ModelFileError("/x/m.tabsparse", "bad")
    assert isinstance(err, ValueError)
    again = pickle.loads(pickle.dumps(err))
    assert str(again) == str(err) and again.path == "/x/m.tabsparse"


def _set(path: list[Any], value: Any) -> Callable[[dict], None]:
    def edit(doc: dict) -> None:
        target = doc
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value

    return edit


def _drop_tensor(name: str) -> Callable[[dict], None]:
    """Drop a tied weight from the index (its file is still used by the other name)."""

    def edit(doc: dict) -> None:
        doc["tensors"] = [e for e in doc["tensors"] if e["name"] != name]

    return edit


CASES: dict[str, tuple[Callable[[list[tuple[str, bytes]]], Any], str]] = {
    "wrong format": (lambda m: edit_doc(m, _set(["format"], "other")), "wrong format name"),
    "newer version": (
        lambda m: edit_doc(m, _set(["format_version"], 2)),
        "unsupported format_version 2",
    ),
    "version type": (lambda m: edit_doc(m, _set(["format_version"], "1")), "format_version"),
    "unknown class": (
        lambda m: edit_doc(m, _set(["estimator"], "os.system")),
        "unknown estimator class 'os.system'",
    ),
    "pipeline class": (
        lambda m: edit_doc(m, _set(["estimator"], "Pipeline")),
        "unknown estimator class",
    ),
    "missing key": (lambda m: edit_doc(m, lambda d: d.pop("encoder")), "missing keys ['encoder']"),
    "extra key": (lambda m: edit_doc(m, _set(["code"], "print(1)")), "unexpected keys ['code']"),
    "bad json": (lambda m: [(n, b"{not json" if n == JSON_MEMBER else d) for n, d in m], "JSON"),
    "not utf8": (lambda m: [(n, b"\xff\xfe" if n == JSON_MEMBER else d) for n, d in m], "UTF-8"),
    "json not object": (lambda m: [(n, b"[]" if n == JSON_MEMBER else d) for n, d in m], "object"),
    "nan constant": (
        lambda m: [
            (n, d.replace(b'"tol":', b'"tol":NaN,"x":') if n == JSON_MEMBER else d) for n, d in m
        ],
        "NaN",
    ),
    "missing json": (lambda m: m[1:], "missing member 'tabsparse.json'"),
    "missing tensor file": (lambda m: m[:-1], "missing member"),
    "extra member": (lambda m: [*m, ("payload.pkl", b"\x80\x04K\x01.")], "unexpected member"),
    "path trick": (lambda m: [*m, ("../../evil.npy", b"x")], "unexpected member"),
    "duplicated member": (lambda m: [*m, m[3]], "duplicated"),
    "checksum": (
        lambda m: edit_doc(m, lambda d: d["tensors"][-1].update(sha256="0" * 64)),
        "checksum mismatch",
    ),
    "index shape": (
        lambda m: edit_doc(m, lambda d: d["tensors"][-1].update(shape=[3])),
        "disagrees with the index",
    ),
    "huge index shape": (
        lambda m: edit_doc(m, lambda d: d["tensors"][-1].update(shape=[2**40, 2**40])),
        "shape",
    ),
    "index dtype": (
        lambda m: edit_doc(m, lambda d: d["tensors"][-1].update(dtype="|O")),
        "unsupported dtype '|O'",
    ),
    "index file": (
        lambda m: edit_doc(m, lambda d: d["tensors"][-1].update(file="../x.npy")),
        "bad file name",
    ),
    "extra tensor": (
        lambda m: edit_doc(m, lambda d: d["tensors"].append({**d["tensors"][-1], "name": "evil"})),
        "unexpected tensors: ['evil']",
    ),
    "missing tensor": (
        lambda m: edit_doc(m, _drop_tensor("encoder.initial.shared.layers.0.fc.weight")),
        "tensors missing from the file: ['encoder.initial.shared.layers.0.fc.weight']",
    ),
    "renamed tensor": (
        lambda m: edit_doc(m, lambda d: d["tensors"][0].update(name="__class__")),
        "unexpected tensors",
    ),
    "shape vs params": (
        lambda m: edit_doc(m, _set(["params", "n_d"], 5)),
        "but the parameters imply",
    ),
    "huge params": (
        lambda m: edit_doc(m, _set(["params", "n_d"], 10**9)),
        "the parameters imply a network of about",
    ),
    "bad param": (lambda m: edit_doc(m, _set(["params", "n_d"], -3)), "invalid parameters"),
    "unknown param": (lambda m: edit_doc(m, _set(["params", "evil"], 1)), "unknown parameter"),
    "bad encoder": (
        lambda m: edit_doc(m, _set(["encoder", "n_features"], "4")),
        "bad encoder state",
    ),
    "bad classes": (
        lambda m: edit_doc(m, _set(["attributes", "classes_"], "yes")),
        "inconsistent fitted attributes",
    ),
    "missing attribute": (
        lambda m: edit_doc(m, lambda d: d["attributes"].pop("history_")),
        "missing ['history_']",
    ),
    "unknown marker": (
        lambda m: edit_doc(m, _set(["attributes", "n_iter_"], {"$type": "callable", "x": 1})),
        "unknown value type 'callable'",
    ),
    "bad device": (lambda m: edit_doc(m, _set(["device"], "mps")), "bad device"),
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


@pytest.mark.parametrize(
    "content, fragment",
    [
        (b"", "not a zip archive"),
        (b"hello world", "not a zip archive"),
        (b"PK\x03\x04" + b"\x00" * 40, "not a zip archive"),
        (npy_bytes(np.zeros(3)), "bare .npy"),
    ],
)
def test_foreign_bytes_are_rejected(content: bytes, fragment: str, tmp_path: Path) -> None:
    path = tmp_path / "foreign.bin"
    path.write_bytes(content)
    assert_rejected(path, fragment)


def test_npy_with_wrong_dtype_or_trailing_bytes(saved: Path, tmp_path: Path) -> None:
    path = tmp_path / "bad.tabsparse"
    members = read_members(saved)
    write_members(path, replace_tensor(members, "head.bias", npy_bytes(np.zeros(2))))
    assert_rejected(path, "(<f8, [2]) disagrees with the index")
    write_members(
        path,
        replace_tensor(members, "head.bias", npy_bytes(np.zeros(2)), dtype="<f8"),
    )
    assert_rejected(path, "tensor 'head.bias' is <f8 [2], but the parameters imply <f4 [2]")
    data = npy_bytes(np.zeros(2, dtype=np.float32)) + b"\x00" * 4
    write_members(path, replace_tensor(members, "head.bias", data))
    assert_rejected(path, "size its header declares")
    write_members(path, replace_tensor(members, "head.bias", b"\x00" * 90))
    assert_rejected(path, "not an .npy file")


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


def test_object_npy_payload_never_runs(marker: Path, saved: Path, tmp_path: Path) -> None:
    obj = np.array([Payload(str(marker))], dtype=object)
    data = npy_bytes(obj, allow_pickle=True)
    path = tmp_path / "evil.tabsparse"
    members = read_members(saved)
    write_members(path, replace_tensor(members, "head.bias", data))
    assert_rejected(path, "object dtype")
    write_members(path, replace_tensor(members, "head.bias", data, dtype="|O", shape=[1]))
    assert_rejected(path, "unsupported dtype '|O'")
    assert not marker.exists()


@pytest.mark.parametrize("name", ["payload.pkl", "model.pt", "tensors/0.npy/../../x.pkl"])
def test_pickle_member_never_runs(name: str, marker: Path, saved: Path, tmp_path: Path) -> None:
    path = tmp_path / "evil.tabsparse"
    write_members(path, [*read_members(saved), (name, pickle.dumps(Payload(str(marker))))])
    assert_rejected(path, "unexpected member")
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


# ---- fuzzing -------------------------------------------------------------------------------------


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


def _mutations(raw: bytes, rng: np.random.Generator) -> list[tuple[str, bytes]]:
    out: list[tuple[str, bytes]] = []
    members = read_members_bytes(raw)
    # random byte flips
    for _ in range(400):
        b = bytearray(raw)
        for pos in rng.integers(0, len(raw), size=rng.integers(1, 4)):
            b[pos] ^= int(rng.integers(1, 256))
        out.append((f"flip {pos}", bytes(b)))
    # truncations at every kind of offset
    structural = _structure_offsets(raw)
    picked = rng.choice(structural, size=min(250, len(structural)), replace=False).tolist()
    for off in [*picked, *rng.integers(0, len(raw), size=60).tolist()]:
        out.append((f"truncate {off}", raw[:off]))
    # removed / duplicated members
    for i in sorted({0, 1, len(members) - 1, *rng.integers(0, len(members), size=40).tolist()}):
        out.append((f"remove {i}", zip_bytes(members[:i] + members[i + 1 :])))
        out.append((f"duplicate {i}", zip_bytes([*members, members[i]])))
    # edited JSON fields
    doc = json.loads(dict(members)[JSON_MEMBER])
    paths = _json_paths(doc)
    for j in rng.permutation(len(paths))[:260]:
        path = paths[j]
        value = WRONG_VALUES[int(rng.integers(len(WRONG_VALUES)))]
        out.append(
            (f"json {path}={value!r:.40}", zip_bytes(edit_doc(members, _set(list(path), value))))
        )
    # wrong shapes / dtypes / sizes in the tensor index
    for k in rng.integers(0, len(doc["tensors"]), size=80):
        field, value = [
            ("shape", [2**62]),
            ("shape", [1, 2, 3]),
            ("shape", []),
            ("dtype", "<f8"),
            ("dtype", "<c8"),
            ("sha256", "f" * 64),
            ("file", "tensors/0.npy"),
            ("name", "x"),
        ][int(rng.integers(8))]
        edit = lambda d, k=int(k), f=field, v=value: d["tensors"][k].update({f: v})  # noqa: E731
        out.append((f"index {k} {field}={value}", zip_bytes(edit_doc(members, edit))))
    # huge declared sizes in the central directory and local headers
    starts = [m.start() for m in re.finditer(b"PK\x01\x02|PK\x03\x04", raw)]
    for s in rng.choice(starts, size=60).tolist():
        b = bytearray(raw)
        field = 20 if raw[s : s + 4] == b"PK\x01\x02" else 18
        value = int(rng.choice([0xFFFFFFFF, 2**31, len(raw) + 1, 0]))
        struct.pack_into("<I", b, s + field + 4 * int(rng.integers(2)), value)
        out.append((f"size {s}={value}", bytes(b)))
    return out


def read_members_bytes(raw: bytes) -> list[tuple[str, bytes]]:
    with zipfile.ZipFile(io.BytesIO(raw)) as zf:
        return [(info.filename, zf.read(info)) for info in zf.infolist()]


def zip_bytes(members: list[tuple[str, bytes]]) -> bytes:
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with zipfile.ZipFile(buf, "w") as zf:
            for name, data in members:
                zf.writestr(name, data)
    return buf.getvalue()


def test_fuzzed_files_raise_model_file_error_or_load(saved: Path, tmp_path: Path) -> None:
    raw = saved.read_bytes()
    mutations = _mutations(raw, np.random.default_rng(12345))
    assert len(mutations) >= 1000
    path = tmp_path / "fuzz.tabsparse"
    outcomes = {"rejected": 0, "loaded": 0}
    escaped = []
    for label, data in mutations:
        path.write_bytes(data)
        try:
            load(path)
        except ModelFileError as exc:
            assert str(path) in str(exc)
            outcomes["rejected"] += 1
        except BaseException as exc:  # anything else is a bug
            escaped.append(f"{label}: {type(exc).__name__}: {exc}")
        else:
            outcomes["loaded"] += 1
    assert not escaped, "\n".join(escaped[:20])
    assert outcomes["rejected"] > 0.8 * len(mutations)


# ---- internals -----------------------------------------------------------------------------------

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
    text = json.dumps(_encode(value), allow_nan=False)
    assert _decode(json.loads(text)) == value


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
    back = _decode(json.loads(json.dumps(_encode(array), allow_nan=False)))
    assert back.dtype == array.dtype and back.shape == array.shape
    assert [type(x) for x in back.ravel()] == [type(x) for x in array.ravel()]
    np.testing.assert_array_equal(back, array)


def test_registry_is_explicit_and_extensible(
    models: dict[str, Any], X: pd.DataFrame, tmp_path: Path, monkeypatch: Any
) -> None:
    class MyClassifier(TabNetClassifier):
        pass

    model = copy.deepcopy(models["binary_str"])
    model.__class__ = MyClassifier
    with pytest.raises(TypeError, match="registered"):
        save(model, tmp_path / "m.tabsparse")  # subclasses are not silently saved as the base
    monkeypatch.setattr(tabsparse.io, "ESTIMATORS", dict(tabsparse.io.ESTIMATORS))
    tabsparse.io.register_estimator(MyClassifier, attributes=("classes_",), check=lambda est: None)
    save(model, tmp_path / "m.tabsparse")
    loaded = load(tmp_path / "m.tabsparse")
    assert type(loaded) is MyClassifier
    np.testing.assert_array_equal(loaded.predict_proba(X), model.predict_proba(X))


@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        {"n_shared": 0},
        {"n_independent": 0},
        {"n_shared": 1, "n_independent": 3, "n_steps": 4},
        {"cat_emb_dim": 3, "grouped_features": [["num", "count"], ["city"]]},
        {"n_d": 24, "n_a": 8},
    ],
)
def test_size_estimate_matches_the_network(kwargs: dict[str, Any], models: dict[str, Any]) -> None:
    """The gate against edited parameters must agree with the real network (see io.py)."""
    fitted = models["binary_str"]
    est = TabNetClassifier(**kwargs)
    est.encoder_, est.classes_ = fitted.encoder_, np.array(["a", "b", "c"])
    network = est._build_network(0)
    unique = {t.untyped_storage().data_ptr(): t.numel() for t in network.state_dict().values()}
    assert _network_size_estimate(est) == sum(unique.values())


@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        {"n_shared_decoder": 0, "n_indep_decoder": 2},
        {"n_shared_decoder": 2, "n_indep_decoder": 0, "n_steps": 4, "n_shared": 0},
        {"cat_emb_dim": 3, "grouped_features": [["num", "count"], ["city"]], "n_d": 24},
    ],
)
def test_size_estimate_matches_the_pretraining_network(
    kwargs: dict[str, Any], models: dict[str, Any]
) -> None:
    est = TabNetPretrainer(**kwargs)
    est.encoder_ = models["binary_str"].encoder_
    network = est._build_network(0)
    unique = {t.untyped_storage().data_ptr(): t.numel() for t in network.state_dict().values()}
    assert _network_size_estimate(est) == sum(unique.values())


def test_pretrainer_round_trips(X: pd.DataFrame, tmp_path: Path) -> None:
    pre = TabNetPretrainer(**TINY, n_shared_decoder=2, cat_emb_dim=2).fit(X)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # every attribute is known to the file format
        save(pre, tmp_path / "pre.tabsparse")
    loaded = load(tmp_path / "pre.tabsparse")
    assert type(loaded) is TabNetPretrainer and loaded.get_params() == pre.get_params()
    np.testing.assert_array_equal(loaded.transform(X), pre.transform(X))
    np.testing.assert_array_equal(loaded.feature_importances_, pre.feature_importances_)
    doc = json.loads(zipfile.ZipFile(tmp_path / "pre.tabsparse").read(JSON_MEMBER))
    doc["params"]["n_indep_decoder"] = 10**6  # an edited file cannot make load allocate more
    with zipfile.ZipFile(tmp_path / "pre.tabsparse") as src:
        members = {i.filename: src.read(i) for i in src.infolist()}
    members[JSON_MEMBER] = json.dumps(doc).encode()
    with zipfile.ZipFile(tmp_path / "edited.tabsparse", "w") as dst:
        for name, data in members.items():
            dst.writestr(name, data)
    with pytest.raises(ModelFileError, match="imply a network"):
        load(tmp_path / "edited.tabsparse")
