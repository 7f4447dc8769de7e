"""``torch.compile`` for the training step, and the ``compile="auto"`` rule.

What is compiled is the training step's forward pass and loss (the network, the loss function
and the sample weights); the backward pass is compiled with it (AOTAutograd), while the
optimiser update, the learning-rate schedule and everything between epochs stay as they are.
Under tracing the network takes its plain module path: the sort-based sparsemax / entmax-1.5
(:func:`tabsparse.sparsemax.sparsemax_sorted`), the modules one by one instead of the
hand-written fused nodes (the compiler fuses their operations itself), and ghost batch norm
updating its running statistics inside the graph. ``fullgraph=True``: the whole step is one
graph, with no breaks back to Python (a test holds the library to that).

Settings (the training loop's ``TrainConfig.compile``; the estimators fix it at ``"auto"``, and
PyTorch's ``TORCHDYNAMO_DISABLE=1`` keeps every fit eager):

* ``False``: never.
* ``True`` or a ``torch.compile`` mode (``"default"``, ``"reduce-overhead"``,
  ``"max-autotune"``, ``"max-autotune-no-cudagraphs"``): from the first step, on any device;
  an error while compiling is raised.
* ``"auto"`` (default): only where it shortens the whole fit, compile time included.

  - **On the CPU: never.** The library's fused training step (hand-written forward and backward)
    is faster than what the compiler makes of the module path, before the compile time is
    counted (see "torch.compile against hand-fused eager" in ``benchmarks/HISTORY.md``).
  - **On CUDA: measured.** The first two epochs run eager (the faster of them is the eager
    epoch time). If the epochs left would take less than :data:`AUTO_MIN_SECONDS` eager, the fit
    stays eager: compiling (tens of seconds) could not pay for itself. Otherwise the next epoch
    compiles (its time includes the compiling), the one after measures the compiled epoch, and
    the fit keeps the compiled step for the rest only if that epoch took at most 95% of the
    eager one. The trial costs the compile time once, and is only made for fits with at least
    :data:`AUTO_MIN_SECONDS` of eager epochs left (early stopping may end a fit sooner than
    that projection). An error while compiling the forward or the backward sends the fit back
    to eager with a warning. The compile time itself is not bounded by tabsparse (PyTorch
    offers no timeout). Under DDP every rank follows rank 0's decision, and the graph may
    break at the gradient buckets (``fullgraph=False``).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from typing import Any

import torch

__all__ = ["AUTO_MIN_SECONDS", "BACKEND", "COMPILE_MODES", "StepCompiler", "check_compile"]

COMPILE_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
"""The ``torch.compile`` modes the ``compile`` setting accepts by name."""

AUTO_MIN_SECONDS = 300.0
"""``compile="auto"`` tries compiling only when the epochs left would take at least this long
eager."""

BACKEND = "inductor"
"""The ``torch.compile`` backend of the training step (the tests set ``"aot_eager"``: the same
graph capture and autograd, without code generation)."""

_AUTO_KEEP = 0.95  # the compiled epoch must take at most this share of the eager one
_WARMUP_EPOCHS = 2  # eager epochs measured before "auto" decides

StepFn = Callable[..., Any]


def check_compile(value: object) -> bool | str:
    """``value`` if it is a valid ``compile`` setting, else a ValueError naming the choices."""
    if isinstance(value, bool) or value == "auto" or value in COMPILE_MODES:
        return value  # type: ignore[return-value]
    raise ValueError(
        f"compile={value!r} is not a compile setting; expected True, False, 'auto' or one of "
        f"the torch.compile modes {COMPILE_MODES}"
    )


class StepCompiler:
    """Holds the eager and (once made) compiled training step and says which one runs.

    Parameters
    ----------
    step : callable
        The eager step (forward and loss).
    setting : bool or str
        See :func:`check_compile`.
    device : torch.device
        The training device (``"auto"`` compiles on CUDA only).
    backend : str, optional
        The ``torch.compile`` backend; :data:`BACKEND` by default.
    fullgraph : bool, default True
        Require one graph. The trainer passes False under DDP, whose compiled form splits the
        graph at its gradient buckets.

    The trainer calls :meth:`__call__` for every step and :meth:`epoch_end` after every epoch;
    ``state`` is ``"eager"``, ``"compiled"``, ``"measuring"`` (``"auto"`` before it decides)
    or ``"trial"`` / ``"trial-steady"`` (the two compiled epochs of the test).
    """

    def __init__(
        self,
        step: StepFn,
        setting: bool | str,
        device: torch.device,
        *,
        backend: str | None = None,
        fullgraph: bool = True,
    ) -> None:
        setting = check_compile(setting)
        self.eager = step
        self.setting = setting
        self.backend = BACKEND if backend is None else backend
        self.fullgraph = fullgraph
        self.compiled: StepFn | None = None
        self.eager_seconds = math.inf
        self.epochs_measured = 0
        self.decision: str | None = None  # why "auto" chose what it chose
        if setting is False:
            self.state = "eager"
        elif setting == "auto":
            self.state = "measuring" if device.type == "cuda" else "eager"
            if device.type != "cuda":
                self.decision = "eager: the CPU's fused step is faster than a compiled one"
        else:
            self.state = "compiled"

    @property
    def uses_compiled(self) -> bool:
        return self.state in ("compiled", "trial", "trial-steady")

    def _compiled(self) -> StepFn:
        if self.compiled is None:
            mode = self.setting if isinstance(self.setting, str) else None
            mode = None if mode in ("auto", "default") else mode
            self.compiled = torch.compile(
                self.eager, backend=self.backend, mode=mode, fullgraph=self.fullgraph, dynamic=False
            )
        return self.compiled

    def __call__(self, *args: Any) -> Any:
        if not self.uses_compiled:
            return self.eager(*args)
        try:
            return self._compiled()(*args)
        except Exception as exc:  # a compiler failure: "auto" runs eager instead
            if not self.give_up(exc):
                raise
            return self.eager(*args)

    def give_up(self, exc: Exception) -> bool:
        """After ``exc`` from a compiled step (its forward, or its backward, which is compiled
        on first use): under ``"auto"`` warn, go back to eager and return True (the caller runs
        the step again eager); otherwise return False (the caller raises)."""
        if self.setting != "auto" or not self.uses_compiled:
            return False
        warnings.warn(
            f'compile="auto": compiling the training step failed ({type(exc).__name__}: '
            f"{exc}); training eager",
            RuntimeWarning,
            stacklevel=3,
        )
        self.state, self.decision = "eager", f"eager: compiling failed ({type(exc).__name__})"
        return True

    def epoch_end(self, seconds: float, epochs_left: int) -> str:
        """Record an epoch of ``seconds`` and return the state for the next one."""
        if self.state == "measuring":
            self.eager_seconds = min(self.eager_seconds, seconds)
            self.epochs_measured += 1
            if self.epochs_measured >= _WARMUP_EPOCHS:
                projected = self.eager_seconds * epochs_left
                if epochs_left >= 2 and projected >= AUTO_MIN_SECONDS:
                    self.state = "trial"
                else:
                    self.state = "eager"
                    self.decision = (
                        f"eager: the {epochs_left} epochs left take about {projected:.0f} s "
                        f"eager, under the {AUTO_MIN_SECONDS:.0f} s that compiling needs to pay"
                    )
        elif self.state == "trial":  # this epoch compiled; the next one measures it
            self.state = "trial-steady"
        elif self.state == "trial-steady":
            faster = seconds <= _AUTO_KEEP * self.eager_seconds
            self.state = "compiled" if faster else "eager"
            self.decision = (
                f"{self.state}: a compiled epoch took {seconds:.3g} s, an eager one "
                f"{self.eager_seconds:.3g} s"
            )
        return self.state

    def set_state(self, state: str) -> None:
        """Take another rank's state (distributed training: every rank follows rank 0)."""
        if state not in _STATES:
            raise ValueError(f"unknown compile state {state!r}")
        self.state = state


_STATES = ("eager", "compiled", "measuring", "trial", "trial-steady")


def state_index(state: str) -> int:
    """``state`` as an integer (broadcast between ranks)."""
    return _STATES.index(state)


def state_name(index: int) -> str:
    """The state of :func:`state_index`."""
    return _STATES[index]
