"""The training settings of the cheap defaults: AdamW's ``beta_2`` (a fixed choice that reaches
the optimiser) and the classifier's ``label_smoothing`` (a validated keyword, reaching the loss,
saved in model files)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest
import torch
from fixed_helpers import with_fixed

import tabsparse
from tabsparse import TabNetClassifier, TabNetRegressor
from tabsparse.training import Callback

TINY: dict[str, Any] = {"n_d": 4, "n_a": 4, "n_steps": 2, "max_epochs": 3, "random_state": 0}


def data(n: int = 200) -> tuple[pd.DataFrame, np.ndarray]:
    rng = np.random.default_rng(0)
    X = pd.DataFrame({"a": rng.normal(size=n), "b": rng.choice(["u", "v", "w"], size=n)})
    return X, np.where(X["a"] > 0.3, "hi", np.where(X["a"] < -0.3, "lo", "mid"))


@pytest.mark.parametrize("cls", [TabNetClassifier, TabNetRegressor])
def test_beta_2_is_a_fixed_choice(cls: type) -> None:
    assert "beta_2" not in cls().get_params()
    assert cls._fixed.beta_2 == 0.999
    with pytest.raises(TypeError, match="beta_2"):
        cls(beta_2=0.9)


@pytest.mark.parametrize("value", [1.0, -0.1, None])
def test_bad_label_smoothing_is_refused(value: object) -> None:
    expected = (
        "The 'label_smoothing' parameter of TabNetClassifier must be a float in the range "
        f"[0.0, 1.0). Got {value!r} instead."
    )
    with pytest.raises(ValueError) as info:
        TabNetClassifier(label_smoothing=value).fit(np.zeros((20, 2)), np.arange(20) % 2)
    assert str(info.value) == expected


def test_the_regressor_has_no_label_smoothing() -> None:
    assert "label_smoothing" not in TabNetRegressor().get_params()
    with pytest.raises(TypeError, match="label_smoothing"):
        TabNetRegressor(label_smoothing=0.1)  # type: ignore[call-arg]


class _RecordBetas(Callback):
    def __init__(self) -> None:
        self.betas: list[tuple[float, float]] = []
        self.second_moment_ratio: float | None = None

    def on_fit_begin(self, trainer: Any) -> None:
        self.betas.append(trainer.optimizer.betas)

    def on_batch_end(self, trainer: Any) -> None:
        if self.second_moment_ratio is None:  # after the first step: v = (1 - beta2) g^2
            opt = trainer.optimizer
            grad = torch.cat([p.grad.reshape(-1) for p in opt.params])
            v = torch.cat([s.reshape(-1) for s in opt.exp_avg_sq])
            live = grad.abs() > 1e-6
            self.second_moment_ratio = float((v[live] / grad[live] ** 2).mean())


@pytest.mark.parametrize("beta_2", [0.95, 0.999])
def test_beta_2_reaches_the_optimiser(beta_2: float) -> None:
    X, y = data()
    seen = _RecordBetas()
    clf = with_fixed(TabNetClassifier(**TINY, callbacks=[seen], device="cpu"), beta_2=beta_2)
    clf.fit(X, y)
    assert seen.betas == [(0.9, beta_2)]
    assert seen.second_moment_ratio == pytest.approx(1.0 - beta_2, rel=1e-4)
    reg = with_fixed(
        TabNetRegressor(**TINY, callbacks=[_RecordBetas()], device="cpu"), beta_2=beta_2
    )
    reg.fit(X, X["a"].to_numpy())
    assert reg.callbacks[0].betas == [(0.9, beta_2)]
    other = with_fixed(TabNetClassifier(**TINY, device="cpu"), beta_2=0.5).fit(X, y)
    assert not np.allclose(other.predict_proba(X), clf.predict_proba(X))


def test_the_classifier_trains_on_the_smoothed_cross_entropy() -> None:
    X, y = data()
    clf = TabNetClassifier(**TINY, label_smoothing=0.2, device="cpu").fit(X, y)
    logits = torch.tensor([[1.0, -2.0, 0.5], [0.0, 3.0, -1.0]])
    target = torch.tensor([2, 0])
    log_p = torch.log_softmax(logits, dim=1)
    # target distribution: 0.8 on the true class plus 0.2 / 3 on each class
    expected = -(0.8 * log_p[[0, 1], [2, 0]] + 0.2 / 3 * log_p.sum(dim=1))
    torch.testing.assert_close(clf._loss_fn()(logits, target), expected)
    plain = TabNetClassifier(**TINY, device="cpu").fit(X, y)
    torch.testing.assert_close(plain._loss_fn()(logits, target), -log_p[[0, 1], [2, 0]])
    assert not np.allclose(plain.predict_proba(X), clf.predict_proba(X))


def test_multi_label_and_multi_task_targets_keep_their_losses() -> None:
    X, _ = data()
    multi_label = np.stack([X["a"] > 0, X["b"] == "u"], axis=1).astype(int)
    multi_task = np.stack([np.where(X["a"] > 0, "p", "n"), X["b"].to_numpy()], axis=1)
    for y in (multi_label, multi_task):
        fits = [
            TabNetClassifier(**TINY, label_smoothing=s, device="cpu").fit(X, y) for s in (0.0, 0.3)
        ]
        losses = [[r["train_loss"] for r in fit.history_] for fit in fits]
        assert losses[0] == losses[1]
        np.testing.assert_array_equal(fits[0].predict(X), fits[1].predict(X))


def test_the_settings_are_saved_in_model_files(tmp_path: Any) -> None:
    X, y = data()
    clf = TabNetClassifier(**TINY, label_smoothing=0.05, device="cpu").fit(X, y)
    tabsparse.save(clf, tmp_path / "clf.tabsparse")
    back = tabsparse.load(tmp_path / "clf.tabsparse")
    assert back.get_params()["label_smoothing"] == 0.05
    np.testing.assert_allclose(back.predict_proba(X), clf.predict_proba(X), rtol=1e-6)
