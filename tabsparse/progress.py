"""A progress bar over training epochs, as a :class:`tabsparse.training.Callback`.

The bar is drawn with `tqdm <https://tqdm.github.io>`_ on standard error (never standard output),
one tick per epoch, with the latest training loss and, when there is validation data, the latest
validation loss and the score early stopping watches as its postfix: under the name the user
gave it and with its sign (``roc_auc=0.912``, ``neg_log_loss=-0.3``). Without a score function
the watched score is the negated validation loss, already shown as ``val_loss``, so it is not
repeated. It is closed when training ends, also after early stopping and
after an interruption.

Examples
--------
>>> from tabsparse import TabNetClassifier
>>> from tabsparse.progress import ProgressBar
>>> clf = TabNetClassifier(max_epochs=20, callbacks=[ProgressBar()])  # doctest: +SKIP
"""

from __future__ import annotations

import math
import sys
from typing import Any, TextIO

from tabsparse.training import Callback, Trainer

__all__ = ["ProgressBar", "progress_callbacks"]


class ProgressBar(Callback):
    """Show a tqdm progress bar over the epochs of a fit.

    Parameters
    ----------
    desc : str, default="fit"
        Text in front of the bar.
    file : file-like, optional
        Where to draw; standard error (as it is when training begins) by default.
    leave : bool, default=True
        Keep the finished bar on screen.
    **tqdm_kwargs
        Passed on to :class:`tqdm.tqdm` (for instance ``ncols`` or ``mininterval``).

    Notes
    -----
    The total is the ``max_epochs`` of the fit; with ``warm_start`` it counts the epochs of this
    call only. The bar holds no state between fits, so one instance can serve many fits, and it
    is safe to clone and pickle with its estimator.
    """

    def __init__(
        self,
        desc: str = "fit",
        *,
        file: TextIO | None = None,
        leave: bool = True,
        **tqdm_kwargs: Any,
    ) -> None:
        self.desc = desc
        self.file = file
        self.leave = leave
        self.tqdm_kwargs = tqdm_kwargs
        self._bar: Any = None

    def __repr__(self) -> str:
        return f"{type(self).__name__}(desc={self.desc!r})"

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_bar"] = None  # an open bar holds a stream; it never travels
        if state.get("file") in (sys.stderr, sys.stdout):
            state["file"] = None
        return state

    def on_fit_begin(self, trainer: Trainer) -> None:
        """Open a bar whose total is the number of epochs this fit may run."""
        from tqdm import tqdm

        self.close()  # a bar left open by a fit that raised
        self._bar = tqdm(
            total=int(trainer.config.max_epochs),
            desc=self.desc,
            unit="epoch",
            file=self.file if self.file is not None else sys.stderr,
            leave=self.leave,
            dynamic_ncols=True,
            **self.tqdm_kwargs,
        )

    def on_epoch_end(self, trainer: Trainer, record: dict[str, float]) -> None:
        """Advance by one epoch and show the latest losses and score."""
        if self._bar is None:
            return
        postfix = {"loss": _short(record.get("train_loss"))}
        if "val_loss" in record:
            postfix["val_loss"] = _short(record.get("val_loss"))
        if "val_score" in record and trainer.score_fn is not None:
            name = str(getattr(trainer.score_fn, "name", "val_score"))
            postfix[name] = _short(record.get("val_score"))
        self._bar.set_postfix(postfix, refresh=False)
        self._bar.update(1)

    def on_fit_end(self, trainer: Trainer) -> None:
        """Close the bar (after the last epoch, early stopping or an interruption)."""
        self.close()

    def close(self) -> None:
        """Close the bar if one is open (safe to call at any time, also more than once).

        Training calls :meth:`on_fit_end` after the last epoch; a fit that ends with an exception
        may not, so code that drives a fit can call this in a ``finally`` clause.
        """
        bar, self._bar = self._bar, None
        if bar is not None:
            bar.close()


def _short(value: float | None) -> str:
    """A loss or score in few characters."""
    if value is None:
        return "-"
    if not math.isfinite(value):
        return str(value)
    return f"{value:.4g}"


def progress_callbacks(verbose: int) -> list[Callback]:
    """The callbacks an estimator's ``verbose`` setting asks for.

    Parameters
    ----------
    verbose : int
        The estimator's ``verbose``: 0 is silent, 1 or more shows a progress bar on stderr.

    Returns
    -------
    list of Callback
        ``[ProgressBar()]`` when ``verbose >= 1``, else ``[]``.
    """
    return [ProgressBar()] if verbose >= 1 else []
