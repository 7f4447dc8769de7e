"""Shared by the model-file tests (test_io*.py): small fits, zip surgery, assertions."""

from __future__ import annotations

import hashlib
import io
import json
import warnings
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import torch
from fixed_helpers import with_fixed
from safetensors.torch import load as st_load
from safetensors.torch import save as st_save

from tabsparse import TabNetClassifier, TabNetRegressor, load
from tabsparse.io import CHECKSUM_MEMBER, JSON_MEMBER, WEIGHTS_MEMBER, ModelFileError

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


def fit_models(X: pd.DataFrame) -> dict[str, Any]:
    """One fit per kind of model."""
    rng = np.random.default_rng(1)
    y_str = np.where(X["num"] + rng.normal(scale=0.5, size=N) > 0, "yes", "no")
    y_int = rng.integers(0, 3, size=N)
    y_reg = X["num"].to_numpy() * 2.0 + rng.normal(size=N)
    y_reg2 = np.column_stack([y_reg, -y_reg + 1.0])
    return {
        "binary_str": TabNetClassifier(**TINY).fit(X, y_str),
        "multiclass_int": with_fixed(
            TabNetClassifier(**TINY, grouped_features=[["num", "num_nan"]]), cat_emb_dim=2
        ).fit(X, y_int),
        "regressor_1d": TabNetRegressor(**TINY).fit(X, y_reg),
        "regressor_2d": TabNetRegressor(**TINY, categorical_features=["color", "city"]).fit(
            X, y_reg2
        ),
        "array_input": TabNetClassifier(**TINY).fit(X[["num", "num_nan"]].to_numpy(), y_int),
    }


# ---- zip surgery ---------------------------------------------------------------------------------


def read_members(path: Path) -> list[tuple[str, bytes]]:
    return read_members_bytes(path.read_bytes())


def read_members_bytes(raw: bytes) -> list[tuple[str, bytes]]:
    with zipfile.ZipFile(io.BytesIO(raw)) as zf:
        return [(info.filename, zf.read(info)) for info in zf.infolist()]


def zip_bytes(members: list[tuple[str, bytes]], compression: int = zipfile.ZIP_STORED) -> bytes:
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # duplicated names are wanted in some tests
        with zipfile.ZipFile(buf, "w", compression=compression) as zf:
            for name, data in members:
                zf.writestr(name, data)
    return buf.getvalue()


def write_members(
    path: Path, members: list[tuple[str, bytes]], compression: int = zipfile.ZIP_STORED
) -> None:
    path.write_bytes(zip_bytes(members, compression))


def resign(members: list[tuple[str, bytes]]) -> list[tuple[str, bytes]]:
    """Recompute SHA256SUMS over the other members (what anyone can do: no signature)."""
    others = [(n, d) for n, d in members if n != CHECKSUM_MEMBER]
    sums = "".join(f"{hashlib.sha256(d).hexdigest()}  {n}\n" for n, d in others)
    return [*others, (CHECKSUM_MEMBER, sums.encode())]


def edit_doc(
    members: list[tuple[str, bytes]], edit: Callable[[dict], Any], *, sign: bool = True
) -> list[tuple[str, bytes]]:
    """Edit tabsparse.json; ``sign``: recompute the checksums so deeper checks are reached."""
    out = []
    for name, data in members:
        if name == JSON_MEMBER:
            doc = json.loads(data)
            edit(doc)
            data = json.dumps(doc).encode()
        out.append((name, data))
    return resign(out) if sign else out


def edit_weights(
    members: list[tuple[str, bytes]], edit: Callable[[dict[str, torch.Tensor]], Any]
) -> list[tuple[str, bytes]]:
    """Edit the safetensors tensors (then recompute the checksums)."""
    out = []
    for name, data in members:
        if name == WEIGHTS_MEMBER:
            tensors = st_load(data)
            edit(tensors)
            data = st_save(tensors)
        out.append((name, data))
    return resign(out)


def set_path(path: list[Any], value: Any) -> Callable[[dict], None]:
    def edit(doc: dict) -> None:
        target = doc
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value

    return edit


# ---- assertions ----------------------------------------------------------------------------------


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
    # a test's own fixed choices (fixed_helpers.with_fixed) are not saved: the network's
    # settings are, in architecture_
    assert set(vars(a)) - {"_fixed"} == set(vars(b)) - {"_fixed"}
    for name, value in vars(a).items():
        if name in skip or name == "_fixed":
            continue
        other = getattr(b, name)
        assert type(other) is type(value), name
        if isinstance(value, np.ndarray):
            assert other.dtype == value.dtype, name
            np.testing.assert_array_equal(other, value, err_msg=name)
        elif name in ("background_", "selector_"):  # arrays (and a scale) by name
            assert set(other) == set(value), name
            for part, rows in value.items():
                if isinstance(rows, np.ndarray):
                    assert other[part].dtype == rows.dtype, name
                    np.testing.assert_array_equal(other[part], rows, err_msg=f"{name}[{part}]")
                else:
                    assert other[part] == rows, f"{name}[{part}]"
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
