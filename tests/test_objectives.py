"""Regression objectives (issue 25 item 7) and extreme targets (item 4).

The torch losses equal scikit-learn's metrics; each objective's validation loss is its
scikit-learn metric up to the fitted scale (so early stopping on it is early stopping on the
metric); log-link predictions are positive; quantile models predict sorted columns; objectives
survive model files, ``target_from_json`` and export; every bad input has its exact error.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from sklearn.base import clone
from sklearn.datasets import load_diabetes
from sklearn.metrics import (
    d2_pinball_score,
    mean_absolute_error,
    mean_gamma_deviance,
    mean_pinball_loss,
    mean_poisson_deviance,
    mean_tweedie_deviance,
    r2_score,
)

from tabsparse import TabNetRegressor, load, save
from tabsparse.estimators._targets import Regression, target_from_json
from tabsparse.estimators._targets._regression import Objective
from tabsparse.losses import gamma_deviance, pinball_loss, poisson_deviance, tweedie_deviance

SMALL = dict(n_d=8, n_a=8, n_steps=2, n_independent=1, n_shared=1, random_state=0, device="cpu")
X, Y = load_diabetes(return_X_y=True)
X_TR, Y_TR, X_VA, Y_VA = X[:340], Y[:340], X[340:], Y[340:]
COUNTS = np.floor((Y - 25.0) / 25.0)  # a count target with zeros: 0 .. 12


def _fit(y: np.ndarray = Y_TR, epochs: int = 12, **params: object) -> TabNetRegressor:
    reg = TabNetRegressor(max_epochs=epochs, **SMALL, **params)  # type: ignore[arg-type]
    return reg.fit(X_TR, y)


def _fit_val(y_tr: np.ndarray, y_va: np.ndarray, **params: object) -> TabNetRegressor:
    reg = TabNetRegressor(max_epochs=12, **SMALL, **params)  # type: ignore[arg-type]
    return reg.fit(X_TR, y_tr, X_val=X_VA, y_val=y_va)


def _best_val_loss(reg: TabNetRegressor) -> float:
    return next(r["val_loss"] for r in reg.history_ if r["epoch"] == reg.best_iteration_)


# ---- the torch losses against scikit-learn --------------------------------------------------


@pytest.fixture(scope="module")
def pairs() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    y = rng.poisson(3.0, size=(200, 1)).astype(np.float64)
    mu = rng.gamma(2.0, 1.5, size=(200, 1))
    return y, mu


def test_poisson_gamma_tweedie_deviances_equal_sklearn(pairs: tuple) -> None:
    y, mu = pairs
    eta, yt = torch.from_numpy(np.log(mu)), torch.from_numpy(y)
    got = float(poisson_deviance(eta, yt).mean())
    assert got == pytest.approx(mean_poisson_deviance(y, mu), rel=1e-12)
    y_pos = y + 0.5
    got = float(gamma_deviance(eta, torch.from_numpy(y_pos)).mean())
    assert got == pytest.approx(mean_gamma_deviance(y_pos, mu), rel=1e-12)
    for power in (1.0, 1.2, 1.5, 1.9, 2.0, 3.0):
        target = y if power < 2 else y_pos
        got = float(tweedie_deviance(eta, torch.from_numpy(target), power).mean())
        want = mean_tweedie_deviance(target, mu, power=power)
        assert got == pytest.approx(want, rel=1e-12), power
    with pytest.raises(ValueError, match=re.escape("power=0.5 must be >= 1")):
        tweedie_deviance(eta, yt, 0.5)


def test_pinball_loss_equals_sklearn_for_one_and_several_quantiles(pairs: tuple) -> None:
    y, mu = pairs
    q = torch.tensor([0.3], dtype=torch.float64)
    got = float(pinball_loss(torch.from_numpy(mu), torch.from_numpy(y), q).mean())
    assert got == pytest.approx(mean_pinball_loss(y, mu, alpha=0.3), rel=1e-12)
    qs = [0.1, 0.5, 0.9]
    preds = np.hstack([mu, mu + 1.0, mu + 2.0])
    got = float(pinball_loss(torch.from_numpy(preds), torch.from_numpy(y), torch.tensor(qs)).mean())
    want = np.mean([mean_pinball_loss(y, preds[:, j], alpha=a) for j, a in enumerate(qs)])
    assert got == pytest.approx(want, rel=1e-6)


# ---- fits: predictions, scaling, validation loss = the metric ------------------------------


def test_default_is_squared_error_and_explicit_squared_error_is_identical() -> None:
    a, b = _fit(epochs=3), _fit(epochs=3, loss="squared_error")
    np.testing.assert_array_equal(a.predict(X_VA), b.predict(X_VA))
    assert a._objective == {
        "loss": "squared_error",
        "quantile": None,
        "power": None,
        "huber_delta": None,
    }
    np.testing.assert_array_equal(a.target_mean_, [Y_TR.mean()])
    np.testing.assert_array_equal(a.target_scale_, [Y_TR.std()])


def test_poisson_never_negative_where_squared_error_is() -> None:
    far = X_VA * 40.0  # far outside the training range: a linear-ish head goes negative
    sq = _fit(COUNTS[:340]).predict(far)
    reg = _fit_val(COUNTS[:340], COUNTS[340:], loss="poisson")
    pred = reg.predict(far)
    assert sq.min() < 0 < pred.min()
    np.testing.assert_array_equal(reg.target_mean_, [0.0])
    np.testing.assert_allclose(reg.target_scale_, [COUNTS[:340].mean()], rtol=1e-15)
    dev = mean_poisson_deviance(COUNTS[340:], reg.predict(X_VA))
    assert _best_val_loss(reg) * reg.target_scale_[0] == pytest.approx(dev, rel=1e-4)


def test_gamma_and_tweedie_validation_loss_is_the_sklearn_deviance() -> None:
    reg = _fit_val(Y_TR, Y_VA, loss="gamma")
    pred = reg.predict(X_VA)
    assert pred.min() > 0
    assert _best_val_loss(reg) == pytest.approx(mean_gamma_deviance(Y_VA, pred), rel=1e-4)
    reg = _fit_val(COUNTS[:340], COUNTS[340:], loss="tweedie", power=1.5)
    pred = reg.predict(X_VA)
    scale = reg.target_scale_[0]
    dev = mean_tweedie_deviance(COUNTS[340:], pred, power=1.5)
    assert _best_val_loss(reg) * scale**0.5 == pytest.approx(dev, rel=1e-4)


def test_absolute_error_and_huber_validation_losses() -> None:
    reg = _fit_val(Y_TR, Y_VA, loss="absolute_error")
    mae = mean_absolute_error(Y_VA, reg.predict(X_VA))
    assert _best_val_loss(reg) * reg.target_scale_[0] == pytest.approx(mae, rel=1e-4)
    reg = _fit_val(Y_TR, Y_VA, loss="huber")  # delta: the fixed 1.0 of the standardised target
    assert reg._objective["huber_delta"] == 1.0
    r = np.abs(Y_VA - reg.predict(X_VA)) / reg.target_scale_[0]
    want = np.where(r <= 1.0, 0.5 * r**2, r - 0.5).mean()
    assert _best_val_loss(reg) == pytest.approx(want, rel=1e-4)


def test_one_quantile_validation_loss_is_the_pinball_loss() -> None:
    reg = _fit_val(Y_TR, Y_VA, loss="quantile", quantile=0.8)
    pred = reg.predict(X_VA)
    assert pred.shape == (len(X_VA),)
    want = mean_pinball_loss(Y_VA, pred, alpha=0.8)
    assert _best_val_loss(reg) * reg.target_scale_[0] == pytest.approx(want, rel=1e-4)


def test_several_quantiles_give_sorted_columns_coverage_and_d2_score() -> None:
    qs = [0.1, 0.5, 0.9]
    reg = _fit_val(Y_TR, Y_VA, loss="quantile", quantile=qs)
    pred = reg.predict(X_VA)
    assert pred.shape == (len(X_VA), 3)
    assert np.all(np.diff(pred, axis=1) >= 0)
    want = np.mean([mean_pinball_loss(Y_VA, pred[:, j], alpha=q) for j, q in enumerate(qs)])
    assert _best_val_loss(reg) * reg.target_scale_[0] == pytest.approx(want, rel=1e-4)
    below = (Y_TR[:, None] <= reg.predict(X_TR)).mean(axis=0)
    assert np.all(np.abs(below - qs) < 0.15), below
    d2 = np.mean([d2_pinball_score(Y_VA, pred[:, j], alpha=q) for j, q in enumerate(qs)])
    assert reg.score(X_VA, Y_VA) == pytest.approx(d2, rel=1e-12)
    assert _fit(loss="quantile", quantile=[0.5], epochs=1).predict(X_VA).shape == (len(X_VA), 1)


def test_two_outputs_poisson_and_one_quantile() -> None:
    y2 = np.c_[COUNTS[:340], 2 * COUNTS[:340] + 1]
    reg = _fit(y2, epochs=3, loss="poisson")
    assert reg.predict(X_VA).shape == (len(X_VA), 2) and reg.predict(X_VA).min() > 0
    np.testing.assert_allclose(reg.target_scale_, y2.mean(axis=0), rtol=1e-15)
    reg = _fit(y2, epochs=3, loss="quantile", quantile=0.3)
    assert reg.predict(X_VA).shape == (len(X_VA), 2)


def test_clone_keeps_the_loss_parameters() -> None:
    reg = TabNetRegressor(loss="tweedie", power=1.3, quantile=0.2)
    params = clone(reg).get_params()
    assert (params["loss"], params["power"], params["quantile"]) == ("tweedie", 1.3, 0.2)
    assert "huber_delta" not in params


# ---- extreme targets (issue 25 item 4) -------------------------------------------------------


@pytest.mark.parametrize("factor", [1e300, 1e-300])
def test_extreme_targets_fit_like_the_normal_scale(factor: float) -> None:
    base = _fit(epochs=5).predict(X_VA)
    reg = _fit(Y_TR * factor, epochs=5)
    pred = reg.predict(X_VA)
    assert np.all(np.isfinite(pred))
    np.testing.assert_allclose(pred / factor, base, rtol=1e-9)
    assert reg.score(X_VA, Y_VA * factor) == pytest.approx(r2_score(Y_VA, base), abs=1e-9)
    assert r2_score(Y_VA, base) > 0.2
    pois = _fit(COUNTS[:340] * factor, epochs=5, loss="poisson").predict(X_VA) / factor
    ref = _fit(COUNTS[:340], epochs=5, loss="poisson").predict(X_VA)
    np.testing.assert_allclose(pois, ref, rtol=1e-5)


# ---- model files, target JSON, warm start -----------------------------------------------------


@pytest.mark.parametrize(
    "params", [dict(loss="poisson"), dict(loss="quantile", quantile=[0.1, 0.9])]
)
def test_model_file_round_trip(tmp_path: object, params: dict) -> None:
    reg = _fit(COUNTS[:340], epochs=2, **params)
    path = f"{tmp_path}/m.tabsparse"
    save(reg, path)
    back = load(path)
    np.testing.assert_array_equal(back.predict(X_VA), reg.predict(X_VA))
    assert back._objective == reg._objective
    back.set_params(loss="squared_error")  # the fitted objective stays
    np.testing.assert_array_equal(back.predict(X_VA), reg.predict(X_VA))


def test_target_json_round_trip_and_bad_objectives() -> None:
    obj = Objective.from_params("tweedie", None, 1.7, 1.0)
    target = Regression(np.zeros(1), np.ones(1), 1, obj)
    back = target_from_json(target.to_json())
    assert isinstance(back, Regression) and back.objective == obj
    doc = target.to_json()
    old = {k: v for k, v in doc.items() if k != "objective"}  # before objectives
    assert target_from_json(old).objective == Objective()
    bad = {**doc, "objective": {**doc["objective"], "huber_delta": 2.0}}
    with pytest.raises(ValueError, match="inconsistent objective"):
        target_from_json(bad)
    bad = {**doc, "objective": {"loss": "poisson"}}
    with pytest.raises(ValueError, match="an objective must have the keys"):
        target_from_json(bad)
    bad = {**doc, "mean": [1.0]}
    with pytest.raises(ValueError, match=re.escape("a log-link objective (tweedie) has")):
        target_from_json(bad)


def test_warm_start_refuses_another_objective() -> None:
    reg = _fit(COUNTS[:340], epochs=1, loss="poisson", warm_start=True)
    reg.set_params(loss="gamma")
    msg = "the model was fitted with the objective {'loss': 'poisson'"
    with pytest.raises(ValueError, match=re.escape(msg)):
        reg.fit(X_TR, COUNTS[:340] + 1)


# ---- export: the link and the quantiles are in the graph --------------------------------------


@pytest.mark.parametrize("fmt", ["torch", "onnx"])
@pytest.mark.parametrize(
    "params", [dict(loss="poisson"), dict(loss="quantile", quantile=[0.1, 0.5, 0.9])]
)
def test_export_applies_the_link_and_sorts_quantiles(tmp_path: object, fmt: str, params: dict):
    from tabsparse.export import export_model, export_spec

    reg = _fit(COUNTS[:340], epochs=2, **params)
    path = export_model(reg, f"{tmp_path}/m.{fmt}", fmt)
    numeric = reg.encoder_.transform(X_VA).numeric
    if fmt == "torch":
        got = torch.export.load(str(path)).module()(torch.from_numpy(numeric)).numpy()
    else:
        ort = pytest.importorskip("onnxruntime")
        sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        got = sess.run(None, {"numeric": numeric})[0]
    want = reg.predict(X_VA).reshape(len(X_VA), -1)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * float(reg.target_scale_[0]))
    target = export_spec(reg)["target"]
    assert target["loss"] == params["loss"]
    assert target["link"] == ("log" if params["loss"] == "poisson" else "identity")
    assert target["quantiles"] == params.get("quantile")


# ---- bad input: the exact errors -------------------------------------------------------------

BAD = [
    (
        dict(loss="poisson"),
        np.r_[1.0, 2.0, 0.0, -1.5, COUNTS[4:340]],
        "y must be >= 0 for loss='poisson', got -1.5 (row 3)",
    ),
    (
        dict(loss="gamma"),
        np.r_[1.0, 0.0, COUNTS[2:340] + 1],
        "y must be > 0 for loss='gamma', got 0.0 (row 1)",
    ),
    (
        dict(loss="tweedie", power=2.5),
        np.r_[1.0, 0.0, COUNTS[2:340] + 1],
        "y must be > 0 for loss='tweedie' with power=2.5, got 0.0 (row 1)",
    ),
    (
        dict(loss="tweedie", power=1.5),
        np.c_[COUNTS[:340], -COUNTS[:340]],
        "y must be >= 0 for loss='tweedie' with power=1.5, got -5.0 (row 0, column 1)",
    ),
    (
        dict(loss="quantile"),
        Y_TR,
        "loss='quantile' needs quantile=: a float in (0, 1), or an increasing sequence of them "
        "for several quantiles at once",
    ),
    (
        dict(loss="quantile", quantile=[0.9, 0.1]),
        Y_TR,
        "quantile=[0.9, 0.1] must be a non-empty, strictly increasing sequence",
    ),
    (dict(loss="quantile", quantile=[]), Y_TR, "quantile=[] must be a non-empty"),
    (
        dict(loss="quantile", quantile=[0.1, 1.0]),
        Y_TR,
        "quantile=[0.1, 1.0]: every quantile must be a float in (0, 1)",
    ),
    (
        dict(loss="quantile", quantile=["a"]),
        Y_TR,
        "quantile=['a']: every quantile must be a float in (0, 1)",
    ),
    (
        dict(loss="quantile", quantile=[0.1, 0.9]),
        np.c_[Y_TR, Y_TR],
        "y must be 1-D for several quantiles ([0.1, 0.9]), got 2 outputs; fit one model per output",
    ),
    (
        dict(loss="quantile", quantile=1.5),
        Y_TR,
        "The 'quantile' parameter of TabNetRegressor must be a float in the range (0.0, 1.0), "
        "an array-like or None. Got 1.5 instead.",
    ),
    (
        dict(loss="tweedie", power=0.5),
        Y_TR,
        "The 'power' parameter of TabNetRegressor must be a float in the range [1.0, inf). "
        "Got 0.5 instead.",
    ),
]


@pytest.mark.parametrize(("params", "y", "message"), BAD)
def test_bad_objective_inputs(params: dict, y: np.ndarray, message: str) -> None:
    reg = TabNetRegressor(max_epochs=1, **SMALL, **params)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=re.escape(message)):
        reg.fit(X_TR, y)
    assert not hasattr(reg, "network_")


def test_several_quantiles_refuse_a_scorer_string() -> None:
    reg = TabNetRegressor(loss="quantile", quantile=[0.1, 0.9], scoring="r2", **SMALL)
    msg = (
        "scoring='r2' cannot score several quantiles (predict returns one column per "
        "quantile); use scoring='loss', the mean pinball loss over them"
    )
    with pytest.raises(ValueError, match=re.escape(msg)):
        reg.fit(X_TR, Y_TR)


def test_unknown_loss_and_bad_y_val() -> None:
    with pytest.raises(ValueError, match=re.escape("The 'loss' parameter of TabNetRegressor")):
        TabNetRegressor(loss="logcosh").fit(X_TR, Y_TR)
    reg = TabNetRegressor(max_epochs=1, loss="poisson", **SMALL)  # type: ignore[arg-type]
    y_val = -np.ones(len(X_VA))
    with pytest.raises(
        ValueError, match=re.escape("must be >= 0 for loss='poisson', got -1.0 (row 0)")
    ):
        reg.fit(X_TR, COUNTS[:340], X_val=X_VA, y_val=y_val)


def test_example_runs_and_prints_each_objective() -> None:
    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    run = subprocess.run(
        [sys.executable, "examples/regression_objectives.py", "--max-epochs", "2"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    labels = [ln.split(":")[0].strip() for ln in lines if ln.startswith("   ")]
    assert labels == ["squared_error", "poisson", "squared_error", "gamma", _coverage_label(lines)]
    poisson = next(ln for ln in lines if "poisson:" in ln)
    assert ", 0 <= 0 of 133;" in poisson  # a log link never predicts <= 0


def _coverage_label(lines: list[str]) -> str:
    """The coverage line's text before its first colon (it must have the figures)."""
    line = next(ln for ln in lines if "coverage" in ln)
    assert re.fullmatch(
        r"   coverage on the test rows \d+\.\d% \(aimed at 90%\), mean width \d+\.\d, below the "
        r"median \d+\.\d%; score \(mean D2 pinball\) -?\d\.\d{3}",
        line,
    ), line
    return line.split(":")[0].strip()
