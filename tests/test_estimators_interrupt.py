"""Ctrl-C during a fit (issue 25 item 2): the estimator keeps the best weights so far, then the
KeyboardInterrupt goes on, so that cross_val_score / GridSearchCV stop instead of scoring a
partly trained model and carrying on."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest
import torch
from fixed_helpers import with_fixed
from sklearn.model_selection import GridSearchCV, cross_val_score

from tabsparse import TabNetClassifier, TabNetPretrainer, TabNetRegressor
from tabsparse.training import Callback

TINY: dict[str, Any] = {"n_d": 4, "n_a": 4, "n_steps": 2, "random_state": 0, "device": "cpu"}


FITS_BEGUN: list[int] = []  # module-level: the searches fit clones of the callback


class InterruptAt(Callback):
    """Raise KeyboardInterrupt at the end of epoch ``epoch`` (1-based), as Ctrl-C would; record
    each fit it saw begin in ``FITS_BEGUN``."""

    def __init__(self, epoch: int = 3) -> None:
        self.epoch = epoch
        self.best_state: dict[str, torch.Tensor] | None = None

    def on_fit_begin(self, trainer):  # type: ignore[no-untyped-def]
        FITS_BEGUN.append(1)

    def on_epoch_end(self, trainer, record):  # type: ignore[no-untyped-def]
        if trainer.best_iteration == int(record["epoch"]):  # the weights early stopping keeps
            self.best_state = {k: v.clone() for k, v in trainer.network.state_dict().items()}
        if int(record["epoch"]) + 1 == self.epoch:
            raise KeyboardInterrupt


def data(n: int = 200) -> tuple[pd.DataFrame, np.ndarray]:
    rng = np.random.default_rng(0)
    X = pd.DataFrame({"a": rng.normal(size=n), "b": rng.choice(["u", "v"], size=n)})
    return X, ((X["a"] > 0) ^ (X["b"] == "u")).to_numpy().astype(int)


def test_interrupted_fit_raises_and_keeps_the_best_weights() -> None:
    X, y = data()
    Xv, yv = data(80)
    stop = InterruptAt(3)
    # without the weight average the callback sees, at the end of an epoch, the weights that
    # early stopping keeps (with it, those are the average, swapped in only to validate)
    clf = with_fixed(TabNetClassifier(**TINY, max_epochs=10, callbacks=[stop]), ema_decay=None)
    with pytest.warns(RuntimeWarning, match="interrupted after 3 epochs"):
        with pytest.raises(KeyboardInterrupt):
            clf.fit(X, y, X_val=Xv, y_val=yv)
    assert clf.n_iter_ == 3
    assert clf.best_iteration_ is not None and clf.best_iteration_ < 3
    assert stop.best_state is not None
    for name, value in clf.network_.state_dict().items():  # the best epoch's weights
        torch.testing.assert_close(value, stop.best_state[name], rtol=0, atol=0)
    proba = clf.predict_proba(Xv)
    assert proba.shape == (80, 2)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, rtol=1e-6)
    assert clf.feature_importances_.shape == (2,)


def test_interrupted_regressor_and_pretrainer_raise_and_stay_usable() -> None:
    X, y = data()
    reg = TabNetRegressor(**TINY, max_epochs=10, callbacks=[InterruptAt(2)])
    with pytest.warns(RuntimeWarning, match="interrupted"), pytest.raises(KeyboardInterrupt):
        reg.fit(X, y.astype(float))
    assert reg.n_iter_ == 2 and np.isfinite(reg.predict(X)).all()
    pre = TabNetPretrainer(**TINY, max_epochs=10, batch_size=64, callbacks=[InterruptAt(2)])
    with pytest.warns(RuntimeWarning, match="interrupted"), pytest.raises(KeyboardInterrupt):
        pre.fit(X)
    assert pre.n_iter_ == 2 and pre.transform(X).shape == (200, 4)


def test_cross_val_score_stops_at_the_interrupt() -> None:
    X, y = data()
    FITS_BEGUN.clear()
    clf = TabNetClassifier(**TINY, max_epochs=5, callbacks=[InterruptAt(3)])
    with pytest.warns(RuntimeWarning, match="interrupted"), pytest.raises(KeyboardInterrupt):
        cross_val_score(clf, X, y, cv=3)
    assert len(FITS_BEGUN) == 1  # the first fold's fit; no further folds were fitted


def test_grid_search_stops_at_the_interrupt() -> None:
    X, y = data()
    FITS_BEGUN.clear()
    search = GridSearchCV(
        TabNetClassifier(**TINY, max_epochs=4, callbacks=[InterruptAt(2)]),
        {"learning_rate": [0.01, 0.02]},
        cv=2,
    )
    with pytest.warns(RuntimeWarning, match="interrupted"), pytest.raises(KeyboardInterrupt):
        search.fit(X, y)
    assert len(FITS_BEGUN) == 1
    assert not hasattr(search, "best_estimator_")
