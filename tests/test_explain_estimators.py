"""``feature_importances_std_`` on the estimators: its values, model files (saved, checked, and
absent from old files), and the command line's model info."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from model_file_helpers import (
    assert_rejected,
    edit_doc,
    read_members,
    set_path,
    write_members,
)

import tabsparse
from tabsparse import TabNetClassifier, TabNetPretrainer, TabNetRegressor
from tabsparse.cli import main
from tabsparse.cli._info import _importance_text, _model_summary
from tabsparse.importance import global_importances
from tabsparse.io import encode_value

TINY: dict[str, Any] = {
    "n_d": 4,
    "n_a": 4,
    "n_steps": 2,
    "max_epochs": 3,
    "random_state": 0,
    "device": "cpu",
}


def table(n: int = 300, seed: int = 0) -> tuple[pd.DataFrame, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = pd.DataFrame(
        {
            "signal": rng.normal(size=n),
            "noise": rng.normal(size=n),
            "colour": rng.choice(["red", "green", "blue"], size=n),
        }
    )
    y = (X["signal"] + 0.3 * (X["colour"] == "red") > 0).to_numpy().astype(int)
    return X, y


#: one network: the spread over the rows (an ensemble's spread is over its members, below)
ONE = {**TINY, "n_members": 1}


@pytest.fixture(scope="module")
def clf() -> TabNetClassifier:
    X, y = table()
    return TabNetClassifier(**ONE).fit(X, y)  # 300 rows: no split, the sample is every row


def test_the_spread_is_the_standard_error_of_the_training_sample(
    clf: TabNetClassifier,
) -> None:
    X, _ = table()
    imp, std = clf.feature_importances_, clf.feature_importances_std_
    assert std.shape == imp.shape == (3,)
    assert std.dtype == imp.dtype == np.float32
    per_row = clf.explain(X).importances  # every training row is in the sample
    np.testing.assert_allclose(imp, per_row.mean(axis=0) / per_row.mean(axis=0).sum(), rtol=1e-5)
    np.testing.assert_allclose(std, global_importances(per_row)[1], rtol=1e-5)
    np.testing.assert_allclose(std, per_row.std(axis=0, ddof=1) / np.sqrt(len(per_row)), rtol=1e-4)


def test_importances_on_sample_draws_its_rows_from_the_fit_stream(
    clf: TabNetClassifier,
) -> None:
    X, _ = table()
    data = clf._tensor_data(clf._encode(X), None, None, clf.device_)
    mean, std = clf._importances_on_sample(data, np.random.default_rng(5))
    rng = np.random.default_rng(5)
    idx = np.sort(rng.choice(len(X), size=len(X), replace=False))
    want = global_importances(clf.explain(X.iloc[idx]).importances)
    np.testing.assert_allclose(mean, want[0], rtol=1e-5)
    np.testing.assert_allclose(std, want[1], rtol=1e-5)


def test_regressor_and_pretrainer_have_the_spread() -> None:
    X, y = table(n=200)
    reg = TabNetRegressor(**ONE).fit(X, y.astype(float))
    pre = TabNetPretrainer(**TINY).fit(X)
    for est in (reg, pre):
        std = est.feature_importances_std_
        assert std.shape == (3,) and np.all(np.isfinite(std)) and np.all(std >= 0)
        per_row = est.explain(X).importances
        np.testing.assert_allclose(
            std, per_row.std(axis=0, ddof=1) / np.sqrt(len(per_row)), rtol=0.25, atol=1e-6
        )


def test_an_ensemble_spread_is_over_its_members() -> None:
    X, y = table()
    ens = TabNetClassifier(**{**TINY, "n_members": 3}).fit(X, y)
    data = ens._tensor_data(ens._encode(X), None, None, ens.device_)
    mean, std = ens._importances_on_sample(data, np.random.default_rng(5))
    rng = np.random.default_rng(5)
    idx = np.sort(rng.choice(len(X), size=len(X), replace=False))
    sample = ens._tensor_data(ens._encode(X.iloc[idx]), None, None, ens.device_)
    members = ens._explain_tensors(sample, members=True)[0]
    assert members.shape == (3, len(X), 3)
    own = members.mean(axis=1) / members.mean(axis=1).sum(axis=1, keepdims=True)
    np.testing.assert_allclose(mean, own.mean(axis=0), rtol=1e-5)
    np.testing.assert_allclose(std, own.std(axis=0, ddof=1) / np.sqrt(3), rtol=1e-4)
    # the explanation's importances are the members' mean, row by row
    np.testing.assert_allclose(
        ens.explain(X.iloc[idx]).importances, members.mean(axis=0), rtol=1e-5, atol=1e-7
    )


# ---- model files ---------------------------------------------------------------------------------


def test_model_files_keep_the_spread(clf: TabNetClassifier, tmp_path: Path) -> None:
    path = tmp_path / "clf.tabsparse"
    tabsparse.save(clf, path)
    loaded = tabsparse.load(path)
    assert loaded.feature_importances_std_.dtype == clf.feature_importances_std_.dtype
    np.testing.assert_array_equal(loaded.feature_importances_std_, clf.feature_importances_std_)


def test_a_file_without_the_spread_loads_without_it(clf: TabNetClassifier, tmp_path: Path) -> None:
    """Files written before the spread existed: the model loads and has no spread to show."""
    path = tmp_path / "old.tabsparse"
    tabsparse.save(clf, path)
    members = edit_doc(
        read_members(path), lambda doc: doc["attributes"].pop("feature_importances_std_")
    )
    write_members(path, members)
    loaded = tabsparse.load(path)
    assert not hasattr(loaded, "feature_importances_std_")
    np.testing.assert_array_equal(loaded.feature_importances_, clf.feature_importances_)
    summary = _model_summary(loaded)
    assert "feature_importances_std" not in summary


@pytest.mark.parametrize(
    "value",
    [
        [0.1, 0.2],  # wrong shape
        [0.1, -0.2, 0.3],  # negative
        [0.1, float("nan"), 0.3],  # not finite
    ],
)
def test_a_bad_spread_is_refused(clf: TabNetClassifier, tmp_path: Path, value: list) -> None:
    path = tmp_path / "bad.tabsparse"
    tabsparse.save(clf, path)
    encoded = encode_value(np.asarray(value, dtype=np.float32))
    members = edit_doc(
        read_members(path), set_path(["attributes", "feature_importances_std_"], encoded)
    )
    write_members(path, members)
    assert_rejected(
        path,
        "inconsistent fitted attributes",
        "feature_importances_std_ must be a finite float array >= 0 of shape (3,)",
    )


# ---- tabsparse info ------------------------------------------------------------------------------


def test_importance_text() -> None:
    assert _importance_text(None, None) == ""
    assert _importance_text(0.25, None) == "importance 0.250"
    assert _importance_text(0.25, 0.004) == "importance 0.250 +/- 0.004"
    assert _importance_text(0.006, 0.003) == "importance 0.006 +/- 0.003  (~0)"  # 0.006 <= 2 x
    assert _importance_text(0.0, 0.0) == "importance 0.000 +/- 0.000  (~0)"


def test_info_shows_the_spread(
    clf: TabNetClassifier, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "clf.tabsparse"
    tabsparse.save(clf, path)
    assert main(["info", str(path), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    names = ["signal", "noise", "colour"]
    order = np.argsort(-clf.feature_importances_, kind="stable")
    assert list(info["feature_importances_std"]) == [names[j] for j in order]
    for j, name in enumerate(names):
        assert info["feature_importances_std"][name] == pytest.approx(
            float(clf.feature_importances_std_[j])
        )
    assert main(["info", str(path)]) == 0
    text = capsys.readouterr().out
    for j, name in enumerate(names):
        want = _importance_text(
            float(clf.feature_importances_[j]), float(clf.feature_importances_std_[j])
        )
        line = next(line for line in text.splitlines() if line.strip().startswith(name))
        assert line.endswith(want), line


# ---- held-out rows -------------------------------------------------------------------------------


def _global(per_row: np.ndarray) -> np.ndarray:
    mean = per_row.astype(np.float64).mean(axis=0)
    return mean / mean.sum()


def test_importances_come_from_validation_rows_when_there_are_enough() -> None:
    X, y = table(n=300)
    Xv, yv = table(n=600, seed=1)
    clf = TabNetClassifier(**TINY).fit(X, y, X_val=Xv, y_val=yv)
    np.testing.assert_allclose(
        clf.feature_importances_, _global(clf.explain(Xv).importances), rtol=1e-5
    )
    assert not np.allclose(clf.feature_importances_, _global(clf.explain(X).importances), rtol=1e-3)
    # fewer than 500 validation rows: the training rows, as without validation
    small = TabNetClassifier(**TINY).fit(X, y, X_val=Xv[:499], y_val=yv[:499])
    np.testing.assert_allclose(
        small.feature_importances_, _global(small.explain(X).importances), rtol=1e-5
    )


def test_early_stopping_split_and_pretrainer_validation_rows() -> None:
    X, y = table(n=5000)
    clf = TabNetClassifier(**{**TINY, "max_epochs": 1}).fit(X, y)  # auto: 500 held-out rows
    rng = np.random.default_rng(0)  # the split the fit drew (random_state=0, stratified)
    _, val_idx = clf._split(len(y), rng, y)
    assert len(val_idx) == 500
    np.testing.assert_allclose(
        clf.feature_importances_, _global(clf.explain(X.iloc[val_idx]).importances), rtol=1e-5
    )
    # the pretrainer: its validation rows as given, not the masked copy it validates on
    Xv, _ = table(n=500, seed=2)
    pre = TabNetPretrainer(**{**TINY, "max_epochs": 1}).fit(X[:300], X_val=Xv)
    np.testing.assert_allclose(
        pre.feature_importances_, _global(pre.explain(Xv).importances), rtol=1e-5
    )
