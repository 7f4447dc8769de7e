"""tabsparse.io and tabsparse.save / load: round trips, atomicity, the integrity check, the
allow-list and the network check. (Refused files: test_io_hostile.py; fuzzing: test_io_fuzz.py;
files of format_version 1: test_io_legacy.py.)"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import warnings
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import torch
from fixed_helpers import build, with_fixed
from model_file_helpers import (
    TINY,
    assert_rejected,
    assert_same_model,
    edit_doc,
    edit_weights,
    fit_models,
    make_frame,
    read_members,
    set_path,
    write_members,
)
from safetensors.torch import load as st_load
from sklearn.exceptions import NotFittedError

import tabsparse
import tabsparse.io
from tabsparse import TabNetClassifier, TabNetPretrainer, load, save
from tabsparse.estimators import _persistence
from tabsparse.estimators._persistence import _network_size_estimate
from tabsparse.io import CHECKSUM_MEMBER, JSON_MEMBER, WEIGHTS_MEMBER, ModelFileError
from tabsparse.training import Callback

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


def test_io_functions_are_the_estimator_layer_ones(
    models: dict[str, Any], X: pd.DataFrame, tmp_path: Path
) -> None:
    """tabsparse.io.save / load without a registry use the estimator layer's allow-list."""
    path = tmp_path / "m.tabsparse"
    tabsparse.io.save(models["binary_str"], path)
    a = tabsparse.io.load(path)
    b = tabsparse.io.load(path, registry=_persistence.ESTIMATORS)
    np.testing.assert_array_equal(a.predict_proba(X), b.predict_proba(X))
    with pytest.raises(ModelFileError, match="unknown estimator class 'TabNetClassifier'"):
        tabsparse.io.load(path, registry={})


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
        gamma=np.float32(1.5),
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
    assert type(params["gamma"]) is np.float32 and params["early_stopping"] is True
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
        members = {i.filename: zf.read(i) for i in infos}
    assert [i.filename for i in infos] == [JSON_MEMBER, WEIGHTS_MEMBER, CHECKSUM_MEMBER]
    assert all(i.compress_type == zipfile.ZIP_STORED for i in infos)
    doc = json.loads(members[JSON_MEMBER])
    assert doc["format"] == "tabsparse-model" and doc["format_version"] == 2
    assert doc["estimator"] == "TabNetClassifier" and doc["device"] == "cpu"
    assert doc["attributes"]["classes_"]["dtype"] == "<U3"
    # SHA256SUMS covers both other members, in sha256sum's format
    expected = "".join(
        f"{hashlib.sha256(members[n]).hexdigest()}  {n}\n" for n in (JSON_MEMBER, WEIGHTS_MEMBER)
    )
    assert members[CHECKSUM_MEMBER].decode() == expected
    # every tensor is in the safetensors member, tied ones (the shared GLU weights) once
    state = models["binary_str"].network_.state_dict()
    weights = st_load(members[WEIGHTS_MEMBER])
    tied = doc["tied"]
    assert tied and set(weights) | set(tied) == set(state) and not set(weights) & set(tied)
    assert "encoder.steps.0.shared.layers.0.fc.weight" in tied
    for name, tensor in state.items():
        assert torch.equal(weights[tied.get(name, name)], tensor), name


def test_unfitted_and_foreign_estimators_are_refused(tmp_path: Path) -> None:
    with pytest.raises(NotFittedError):
        save(TabNetClassifier(), tmp_path / "m.tabsparse")
    with pytest.raises(TypeError, match="registered"):
        save(object(), tmp_path / "m.tabsparse")  # type: ignore[arg-type]
    assert list(tmp_path.iterdir()) == []


# ---- the integrity check -------------------------------------------------------------------------


def _swap_classes(doc: dict) -> None:
    doc["attributes"]["classes_"]["data"].reverse()


def _encoder_categories(doc: dict) -> None:
    doc["encoder"]["categories"][0][0] = "aaa"  # "blue" becomes an unseen value


@pytest.mark.parametrize(
    "edit",
    [_swap_classes, set_path(["attributes", "architecture_", "gamma"], 1.0), _encoder_categories],
    ids=["swapped classes_", "gamma", "encoder categories"],
)
def test_edited_json_is_refused(edit: Any, saved: Path, tmp_path: Path) -> None:
    """Issue 25: edits to the JSON that would change predictions must not load silently."""
    members = read_members(saved)
    path = tmp_path / "edited.tabsparse"
    write_members(path, edit_doc(members, edit, sign=False))
    assert_rejected(path, "member 'tabsparse.json': checksum mismatch", "edited")
    # the same edit with the checksums recomputed loads, and really changes the model:
    # the check detects edits and corruption, it is not a signature
    write_members(path, edit_doc(members, edit))
    X = make_frame()
    changed = load(path)
    original = load(saved)
    same_labels = np.array_equal(changed.predict(X), original.predict(X))
    same_proba = np.array_equal(changed.predict_proba(X), original.predict_proba(X))
    assert not (same_labels and same_proba)


def test_edited_weights_are_refused(saved: Path, tmp_path: Path) -> None:
    members = read_members(saved)
    signed = edit_weights(members, lambda t: t["head.bias"].add_(1.0))
    unsigned = [(n, d) for n, d in signed if n != CHECKSUM_MEMBER]
    unsigned.append((CHECKSUM_MEMBER, dict(members)[CHECKSUM_MEMBER]))
    path = tmp_path / "edited.tabsparse"
    write_members(path, unsigned)
    assert_rejected(path, "member 'weights.safetensors': checksum mismatch")


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
        if calls["n"] == 2:
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


# ---- the allow-list and the network check --------------------------------------------------------


def test_registry_is_explicit_and_extensible(
    models: dict[str, Any], X: pd.DataFrame, tmp_path: Path, monkeypatch: Any
) -> None:
    class MyClassifier(TabNetClassifier):
        pass

    model = copy.deepcopy(models["binary_str"])
    model.__class__ = MyClassifier
    with pytest.raises(TypeError, match="registered"):
        save(model, tmp_path / "m.tabsparse")  # subclasses are not silently saved as the base
    monkeypatch.setattr(_persistence, "ESTIMATORS", dict(_persistence.ESTIMATORS))
    _persistence.register_estimator(MyClassifier, attributes=("classes_",), check=lambda e: None)
    save(model, tmp_path / "m.tabsparse")
    loaded = load(tmp_path / "m.tabsparse")
    assert type(loaded) is MyClassifier
    np.testing.assert_array_equal(loaded.predict_proba(X), model.predict_proba(X))


def test_model_files_never_import_the_estimators() -> None:
    """The layering rule: tabsparse.io is the file format and knows no estimator."""
    import subprocess
    import sys

    code = (
        "import sys, tabsparse.io; "
        "print(sorted(m for m in sys.modules if m.startswith(('tabsparse.estimators', 'sklearn'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def _distinct_values(network: torch.nn.Module) -> int:
    unique = {t.untyped_storage().data_ptr(): t.numel() for t in network.state_dict().values()}
    return sum(unique.values())


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
    """The meta-device build that gates edited parameters agrees with the real network."""
    fitted = models["binary_str"]
    est = build(TabNetClassifier, **kwargs)
    est.encoder_, est.classes_ = fitted.encoder_, np.array(["a", "b", "c"])
    assert _network_size_estimate(est) == _distinct_values(est._build_network(0))
    with torch.device("meta"):
        meta = est._build_network(0).state_dict()
    real = est._build_network(0).state_dict()
    assert [(k, v.dtype, v.shape) for k, v in meta.items()] == [
        (k, v.dtype, v.shape) for k, v in real.items()
    ]


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
    est = build(TabNetPretrainer, **kwargs)
    est.encoder_ = models["binary_str"].encoder_
    assert _network_size_estimate(est) == _distinct_values(est._build_network(0))


def test_pretrainer_round_trips(X: pd.DataFrame, tmp_path: Path) -> None:
    pre = with_fixed(TabNetPretrainer(**TINY, n_shared_decoder=2), cat_emb_dim=2).fit(X)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # every attribute is known to the file format
        save(pre, tmp_path / "pre.tabsparse")
    loaded = load(tmp_path / "pre.tabsparse")
    assert type(loaded) is TabNetPretrainer and loaded.get_params() == pre.get_params()
    np.testing.assert_array_equal(loaded.transform(X), pre.transform(X))
    np.testing.assert_array_equal(loaded.feature_importances_, pre.feature_importances_)
    members = read_members(tmp_path / "pre.tabsparse")
    # an edited file cannot make load allocate more, checksums recomputed or not
    for sign in (False, True):
        edit = set_path(["attributes", "architecture_", "n_indep_decoder"], 10**6)
        edited = edit_doc(members, edit, sign=sign)
        write_members(tmp_path / "edited.tabsparse", edited)
        with pytest.raises(
            ModelFileError, match="checksum mismatch" if not sign else "implies a network"
        ):
            load(tmp_path / "edited.tabsparse")


def test_read_model_file_gives_the_verified_payload(saved: Path, models: dict[str, Any]) -> None:
    payload = tabsparse.io.read_model_file(saved)
    assert payload.estimator == "TabNetClassifier" and payload.format_version == 2
    assert set(payload.document) == {
        "params",
        "param_notes",
        "attributes",
        "notes",
        "device",
        "encoder",
    }
    state = models["binary_str"].network_.state_dict()
    assert list(payload.tensors) != [] and set(payload.tensors) == set(state)
    for name, tensor in state.items():
        assert torch.equal(payload.tensors[name], tensor), name
    # tied names share one tensor, as in the network
    tied = "encoder.steps.0.shared.layers.0.fc.weight"
    assert payload.tensors[tied] is payload.tensors["encoder.shared.0.weight"]
    assert tabsparse.io.load(saved, device="cpu").device_ == torch.device("cpu")
