"""AdamW and learning-rate schedules for the trainer, without ``torch.optim``.

Why not ``torch.optim``: the first optimiser a process creates imports ``torch._dynamo``, which
takes seconds — longer than a whole fit on many
tables, and paid again by every fresh process (scripts, the command line, joblib workers). The
update itself is the same: PyTorch's fused AdamW kernel (``torch._fused_adamw_``) where this torch
has it for the device, otherwise the same formula in ``torch._foreach_*`` operations;
``tests/test_optim.py`` checks both against ``torch.optim.AdamW`` and the schedules against
``torch.optim.lr_scheduler``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import torch

__all__ = ["AdamW", "Schedule"]


class AdamW:
    """AdamW (Loshchilov & Hutter) over a fixed list of parameters.

    Parameters
    ----------
    params : iterable of Parameter
    lr : float
    betas : (float, float)
    eps : float
    weight_decay : float
        Decoupled weight decay: ``p <- p * (1 - lr * weight_decay)`` before the Adam step.
    fused : bool or None
        Use PyTorch's fused kernel; None: when available for every parameter.
    flat : bool
        Lay the parameters (of each device and dtype) out as views of one contiguous buffer,
        and their gradients and moments likewise, so that zeroing the gradients, clipping their
        norm (:meth:`clip_grad_norm_`) and the update are one operation each instead of one per
        parameter (a TabNet has some sixty small parameters). Gradients are then zero-filled
        buffers rather than None, so every parameter is updated every step. The parameters stay
        views until :meth:`release`.
    """

    def __init__(
        self,
        params: Iterable[torch.nn.Parameter],
        *,
        lr: float,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        fused: bool | None = None,
        flat: bool = False,
    ) -> None:
        self.params: list[torch.Tensor] = [p for p in params if p.requires_grad]
        self.lr = float(lr)
        self.betas = (float(betas[0]), float(betas[1]))
        self.eps = float(eps)
        self.weight_decay = float(weight_decay)
        self.exp_avg = [
            torch.zeros_like(p, memory_format=torch.preserve_format) for p in self.params
        ]
        self.exp_avg_sq = [torch.zeros_like(p) for p in self.params]
        if fused is None:
            fused = hasattr(torch, "_fused_adamw_") and all(
                p.device.type in ("cpu", "cuda") and p.dtype in (torch.float32, torch.float64)
                for p in self.params
            )
        self.fused = fused
        # the fused kernel counts steps in one float32 tensor per parameter
        self._step_tensors = [torch.zeros((), device=p.device) for p in self.params]
        # flat mode: (parameter, gradient, exp_avg, exp_avg_sq, step) buffers per device and dtype
        self._flat: list[tuple[torch.Tensor, ...]] = []
        if flat and self.params:
            self._flatten()

    @torch.no_grad()
    def _flatten(self) -> None:
        for group in _by_device(self.params):
            params = [self.params[i] for i in group]
            buffers = [torch.cat([p.detach().reshape(-1) for p in params])]
            buffers += [torch.zeros_like(buffers[0]) for _ in range(3)]
            offset = 0
            for i, p in zip(group, params, strict=True):
                size = p.numel()
                views = [b[offset : offset + size].view_as(p) for b in buffers]
                views[2].copy_(self.exp_avg[i])
                views[3].copy_(self.exp_avg_sq[i])
                p.data, p.grad, self.exp_avg[i], self.exp_avg_sq[i] = views
                offset += size
            step = self._step_tensors[group[0]]
            for i in group:  # one counter, as every parameter of the group steps together
                self._step_tensors[i] = step
            self._flat.append((*buffers, step))

    @torch.no_grad()
    def release(self) -> None:
        """End flat mode: every parameter and moment gets its own storage again (so that
        pickling one parameter does not carry the others); gradients are dropped."""
        if not self._flat:
            return
        for i, p in enumerate(self.params):
            p.data = p.data.clone()
            p.grad = None
            self.exp_avg[i] = self.exp_avg[i].clone()
            self.exp_avg_sq[i] = self.exp_avg_sq[i].clone()
        self._flat = []

    @torch.no_grad()
    def reset_momentum(self, param: torch.Tensor, entries: torch.Tensor) -> None:
        """Zero the first moment of the ``entries`` (a boolean mask or indices) of ``param``,
        after an edit of those weights that their past gradients no longer describe. The second
        moment is kept: zeroing it would make their next steps huge (the bias correction counts
        every step of the fit)."""
        for i, p in enumerate(self.params):
            if p is param:
                self.exp_avg[i][entries] = 0.0
                return
        raise ValueError("the parameter is not one this optimiser updates")

    def zero_grad(self) -> None:
        if self._flat:
            for _, grad, *_rest in self._flat:
                grad.zero_()
            return
        for p in self.params:
            p.grad = None

    @torch.no_grad()
    def clip_grad_norm_(self, max_norm: float) -> torch.Tensor:
        """Scale the gradients so that their joint 2-norm is at most ``max_norm`` (as
        ``torch.nn.utils.clip_grad_norm_``, without a host synchronisation); return the norm."""
        if not self._flat:
            return torch.nn.utils.clip_grad_norm_(self.params, max_norm)
        norms = [torch.linalg.vector_norm(grad) for _, grad, *_rest in self._flat]
        total = norms[0] if len(norms) == 1 else torch.linalg.vector_norm(torch.stack(norms))
        coef = (max_norm / (total + 1e-6)).clamp_(max=1.0)
        for _, grad, *_rest in self._flat:
            grad.mul_(coef.to(grad.device))
        return total

    @torch.no_grad()
    def step(self) -> None:
        """One update of every parameter that has a gradient (in flat mode: of every buffer)."""
        if self._flat:
            columns = zip(*self._flat, strict=True)
            params, grads, exp_avg, exp_avg_sq, steps = (list(column) for column in columns)
        else:
            live = [i for i, p in enumerate(self.params) if p.grad is not None]
            if not live:
                return
            params = [self.params[i] for i in live]
            grads = [p.grad for p in params]  # type: ignore[misc]
            exp_avg = [self.exp_avg[i] for i in live]
            exp_avg_sq = [self.exp_avg_sq[i] for i in live]
            steps = [self._step_tensors[i] for i in live]
        beta1, beta2 = self.betas
        torch._foreach_add_(steps, 1.0)
        if self.fused:
            for device_group in _by_device(params):
                torch._fused_adamw_(
                    [params[j] for j in device_group],
                    [grads[j] for j in device_group],
                    [exp_avg[j] for j in device_group],
                    [exp_avg_sq[j] for j in device_group],
                    [],
                    [steps[j] for j in device_group],
                    amsgrad=False,
                    lr=self.lr,
                    beta1=beta1,
                    beta2=beta2,
                    weight_decay=self.weight_decay,
                    eps=self.eps,
                    maximize=False,
                )
            return
        t = float(steps[0])
        if self.weight_decay:
            torch._foreach_mul_(params, 1.0 - self.lr * self.weight_decay)
        torch._foreach_lerp_(exp_avg, grads, 1.0 - beta1)
        torch._foreach_mul_(exp_avg_sq, beta2)
        torch._foreach_addcmul_(exp_avg_sq, grads, grads, 1.0 - beta2)
        denom = torch._foreach_sqrt(exp_avg_sq)
        torch._foreach_div_(denom, math.sqrt(1.0 - beta2**t))
        torch._foreach_add_(denom, self.eps)
        torch._foreach_addcdiv_(params, exp_avg, denom, -self.lr / (1.0 - beta1**t))

    def state_dict(self) -> dict[str, Any]:
        return {
            "lr": self.lr,
            "betas": self.betas,
            "exp_avg": [t.clone() for t in self.exp_avg],
            "exp_avg_sq": [t.clone() for t in self.exp_avg_sq],
            "step_tensors": [t.clone() for t in self._step_tensors],
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if len(state["exp_avg"]) != len(self.params):
            raise ValueError(
                f"optimiser state for {len(state['exp_avg'])} parameters, "
                f"this model has {len(self.params)}"
            )
        self.lr = float(state["lr"])
        self.betas = (float(state["betas"][0]), float(state["betas"][1]))
        for mine, saved in (
            (self.exp_avg, state["exp_avg"]),
            (self.exp_avg_sq, state["exp_avg_sq"]),
            (self._step_tensors, state["step_tensors"]),
        ):
            for t, s in zip(mine, saved, strict=True):
                t.copy_(s)


def _by_device(params: list[torch.Tensor]) -> list[list[int]]:
    groups: dict[tuple[torch.device, torch.dtype], list[int]] = {}
    for j, p in enumerate(params):
        groups.setdefault((p.device, p.dtype), []).append(j)
    return list(groups.values())


#: The learning-rate schedules :class:`Schedule` knows (the ``lr_schedule`` values).
SCHEDULES = ("constant", "cosine", "onecycle", "exponential", "plateau")


class Schedule:
    """Learning rate (and Adam's ``beta1`` for one-cycle) as a function of the step.

    ``kind``: ``"constant"``; ``"cosine"`` (to 0 over ``total`` steps, like
    ``CosineAnnealingLR(T_max=total)``); ``"exponential"`` (``gamma`` per step); ``"onecycle"``
    (like ``OneCycleLR`` with its defaults: 30% warm-up from ``lr / 25``, cosine annealing to
    ``lr / 25e4``, ``beta1`` cycled 0.95 -> 0.85 -> 0.95); ``"plateau"`` (constant until the
    validation score stalls: :meth:`epoch_end` multiplies the rate by ``factor`` after
    ``patience`` epochs without improvement, like ``ReduceLROnPlateau``).
    """

    def __init__(
        self,
        optimizer: AdamW,
        kind: str,
        *,
        total: int,
        gamma: float = 1.0,
        patience: int = 4,
        factor: float = 0.2,
    ) -> None:
        if kind not in SCHEDULES:
            raise ValueError(f"unknown learning-rate schedule {kind!r}")
        self.optimizer = optimizer
        self.kind = kind
        self.total = max(1, total)
        self.gamma = gamma
        self.patience = max(1, patience)
        self.factor = factor
        self.base_lr = optimizer.lr
        self.t = 0
        self.scale = 1.0  # plateau: product of the reductions so far
        self.stalled = 0  # plateau: epochs without improvement since the last best or reduction
        self._apply()

    def epoch_end(self, improved: bool) -> None:
        """Tell the schedule whether the epoch improved the validation score (plateau only)."""
        if self.kind != "plateau":
            return
        self.stalled = 0 if improved else self.stalled + 1
        if self.stalled >= self.patience:
            self.scale *= self.factor
            self.stalled = 0
            self._apply()

    def step(self) -> None:
        self.t += 1
        self._apply()

    def _apply(self) -> None:
        lr, beta1 = self.values(self.t)
        self.optimizer.lr = lr
        if beta1 is not None:
            self.optimizer.betas = (beta1, self.optimizer.betas[1])

    def values(self, t: int) -> tuple[float, float | None]:
        """Learning rate and (one-cycle only) ``beta1`` at step ``t``."""
        base = self.base_lr
        if self.kind == "constant":
            return base, None
        if self.kind == "plateau":
            return base * self.scale, None
        if self.kind == "exponential":
            return base * self.gamma**t, None
        if self.kind == "cosine":
            return base * (1.0 + math.cos(math.pi * min(t, self.total) / self.total)) / 2.0, None
        initial, final = base / 25.0, base / 25.0 / 1e4
        warm_end = float(0.3 * self.total) - 1.0
        if t <= warm_end:
            pct = t / warm_end if warm_end > 0 else 1.0
            return _cos(initial, base, pct), _cos(0.95, 0.85, pct)
        pct = (t - warm_end) / (self.total - 1.0 - warm_end)
        return _cos(base, final, min(pct, 1.0)), _cos(0.85, 0.95, min(pct, 1.0))

    def state_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "t": self.t,
            "base_lr": self.base_lr,
            "total": self.total,
            "scale": self.scale,
            "stalled": self.stalled,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.t = int(state["t"])
        self.base_lr = float(state["base_lr"])
        self.scale = float(state.get("scale", 1.0))  # absent in checkpoints of earlier versions
        self.stalled = int(state.get("stalled", 0))
        self._apply()


def _cos(start: float, end: float, pct: float) -> float:
    return end + (start - end) / 2.0 * (math.cos(math.pi * pct) + 1.0)
