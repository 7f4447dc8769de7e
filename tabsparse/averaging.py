"""Weight averaging for the trainer: an exponential moving average (EMA) of the parameters.

Pure torch. The trainer (its :class:`~tabsparse.training.WeightAveraging` callback) updates the
average after every optimiser step and evaluates (validation score, early stopping, the kept
weights) with the averaged parameters; training itself continues from the live ones. Averaging
smooths out the step-to-step noise of the last epochs, which with
early stopping are usually run at a learning rate that is still high.

Only parameters are averaged. Batch-norm statistics gathered during training describe the live
weights' activations, not the average's; the trainer recomputes them for the averaged weights
before it judges them (:meth:`tabsparse.training.Trainer.recompute_statistics`,
:func:`tabsparse.nn.ghost_bn.fresh_statistics`), as stochastic weight averaging does.
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
    decay reaches 0.9 after 80 steps, 0.99 after 890), so that early stopping does not compare
    averages dominated by the first epochs' weights.

    Parameters
    ----------
    params : iterable of Parameter
        Only those that require a gradient are averaged (buffers such as batch-norm statistics
        are not: the trainer recomputes them for the average).
    decay : float
        In ``(0, 1)``; ``1 / (1 - decay)`` is roughly the number of steps averaged over.

    Examples
    --------
    >>> import torch
    >>> layer = torch.nn.Linear(2, 1)
    >>> ema = ExponentialAverage(layer.parameters(), decay=0.9)
    >>> with torch.no_grad():
    ...     _ = layer.weight.add_(1.0)
    >>> ema.update()
    >>> ema.swap()  # the layer now holds the average; swap() again restores the live weights
    >>> ema.swap()
    """

    def __init__(self, params: Iterable[torch.nn.Parameter], *, decay: float) -> None:
        if not 0.0 < decay < 1.0:
            raise ValueError(f"{decay=} must be in (0, 1)")
        self.params: list[torch.Tensor] = [p for p in params if p.requires_grad]
        self.decay = float(decay)
        # parameters laid out back to back in one buffer (AdamW(flat=True) does so during a
        # fit) are averaged as that one buffer: one operation per update instead of one per
        # parameter; ``shadow`` then holds views of one buffer too
        self._flat = _adjacent(self.params)
        if self._flat is None:
            self._flat_shadow = None
            self.shadow = [p.detach().clone() for p in self.params]
        else:
            self._flat_shadow = self._flat.clone()
            self.shadow = _split(self._flat_shadow, self.params)
        self.t = 0

    @torch.no_grad()
    def update(self) -> None:
        """Fold the current parameters into the average (call after every optimiser step)."""
        self.t += 1
        d = min(self.decay, (1.0 + self.t) / (10.0 + self.t))
        if (
            self._flat is not None
            and self._flat_shadow is not None
            and _still_adjacent(self._flat, self.params)
        ):
            self._flat_shadow.lerp_(self._flat, 1.0 - d)
            return
        torch._foreach_lerp_(self.shadow, [p.detach() for p in self.params], 1.0 - d)

    @torch.no_grad()
    def swap(self) -> None:
        """Exchange the parameters and the average (calling it twice restores both)."""
        if (
            self._flat is not None
            and self._flat_shadow is not None
            and _still_adjacent(self._flat, self.params)
        ):
            live = self._flat.clone()
            self._flat.copy_(self._flat_shadow)
            self._flat_shadow.copy_(live)
            return
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


def _adjacent(params: list[torch.Tensor]) -> torch.Tensor | None:
    """A 1-d tensor viewing all of ``params`` when they are contiguous, back-to-back slices of
    one storage in this order (same dtype and device), else None."""
    if not params:
        return None
    first = params[0]
    offset = first.storage_offset()
    end = offset
    ptr = first.untyped_storage().data_ptr()
    for p in params:
        if (
            p.dtype != first.dtype
            or p.device != first.device
            or not p.is_contiguous()
            or p.untyped_storage().data_ptr() != ptr
            or p.storage_offset() != end
        ):
            return None
        end += p.numel()
    return first.detach().new_empty(0).set_(first.untyped_storage(), offset, (end - offset,), (1,))


def _still_adjacent(flat: torch.Tensor, params: list[torch.Tensor]) -> bool:
    """Whether ``params`` still live in ``flat`` (an optimiser may give them back their own
    storage at the end of a fit)."""
    return params[0].untyped_storage().data_ptr() == flat.untyped_storage().data_ptr()


def _split(flat: torch.Tensor, like: list[torch.Tensor]) -> list[torch.Tensor]:
    out, offset = [], 0
    for p in like:
        out.append(flat[offset : offset + p.numel()].view_as(p))
        offset += p.numel()
    return out
