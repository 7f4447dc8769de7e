"""The best-models section of benchmarks/README.md (benchmarks/quality_best.py): which stored
prediction files the paired verdicts read, on a table where a reference ran past its limit."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("sklearn")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import bench_paired as bp
import bench_quality as bq
import quality_best as qb
import quality_refs as qr
import quality_store as qs

CAPS = (50_000, 20_000)
Y = pd.Series(["no", "yes", "yes", "no", "yes", "no", "yes", "no"])
SCORES = {  # positive-class probabilities: tabsparse ranks best, then LightGBM, then HGB
    "tabsparse": [0.1, 0.9, 0.8, 0.3, 0.7, 0.2, 0.6, 0.4],
    "lightgbm": [0.3, 0.9, 0.4, 0.5, 0.7, 0.2, 0.6, 0.1],
    "hgb": [0.6, 0.4, 0.8, 0.3, 0.2, 0.9, 0.7, 0.5],
}


def _row(model: str, auc: float) -> dict[str, Any]:
    return {"dataset": "adult", "model": model, "kind": "binary", "auc": auc, "fit_cpu_s": 1.0}


def _store(path: Path, model: str) -> Path:
    p = np.asarray(SCORES[model])
    pred = np.where(p > 0.5, "yes", "no")
    qr.save_predictions(path, "binary", Y, pred, np.c_[1 - p, p], ["no", "yes"])
    return path


@pytest.fixture
def stored(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """adult with CatBoost over its limit, HGB and LightGBM fitted, and tabsparse's seed-0
    predictions stored before a parameter (``beta_2``) existed: the file carries the tag of
    the parameters then, today's tag differs, and the stored row names the file."""
    monkeypatch.setattr(qr, "PREDICTIONS", tmp_path / "predictions")
    monkeypatch.setattr(qs, "RESULTS", tmp_path / "quality.jsonl")
    monkeypatch.setattr(qb, "TIMEOUTS", tmp_path / "quality_timeouts.jsonl")
    today = bq.resolved_tabsparse_params("binary", {}, 0)
    old = {k: v for k, v in today.items() if k != "beta_2"}
    old_tag, today_tag = qr.variant(old), qr.variant(today)
    assert old_tag != today_tag
    ts_file = _store(qr.prediction_path("adult", "tabsparse", 0, old_tag), "tabsparse")
    lgbm_file = _store(qr.prediction_path("adult", "lightgbm", 0), "lightgbm")
    _store(qr.prediction_path("adult", "hgb", 0), "hgb")
    seed0 = {
        **_row("tabsparse", 0.9),
        "seed": 0,
        "params": {},
        "tabsparse_params": old,
        "train_cap": CAPS[0],
        "test_cap": CAPS[1],
        "predictions_file": f"predictions/adult/{ts_file.name}",
    }
    newer = {**seed0, "commit": "later"}  # a later refit of the same settings, no file
    del newer["predictions_file"]
    qs.RESULTS.write_text("".join(json.dumps(r) + "\n" for r in (seed0, newer)))
    timeout = {"dataset": "adult", "model": "catboost", "seed": 0, "cpu_limit": 900.0}
    qb.TIMEOUTS.write_text(json.dumps({**timeout, "train_cap": CAPS[0], "test_cap": CAPS[1]}))
    by_dataset = {
        "adult": {
            "tabsparse": {**_row("tabsparse", 0.9), "params": {}},
            "hgb": _row("hgb", 0.7),
            "lightgbm": _row("lightgbm", 0.8),
        }
    }
    return {
        "by_dataset": by_dataset,
        "tag": dict.fromkeys(("binary", "multiclass", "regression"), today_tag),
        "ts_file": ts_file,
        "lgbm_file": lgbm_file,
    }


def test_a_timed_out_reference_leaves_the_verdict_against_the_best_fitted_gbdt(
    stored: dict[str, Any],
) -> None:
    want = bp.pair_stored(
        qr.load_predictions(stored["ts_file"]), qr.load_predictions(stored["lgbm_file"])
    )
    assert want["theirs"] == pytest.approx(15 / 16)  # LightGBM's AUC: the best fitted GBDT's
    cell = qb._verdict_cell({"dataset": "adult", **want}, "binary")[0]
    assert cell.startswith("= (+") and "p " in cell
    table = qb.render(stored["by_dataset"], CAPS, stored["tag"], "abc1234")
    (line,) = [r for r in table.splitlines() if r.startswith("| adult |")]
    cells = [c.strip() for c in line.strip("|").split("|")]
    assert cells[qb.COLUMNS.index("catboost") + 3] == "> limit"
    assert cells[-4:] == ["LightGBM", "-10.00", cell, "—"]  # no RealMLP-TD fitted: no pairing
    (found,) = qb.analyse(stored["by_dataset"], stored["tag"], CAPS)
    assert found["best"] == "lightgbm"
    assert found["vs_best"] == {"dataset": "adult", **want}


def test_todays_tag_names_the_file_when_it_exists(stored: dict[str, Any]) -> None:
    today = qr.prediction_path("adult", "tabsparse", 0, stored["tag"]["binary"])
    row = stored["by_dataset"]["adult"]["tabsparse"]
    assert qb.tabsparse_predictions("adult", row, CAPS, stored["tag"]["binary"], []) == today
    _store(today, "tabsparse")
    rows = qs.load_results()
    assert qb.tabsparse_predictions("adult", row, CAPS, stored["tag"]["binary"], rows) == today
    # no stored row with a file: today's name, which pairing then finds missing
    today.unlink()
    assert qb.tabsparse_predictions("adult", row, CAPS, "other", rows[1:]) == (
        today.parent / "tabsparse-other-seed0.npz"
    )
