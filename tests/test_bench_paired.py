"""The statistics of benchmarks/bench_paired.py and the prediction store of the quality
benchmark, on small hand-made cases with known answers."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("sklearn")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import bench_paired as bp
import quality_refs as qr


def _direct_delong(pos: np.ndarray, a: np.ndarray, b: np.ndarray) -> tuple[float, float, float]:
    """DeLong's statistics straight from the definitions: psi over every (positive, negative)
    pair, the structural components as its row and column means, their covariances."""

    def psi(s: np.ndarray) -> np.ndarray:
        x, y = s[pos][:, None], s[~pos][None, :]
        return (x > y) + 0.5 * (x == y)

    pa, pb = psi(a), psi(b)
    v10 = np.vstack([pa.mean(1), pb.mean(1)])
    v01 = np.vstack([pa.mean(0), pb.mean(0)])
    s10, s01 = np.cov(v10), np.cov(v01)
    m, n = v10.shape[1], v01.shape[1]
    var = (s10[0, 0] + s10[1, 1] - 2 * s10[0, 1]) / m + (s01[0, 0] + s01[1, 1] - 2 * s01[0, 1]) / n
    return float(pa.mean()), float(pb.mean()), float(math.sqrt(var))


def test_midranks_give_ties_their_mean_rank():
    assert bp._midranks(np.array([3.0, 1.0, 2.0, 2.0, 5.0])).tolist() == [4, 1, 2.5, 2.5, 5]


def test_delong_components_on_a_hand_computed_example():
    # positives 3, 2, 2 and negatives 2, 1: psi = [[1, 1], [.5, 1], [.5, 1]]
    positive = np.array([1, 1, 1, 0, 0], dtype=bool)
    auc, v10, v01 = bp.delong_components(positive, np.array([3.0, 2, 2, 2, 1]))
    assert auc == pytest.approx(5 / 6)
    assert v10.tolist() == pytest.approx([1.0, 0.75, 0.75])
    assert v01.tolist() == pytest.approx([2 / 3, 1.0])


def test_delong_test_matches_the_direct_computation():
    rng = np.random.default_rng(0)
    positive = rng.random(40) < 0.4
    a = np.round(positive + rng.normal(0, 0.8, 40), 1)  # rounded: ties within and across
    b = np.round(positive + rng.normal(0, 1.2, 40), 1)
    got = bp.delong_test(positive, a, b)
    auc_a, auc_b, se = _direct_delong(positive, a, b)
    assert got["ours"] == pytest.approx(auc_a)
    assert got["theirs"] == pytest.approx(auc_b)
    assert got["se"] == pytest.approx(se)
    z = (auc_a - auc_b) / se
    assert got["p"] == pytest.approx(math.erfc(abs(z) / math.sqrt(2)))
    swapped = bp.delong_test(positive, b, a)
    assert swapped["diff"] == pytest.approx(-got["diff"])
    assert swapped["p"] == pytest.approx(got["p"])


def test_delong_auc_agrees_with_scikit_learn():
    from sklearn.metrics import roc_auc_score

    rng = np.random.default_rng(1)
    positive = rng.random(500) < 0.3
    score = np.round(positive * 0.5 + rng.random(500), 2)
    auc, _, _ = bp.delong_components(positive, score)
    assert auc == pytest.approx(roc_auc_score(positive, score))


def test_delong_identical_scores_are_no_difference():
    positive = np.array([1, 0, 1, 0, 1], dtype=bool)
    s = np.array([0.9, 0.1, 0.4, 0.6, 0.8])
    r = bp.delong_test(positive, s, s.copy())
    assert (r["diff"], r["se"], r["p"]) == (0.0, 0.0, 1.0)
    assert bp.verdict(r, ("a", "b")) == "no significant difference"


def test_delong_needs_both_classes():
    with pytest.raises(ValueError, match="both classes"):
        bp.delong_components(np.ones(3, dtype=bool), np.array([0.1, 0.2, 0.3]))


def test_mcnemar_exact_p_values():
    assert bp.mcnemar_p(1, 5) == pytest.approx(14 / 64)  # 2 * (1 + 6) / 2**6
    assert bp.mcnemar_p(0, 6) == pytest.approx(2 / 64)
    assert bp.mcnemar_p(3, 3) == 1.0
    assert bp.mcnemar_p(0, 0) == 1.0


def test_paired_regression_reports_rmse_difference_and_ratio():
    y = np.array([0.0, 0.0, 0.0, 0.0])
    r = bp.paired_regression(y, np.array([1.0, -1, 1, -1]), np.array([2.0, -2, 2, -2]))
    assert (r["ours"], r["theirs"]) == (1.0, 2.0)
    assert r["rmse_diff"] == -1.0
    assert r["rmse_ratio"] == 0.5
    assert r["diff"] == -3.0  # MSE 1 - 4 on every row: no spread, so p = 0
    assert r["p"] == 0.0
    assert bp.verdict(r, ("a", "b")) == "a better"


def test_auc_verdict_prefers_the_higher_auc():
    stats = {"metric": "auc", "diff": -0.02, "p": 0.001}
    assert bp.verdict(stats, ("a", "b")) == "b better"


def _store(tmp_path, monkeypatch, kind, y, runs):
    monkeypatch.setattr(qr, "PREDICTIONS", tmp_path)
    paths = {}
    for model, (pred, proba, classes) in runs.items():
        path = qr.prediction_path("toy", model, 0)
        qr.save_predictions(path, kind, y, pred, proba, classes)
        paths[model] = path
    return paths


def test_stored_binary_predictions_pair_by_auc(tmp_path, monkeypatch):
    y = pd.Series(["no", "yes", "yes", "no", "yes", "no"])
    good = np.array([0.1, 0.9, 0.8, 0.3, 0.7, 0.2])  # perfect ranking
    bad = np.array([0.6, 0.4, 0.8, 0.3, 0.2, 0.9])
    runs = {
        m: (np.where(p > 0.5, "yes", "no"), np.c_[1 - p, p], ["no", "yes"])
        for m, p in (("a", good), ("b", bad))
    }
    paths = _store(tmp_path, monkeypatch, "binary", y, runs)
    assert paths["a"] == tmp_path / "toy" / "a-seed0.npz"
    a, b = qr.load_predictions(paths["a"]), qr.load_predictions(paths["b"])
    assert a["y"].tolist() == y.tolist()
    assert a["positive"] == "yes"
    assert a["score"] == pytest.approx(good)
    r = bp.pair_stored(a, b)
    assert r["metric"] == "auc"
    assert r["ours"] == 1.0
    assert r["theirs"] == pytest.approx(3 / 9)  # 3 of the 9 (yes, no) pairs ranked right


def test_stored_multiclass_and_regression_predictions_round_trip(tmp_path, monkeypatch):
    y = pd.Series(["a", "b", "c", "a"])
    proba = np.eye(3)[[0, 1, 1, 0]]
    paths = _store(
        tmp_path,
        monkeypatch,
        "multiclass",
        y,
        {"m1": (np.array(["a", "b", "b", "a"]), proba, ["a", "b", "c"])},
    )
    got = qr.load_predictions(paths["m1"])
    assert got["pred"].tolist() == ["a", "b", "b", "a"]
    r = bp.pair_stored(got, got)
    assert (r["metric"], r["ours"], r["p"]) == ("accuracy", 0.75, 1.0)

    yr = pd.Series([1.0, 2.0, 3.0])
    monkeypatch.setattr(qr, "PREDICTIONS", tmp_path / "reg")
    path = qr.prediction_path("toy", "r", 0)
    qr.save_predictions(path, "regression", yr, np.array([1.5, 2.0, 2.5]), None, [])
    got = qr.load_predictions(path)
    assert got["y"].tolist() == [1.0, 2.0, 3.0]
    assert got["pred"].tolist() == [1.5, 2.0, 2.5]


def test_pairing_refuses_predictions_of_other_test_rows(tmp_path, monkeypatch):
    monkeypatch.setattr(qr, "PREDICTIONS", tmp_path)
    qr.save_predictions(
        qr.prediction_path("t", "a", 0), "regression", pd.Series([1.0, 2.0]), [1, 2], None, []
    )
    other = qr.load_predictions(qr.prediction_path("t", "a", 0))
    other["y_sha"] = "something else"
    with pytest.raises(ValueError, match="different test rows"):
        bp.pair_stored(qr.load_predictions(qr.prediction_path("t", "a", 0)), other)


def test_variant_ignores_the_seed():
    assert qr.variant({"a": 1, "random_state": 0}) == qr.variant({"a": 1, "random_state": 2})
    assert qr.variant({"a": 1}) != qr.variant({"a": 2})


@pytest.mark.parametrize("model", ["xgboost", "catboost"])
def test_gradient_boosted_references_fit_with_categories(model):
    pytest.importorskip(model)
    rng = np.random.default_rng(0)
    n = 300
    colour = rng.choice(["red", "blue", None], n)
    x = rng.normal(size=n)
    y = pd.Series(np.where((colour == "red") ^ (x > 0.5), "yes", "no"))
    X = pd.DataFrame({"x": x, "colour": pd.Categorical(colour, categories=["blue", "red"])})
    pred, proba, classes, times = qr.fit_reference(
        model, "binary", X[:200], y[:200], X[200:], 0, {}, lambda: (0.0, 0.0)
    )
    assert classes == ["no", "yes"]
    assert proba is not None and proba.shape == (100, 2)
    assert np.allclose(proba.sum(1), 1)
    assert (pred == y[200:].to_numpy()).mean() > 0.85
    assert set(times) == {"fit_s", "fit_cpu_s", "predict_s"}
