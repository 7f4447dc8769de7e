"""Weight averaging for the trainer: an exponential moving average (EMA) of the parameters.

Pure torch. The trainer updates the average after every optimiser step and evaluates (validation
score, early stopping, the kept weights) with the averaged parameters; training itself continues
from the live ones. Averaging smooths out the step-to-step noise of the last epochs, which with
early stopping are usually run at a learning rate that is still high.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch

__all__ = ["ExponentialAverage"]


class ExponentialAverage:
    """Exponential moving average of a fixed list of parameters.

    After step ``t`` (1, 2, ...) the average is ``a <- d * a + (1 - d) * p`` with
    ``d = min(decay, (1 + t) / (10 + t))``: the warm-up factor lets the average forget the
    initial weights quickly and keeps its lag short while the weights still move fast (the
    decay reaches 0.9 after 80 steps, 0.99 after 890). A plain running mean from the first
    step (``d = 1 - 1 / t``) was tried and was worse: early stopping then compares averages
    dominated by the first epochs' weights.

    Parameters
    ----------
    params : iterable of Parameter
        Only those that require a gradient are averaged (buffers such as batch-norm statistics
        are not: they are already running averages).
    decay : float
        In ``(0, 1)``; ``1 / (1 - decay)`` is roughly the number of steps averaged over.

    Examples
    --------
    >>> import torch
    >>> layer = torch.nn.Linear(2, 1)
    >>> ema = ExponentialAverage(layer.parameters(), decay=0.9)
    >>> with torch.no_grad():
    ...     layer.weight.add_(1.0)
    >>> ema.update()
    >>> ema.swap()  # the layer now holds the average; swap() again restores the live weights
    >>> ema.swap()
    """

    def __init__(self, params: Iterable[torch.nn.Parameter], *, decay: float) -> None:
        if not 0.0 < decay < 1.0:
            raise ValueError(f"{decay=} must be in (0, 1)")
        self.params: list[torch.Tensor] = [p for p in params if p.requires_grad]
        self.decay = float(decay)
        self.shadow = [p.detach().clone() for p in self.params]
        self.t = 0

    @torch.no_grad()
    def update(self) -> None:
        """Fold the current parameters into the average (call after every optimiser step)."""
        self.t += 1
        d = min(self.decay, (1.0 + self.t) / (10.0 + self.t))
        torch._foreach_lerp_(self.shadow, [p.detach() for p in self.params], 1.0 - d)

    @torch.no_grad()
    def swap(self) -> None:
        """Exchange the parameters and the average (calling it twice restores both)."""
        for p, s in zip(self.params, self.shadow, strict=True):
            live = p.detach().clone()
            p.copy_(s)
            s.copy_(live)

    def state_dict(self) -> dict[str, Any]:
        return {"decay": self.decay, "t": self.t, "shadow": [s.clone() for s in self.shadow]}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if len(state["shadow"]) != len(self.shadow):
            raise ValueError(
                f"weight average of {len(state['shadow'])} parameters, "
                f"this model has {len(self.shadow)}"
            )
        self.decay = float(state["decay"])
        self.t = int(state["t"])
        for s, saved in zip(self.shadow, state["shadow"], strict=True):
            s.copy_(saved)
