"""Tests of training checkpoints (tabsparse.training.checkpoints) and of resuming from them."""

from __future__ import annotations

import dataclasses
import re
from typing import Any

import numpy as np
import pytest
import torch
from conftest import ce, make_data, make_net
from fixed_helpers import build

from tabsparse import TabNetClassifier
from tabsparse.training import (
    Callback,
    TrainConfig,
    Trainer,
    data_fingerprint,
    load_checkpoint,
)


class _StopAfter(Callback):
    def __init__(self, epochs: int) -> None:
        self.epochs = epochs

    def on_epoch_end(self, trainer: Trainer, record: dict[str, float]) -> None:
        trainer.stop = len(trainer.history) == self.epochs


def test_fingerprint_follows_the_content_of_the_data() -> None:
    a = make_data(100, seed=0)
    assert data_fingerprint(a, None) == data_fingerprint(make_data(100, seed=0), None)
    assert data_fingerprint(a, None) != data_fingerprint(make_data(100, seed=1), None)
    assert data_fingerprint(a, None) != data_fingerprint(a, a)
    changed = a.numeric.clone()
    changed[57, 2] += 1e-6  # one value of one row
    assert data_fingerprint(a) != data_fingerprint(dataclasses.replace(a, numeric=changed))
    subset = dataclasses.replace(a, rows=torch.arange(80))
    assert data_fingerprint(subset) != data_fingerprint(a)
    assert data_fingerprint(subset) != data_fingerprint(
        dataclasses.replace(a, rows=torch.arange(1, 81))
    )
    weighted = dataclasses.replace(a, weight=torch.ones(100))
    assert data_fingerprint(weighted) != data_fingerprint(a)
    assert data_fingerprint(a, object()) is None  # rows streamed from disk: not fingerprinted


def test_resume_is_refused_on_other_data_of_the_same_size(tmp_path: Any) -> None:
    cfg = TrainConfig(max_epochs=4, batch_size=64, checkpoint_dir=tmp_path)
    train, val = make_data(200, seed=0), make_data(60, seed=5)
    full = Trainer(make_net(), ce, dataclasses.replace(cfg, checkpoint_dir=None)).fit(train, val)
    Trainer(make_net(), ce, cfg, callbacks=[_StopAfter(2)]).fit(train, val)
    state = load_checkpoint(tmp_path)
    assert state["data"] == data_fingerprint(train, val)
    plain = dataclasses.replace(cfg, checkpoint_dir=None)
    with pytest.raises(ValueError, match="written by a fit on other data"):
        Trainer(make_net(), ce, plain).fit(make_data(200, seed=1), val, resume=state)
    with pytest.raises(ValueError, match="written by a fit on other data"):
        Trainer(make_net(), ce, plain).fit(train, make_data(60, seed=6), resume=state)
    resumed = Trainer(make_net(), ce, plain).fit(train, val, resume=state)
    assert [r["train_loss"] for r in resumed.history] == [r["train_loss"] for r in full.history]
    expected = full.network.state_dict()
    for key, value in resumed.network.state_dict().items():
        torch.testing.assert_close(value, expected[key], rtol=0, atol=0)
    # a checkpoint without a fingerprint (written before it existed) is not checked
    del state["data"]
    Trainer(make_net(), ce, plain).fit(make_data(200, seed=1), val, resume=state)


def test_an_estimator_refuses_to_resume_on_other_rows(tmp_path: Any) -> None:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 5))
    y = (X[:, 0] > 0).astype(int)
    settings: dict[str, Any] = {
        "max_epochs": 4,
        "random_state": 0,
        "n_d": 4,
        "n_a": 4,
        "n_steps": 2,
    }
    TabNetClassifier(**settings, checkpoint_dir=tmp_path, callbacks=[_StopAfter(2)]).fit(X, y)
    X_other = X.copy()
    X_other[7, 3] += 1.0  # same rows, same labels, one value changed
    with pytest.raises(ValueError, match="written by a fit on other data"):
        TabNetClassifier(**settings).fit(X_other, y, resume_from=tmp_path)
    resumed = TabNetClassifier(**settings).fit(X, y, resume_from=tmp_path)
    assert resumed.n_iter_ == 4


OTHER_DATA = (
    "the checkpoint was written by a fit on other data (the training or validation rows differ "
    "in content); resume with the data of that fit or start a new one"
)


def test_a_fit_with_the_default_random_state_resumes_with_its_recorded_seed(
    tmp_path: Any,
) -> None:
    rng = np.random.default_rng(1)
    X = rng.normal(size=(300, 5))
    y = (X[:, 0] + X[:, 1] > 0).astype(int)
    settings: dict[str, Any] = {"max_epochs": 4, "n_d": 4, "n_a": 4, "n_steps": 2}
    assert TabNetClassifier().random_state is None  # the default this test is about
    TabNetClassifier(**settings, checkpoint_dir=tmp_path, callbacks=[_StopAfter(2)]).fit(X, y)
    seed = load_checkpoint(tmp_path)["meta"]["seed"]
    X_other = X.copy()
    X_other[7, 3] += 1.0  # same shape and labels, one value changed
    with pytest.raises(ValueError, match="^" + re.escape(OTHER_DATA) + "$"):
        TabNetClassifier(**settings).fit(X_other, y, resume_from=tmp_path)
    resumed = TabNetClassifier(**settings).fit(X, y, resume_from=tmp_path)
    full = TabNetClassifier(**settings, random_state=seed).fit(X, y)
    assert resumed.n_iter_ == full.n_iter_ == 4
    assert [r["train_loss"] for r in resumed.history_] == [r["train_loss"] for r in full.history_]
    np.testing.assert_array_equal(resumed.predict_proba(X), full.predict_proba(X))


def test_a_pretrainer_with_the_default_random_state_resumes_with_its_recorded_seed(
    tmp_path: Any,
) -> None:
    from tabsparse import TabNetPretrainer

    X = np.random.default_rng(2).normal(size=(200, 4))
    # a validation split drawn from the seed, so the split must be that fit's too
    settings: dict[str, Any] = {"max_epochs": 4, "n_d": 4, "n_a": 4, "early_stopping": True}
    TabNetPretrainer(**settings, checkpoint_dir=tmp_path, callbacks=[_StopAfter(2)]).fit(X)
    seed = load_checkpoint(tmp_path)["meta"]["seed"]
    resumed = TabNetPretrainer(**settings).fit(X, resume_from=tmp_path)
    full = TabNetPretrainer(**settings, random_state=seed).fit(X)
    assert [r["val_loss"] for r in resumed.history_] == [r["val_loss"] for r in full.history_]
    np.testing.assert_array_equal(resumed.transform(X), full.transform(X))


# ---- resuming a finished fit, and resuming to more epochs ----------------------------------------


def _regression_rows(n: int = 200, seed: int = 3) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 4))
    return X, X[:, 0] - 0.5 * X[:, 1] + rng.normal(scale=0.3, size=n)


SMALL: dict[str, Any] = {"n_d": 4, "n_a": 4, "n_steps": 2, "device": "cpu"}


def _outputs(model: Any, X: np.ndarray) -> np.ndarray:
    return model.predict_proba(X) if hasattr(model, "predict_proba") else model.predict(X)


@pytest.mark.parametrize("random_state", [None, 0])
@pytest.mark.parametrize("cls", ["TabNetRegressor", "TabNetClassifier"])
def test_resuming_a_finished_fit_returns_the_finished_model(
    cls: str, random_state: int | None, tmp_path: Any
) -> None:
    """The weight average (a fixed choice, decay 0.99) recomputes batch-norm statistics when the fit
    ends; a resume that has no epoch left to run does the same, from the same rows."""
    import tabsparse

    estimator = getattr(tabsparse, cls)
    X, y = _regression_rows()
    if cls == "TabNetClassifier":
        y = (y > 0).astype(int)
    settings = {**SMALL, "max_epochs": 4, "random_state": random_state}
    assert estimator()._fixed.ema_decay == 0.99  # the fixed choice this test is about
    original = estimator(**settings, checkpoint_dir=tmp_path).fit(X, y)
    resumed = estimator(**settings).fit(X, y, resume_from=tmp_path)
    assert resumed.n_iter_ == original.n_iter_ == 4
    assert resumed.history_ == original.history_
    np.testing.assert_array_equal(_outputs(resumed, X), _outputs(original, X))


@pytest.mark.parametrize("lr_schedule", ["constant", "exponential", "plateau"])
def test_resuming_to_more_epochs_equals_the_longer_fit(lr_schedule: str, tmp_path: Any) -> None:
    """A schedule that does not depend on max_epochs: the resumed fit is the longer fit, bit for
    bit (its first epochs' records, its weights, its predictions)."""
    from tabsparse import TabNetRegressor

    X, y = _regression_rows()
    settings = {**SMALL, "random_state": 0, "lr_schedule": lr_schedule}
    build(TabNetRegressor, **settings, max_epochs=4, checkpoint_dir=tmp_path).fit(X, y)
    resumed = build(TabNetRegressor, **settings, max_epochs=6).fit(X, y, resume_from=tmp_path)
    longer = build(TabNetRegressor, **settings, max_epochs=6).fit(X, y)
    assert resumed.n_iter_ == longer.n_iter_ == 6
    drop = ("seconds",)
    assert [{k: v for k, v in r.items() if k not in drop} for r in resumed.history_] == [
        {k: v for k, v in r.items() if k not in drop} for r in longer.history_
    ]
    for key, value in longer.network_.state_dict().items():
        assert torch.equal(resumed.network_.state_dict()[key], value), key
    np.testing.assert_array_equal(resumed.predict(X), longer.predict(X))


def test_resuming_a_cosine_fit_to_more_epochs_follows_the_longer_schedule(tmp_path: Any) -> None:
    """The cosine schedule spans max_epochs: the resumed fit keeps the checkpoint's epochs and
    takes the longer fit's learning rate from there on (its weights differ from the longer
    fit's, whose first epochs ran at other rates)."""
    from tabsparse import TabNetRegressor

    X, y = _regression_rows()
    settings = {**SMALL, "random_state": 0, "lr_schedule": "cosine"}
    short = build(TabNetRegressor, **settings, max_epochs=4, checkpoint_dir=tmp_path).fit(X, y)
    resumed = build(TabNetRegressor, **settings, max_epochs=6).fit(X, y, resume_from=tmp_path)
    longer = build(TabNetRegressor, **settings, max_epochs=6).fit(X, y)
    assert resumed.n_iter_ == 6 and resumed.history_[:4] == short.history_
    rates = [r["learning_rate"] for r in resumed.history_[4:]]
    assert rates == [r["learning_rate"] for r in longer.history_[4:]]
    assert rates[-1] == 0.0  # the end of the longer schedule, not past the shorter one's


def test_an_early_stopped_fit_resumes_as_stopped(tmp_path: Any) -> None:
    """A fit that early stopping ended is over: resuming it (with the same or a larger
    max_epochs) runs no further epoch, as the uninterrupted fit ran none."""
    from tabsparse import TabNetRegressor

    X, y = _regression_rows(300)
    # no epoch after the first beats it by tol: stops after the second
    settings = {
        **SMALL,
        "random_state": 0,
        "lr_schedule": "constant",
        "early_stopping": True,
        "n_iter_no_change": 1,
        "tol": 1e9,
    }
    stopped = build(TabNetRegressor, **settings, max_epochs=4, checkpoint_dir=tmp_path).fit(X, y)
    assert stopped.n_iter_ == 2
    for max_epochs in (4, 6):
        resumed = build(TabNetRegressor, **settings, max_epochs=max_epochs).fit(
            X, y, resume_from=tmp_path
        )
        assert resumed.n_iter_ == 2 and resumed.best_iteration_ == stopped.best_iteration_
        np.testing.assert_array_equal(resumed.predict(X), stopped.predict(X))
    longer = build(TabNetRegressor, **settings, max_epochs=6).fit(X, y)
    np.testing.assert_array_equal(longer.predict(X), stopped.predict(X))


def test_a_refused_resume_names_only_what_differs(tmp_path: Any) -> None:
    from tabsparse import TabNetRegressor

    X, y = _regression_rows()
    settings = {**SMALL, "random_state": 0, "max_epochs": 3}
    TabNetRegressor(**settings, checkpoint_dir=tmp_path).fit(X, y)
    other = TabNetRegressor(**{**settings, "n_d": 8, "gamma": 1.5, "max_epochs": 5})
    message = (
        "the checkpoint was written by a different fit (checkpoint -> this fit: gamma: 1.3 -> "
        "1.5; n_d: 4 -> 8); resume with the settings of that fit or start a new one"
    )
    with pytest.raises(ValueError, match="^" + re.escape(message) + "$"):
        other.fit(X, y, resume_from=tmp_path)
    message = (
        "the checkpoint was written by a different fit (checkpoint -> this fit: n_train: 200 -> "
        "150); resume with the settings of that fit or start a new one"
    )
    with pytest.raises(ValueError, match="^" + re.escape(message) + "$"):
        TabNetRegressor(**settings).fit(X[:150], y[:150], resume_from=tmp_path)
    fewer = "the checkpoint holds 3 epochs of its fit, more than max_epochs=2: resume with " + (
        "max_epochs >= 3"
    )
    with pytest.raises(ValueError, match="^" + re.escape(fewer) + "$"):
        TabNetRegressor(**{**settings, "max_epochs": 2}).fit(X, y, resume_from=tmp_path)
