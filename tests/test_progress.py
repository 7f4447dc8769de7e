"""The tqdm progress bar callback."""

from __future__ import annotations

import io
import pickle

import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone

from tabsparse import TabNetClassifier
from tabsparse.progress import ProgressBar, progress_callbacks
from tabsparse.training import Callback

pytest.importorskip("tqdm")

TINY = {"n_d": 4, "n_a": 4, "n_steps": 2, "random_state": 0}


@pytest.fixture(scope="module")
def data() -> tuple[pd.DataFrame, np.ndarray]:
    rng = np.random.default_rng(0)
    X = pd.DataFrame({"a": rng.normal(size=120), "b": rng.choice(["u", "v"], size=120)})
    y = (X["a"] > 0).to_numpy().astype(int)
    return X, y


def test_bar_writes_progress_and_loss_to_stderr(
    capsys: pytest.CaptureFixture[str], data: tuple[pd.DataFrame, np.ndarray]
) -> None:
    X, y = data
    bar = ProgressBar()
    est = TabNetClassifier(max_epochs=2, callbacks=[bar], **TINY).fit(X, y)
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "2/2" in captured.err
    assert f"loss={est.history_[-1]['train_loss']:.4g}" in captured.err
    assert "val_score" not in captured.err
    assert bar._bar is None  # closed at the end of the fit


def test_bar_shows_the_validation_loss_without_a_negated_copy(
    data: tuple[pd.DataFrame, np.ndarray],
) -> None:
    X, y = data
    out = io.StringIO()
    est = TabNetClassifier(max_epochs=2, callbacks=[ProgressBar(file=out)], **TINY)
    est.fit(X[:90], y[:90], X_val=X[90:], y_val=y[90:])
    text = out.getvalue()
    assert f"val_loss={est.history_[-1]['val_loss']:.4g}" in text
    assert "val_score" not in text  # scoring="loss": the score is -val_loss, shown once


@pytest.mark.parametrize("scoring", ["roc_auc", "neg_log_loss"])
def test_bar_shows_the_score_the_user_asked_for_by_name_and_sign(
    data: tuple[pd.DataFrame, np.ndarray], scoring: str
) -> None:
    X, y = data
    out = io.StringIO()
    est = TabNetClassifier(
        max_epochs=2, scoring=scoring, callbacks=[ProgressBar(file=out)], **TINY
    ).fit(X[:90], y[:90], X_val=X[90:], y_val=y[90:])
    text = out.getvalue()
    score = est.history_[-1]["val_score"]
    assert f"{scoring}={score:.4g}" in text
    assert (score < 0) == (scoring == "neg_log_loss")  # the scorer's own sign, not flipped
    assert "val_score" not in text


def test_bar_names_a_callable_score_val_score(data: tuple[pd.DataFrame, np.ndarray]) -> None:
    from sklearn.metrics import accuracy_score, make_scorer

    X, y = data
    out = io.StringIO()
    est = TabNetClassifier(
        max_epochs=2,
        scoring=make_scorer(accuracy_score),
        callbacks=[ProgressBar(file=out)],
        **TINY,
    ).fit(X[:90], y[:90], X_val=X[90:], y_val=y[90:])
    assert f"val_score={est.history_[-1]['val_score']:.4g}" in out.getvalue()


def test_bar_is_closed_after_early_stopping(data: tuple[pd.DataFrame, np.ndarray]) -> None:
    X, y = data

    class Stop(Callback):
        def on_epoch_end(self, trainer, record):  # type: ignore[no-untyped-def]
            trainer.stop = True

    bar = ProgressBar(file=io.StringIO())
    est = TabNetClassifier(max_epochs=5, callbacks=[bar, Stop()], **TINY).fit(X, y)
    assert est.n_iter_ == 1
    assert bar._bar is None
    assert "1/5" in bar.file.getvalue()  # type: ignore[union-attr]


def test_bar_is_closed_after_an_interruption(data: tuple[pd.DataFrame, np.ndarray]) -> None:
    X, y = data

    class Interrupt(Callback):
        def on_epoch_end(self, trainer, record):  # type: ignore[no-untyped-def]
            if len(trainer.history) == 2:
                raise KeyboardInterrupt

    bar = ProgressBar(file=io.StringIO())
    est = TabNetClassifier(max_epochs=4, callbacks=[bar, Interrupt()], **TINY)
    with pytest.warns(RuntimeWarning, match="interrupted"), pytest.raises(KeyboardInterrupt):
        est.fit(X, y)
    assert bar._bar is None
    assert "2/4" in bar.file.getvalue()  # type: ignore[union-attr]


def test_close_is_idempotent_and_the_bar_can_be_reused(
    data: tuple[pd.DataFrame, np.ndarray],
) -> None:
    X, y = data
    bar = ProgressBar(file=io.StringIO())
    bar.close()
    est = TabNetClassifier(max_epochs=1, callbacks=[bar], **TINY)
    est.fit(X, y)
    est.fit(X, y)
    assert bar.file.getvalue().count("1/1") >= 2  # type: ignore[union-attr]
    bar.close()


def test_bar_pickles_and_clones_with_its_estimator(data: tuple[pd.DataFrame, np.ndarray]) -> None:
    X, y = data
    est = TabNetClassifier(max_epochs=1, callbacks=[ProgressBar(file=io.StringIO())], **TINY)
    est.fit(X, y)
    again = pickle.loads(pickle.dumps(est))
    assert isinstance(again.callbacks[0], ProgressBar)
    assert isinstance(clone(est).callbacks[0], ProgressBar)
    assert pickle.loads(pickle.dumps(ProgressBar()))._bar is None


def test_verbose_zero_is_silent(
    capfd: pytest.CaptureFixture[str], data: tuple[pd.DataFrame, np.ndarray]
) -> None:
    X, y = data
    capfd.readouterr()
    TabNetClassifier(max_epochs=2, callbacks=progress_callbacks(0), **TINY).fit(X, y)
    captured = capfd.readouterr()
    assert captured.out == "" and captured.err == ""


def test_progress_callbacks() -> None:
    assert progress_callbacks(0) == []
    for verbose in (1, 2):
        callbacks = progress_callbacks(verbose)
        assert len(callbacks) == 1 and isinstance(callbacks[0], ProgressBar)
