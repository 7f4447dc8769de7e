"""Regression targets: one or more outputs, an objective (the loss), scaled for the network.

The objective (:class:`Objective`) is one of HistGradientBoostingRegressor's loss names:

=================  ==========================  =============================  ==================
``loss``           ``y``                       the network predicts           predictions
=================  ==========================  =============================  ==================
squared_error      any number                  ``(y - mean) / std``           the mean
absolute_error     any number                  ``(y - mean) / std``           the median
huber              any number                  ``(y - mean) / std``           in between
quantile           any number                  ``(y - mean) / std``           the quantile(s)
poisson            ``y >= 0``                  ``log(mu / mean)``             the mean, ``> 0``
gamma              ``y > 0``                   ``log(mu / mean)``             the mean, ``> 0``
tweedie            ``y >= 0`` (``> 0`` for     ``log(mu / mean)``             the mean, ``> 0``
                   ``power >= 2``)
=================  ==========================  =============================  ==================

The scale statistics are computed relative to each column's largest magnitude (a power of two,
so exactly), which keeps targets near 1e300 from overflowing and near 1e-300 from underflowing.

An output that takes one value in the fitted ``y`` carries nothing a network could learn: its
``mean`` is that value exactly, its ``scale`` is 0 (the mark of a constant output, for any
loss), and it is predicted as that value exactly -- not the constant plus the network's small
residual output.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from sklearn.metrics import d2_pinball_score, r2_score
from sklearn.utils.validation import check_array
from torch import nn

from tabsparse.estimators._targets._base import Target
from tabsparse.io._values import is_int
from tabsparse.losses import gamma_deviance, pinball_loss, poisson_deviance, tweedie_deviance
from tabsparse.training import LossFn

__all__ = ["LOG_LINK_LOSSES", "LOSSES", "Objective", "Regression"]

LOSSES = (
    "squared_error",
    "absolute_error",
    "huber",
    "poisson",
    "gamma",
    "tweedie",
    "quantile",
)
LOG_LINK_LOSSES = frozenset({"poisson", "gamma", "tweedie"})
# Columns whose largest magnitude lies in [2**-400, 2**400] are scaled as they always were (their
# squares neither overflow nor underflow); others are divided by a power of two first.
_SAFE_EXPONENT = 400


@dataclass(frozen=True)
class Objective:
    """What a regressor minimises: ``loss`` and the parameter that loss takes.

    ``quantile`` is a float (one prediction per output) or a tuple of increasing floats
    (``predict`` returns one column per quantile); ``power`` is the Tweedie power;
    ``huber_delta`` is in units of the target's standard deviation. The other fields are None.
    """

    loss: str = "squared_error"
    quantile: float | tuple[float, ...] | None = None
    power: float | None = None
    huber_delta: float | None = None

    @classmethod
    def from_params(cls, loss: str, quantile: Any, power: float, huber_delta: float) -> Objective:
        """The objective of an estimator's parameters (``ValueError`` for inconsistent ones)."""
        if loss not in LOSSES:
            raise ValueError(f"loss={loss!r} must be one of {list(LOSSES)}")
        if loss == "quantile":
            return cls(loss, quantile=_check_quantile(quantile))
        if loss == "tweedie":
            if not float(power) >= 1.0:
                raise ValueError(
                    f"power={power!r} must be >= 1 for loss='tweedie' (1 is poisson, 2 gamma)"
                )
            return cls(loss, power=float(power))
        if loss == "huber":
            if not float(huber_delta) > 0.0:
                raise ValueError(f"huber_delta={huber_delta!r} must be > 0")
            return cls(loss, huber_delta=float(huber_delta))
        return cls(loss)

    @property
    def log_link(self) -> bool:
        return self.loss in LOG_LINK_LOSSES

    @property
    def quantiles(self) -> tuple[float, ...] | None:
        """The quantiles predicted side by side (several quantiles), else None."""
        return self.quantile if isinstance(self.quantile, tuple) else None

    def check_y(self, y2: np.ndarray, ndim: int, what: str = "y") -> None:
        """``ValueError`` naming the first value outside the loss's domain."""
        if self.quantiles is not None and y2.shape[1] != 1:
            raise ValueError(
                f"{what} must be 1-D for several quantiles ({list(self.quantiles)}), got "
                f"{y2.shape[1]} outputs; fit one model per output"
            )
        if not self.log_link:
            return
        strict = self.loss == "gamma" or (self.loss == "tweedie" and (self.power or 0) >= 2)
        bad = y2 <= 0 if strict else y2 < 0
        if bad.any():
            row, col = np.argwhere(bad)[0]
            where = f"row {row}" if ndim == 1 else f"row {row}, column {col}"
            need = "> 0" if strict else ">= 0"
            extra = f" with power={self.power}" if self.loss == "tweedie" else ""
            raise ValueError(
                f"{what} must be {need} for loss={self.loss!r}{extra}, got "
                f"{float(y2[row, col])!r} ({where})"
            )

    def loss_fn(self) -> LossFn:
        """The per-row loss of the network's raw outputs against the scaled target."""
        if self.loss == "squared_error":

            def squared_error(pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
                return ((pred - target) ** 2).mean(dim=1)

            return squared_error
        if self.loss == "absolute_error":
            return lambda pred, target: (pred - target).abs().mean(dim=1)
        if self.loss == "huber":
            delta = float(self.huber_delta or 1.0)
            return lambda pred, target: torch.nn.functional.huber_loss(
                pred, target, reduction="none", delta=delta
            ).mean(dim=1)
        if self.loss == "poisson":
            return poisson_deviance
        if self.loss == "gamma":
            return gamma_deviance
        if self.loss == "tweedie":
            power = float(self.power or 1.5)
            return lambda eta, target: tweedie_deviance(eta, target, power)
        qs = self.quantile if isinstance(self.quantile, tuple) else (float(self.quantile or 0.5),)
        q_cpu = torch.tensor(qs, dtype=torch.float32)

        def quantile(pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
            return pinball_loss(pred, target, q_cpu.to(pred.device, pred.dtype))

        return quantile

    def to_json(self) -> dict[str, Any]:
        q = list(self.quantile) if isinstance(self.quantile, tuple) else self.quantile
        return {
            "loss": self.loss,
            "quantile": q,
            "power": self.power,
            "huber_delta": self.huber_delta,
        }

    @classmethod
    def from_json(cls, doc: Any) -> Objective:
        if not isinstance(doc, dict) or set(doc) != {"loss", "quantile", "power", "huber_delta"}:
            raise ValueError(
                f"an objective must have the keys loss, quantile, power, huber_delta; got {doc!r}"
            )
        power, delta = doc["power"], doc["huber_delta"]
        obj = cls.from_params(
            doc["loss"],
            doc["quantile"],
            1.5 if power is None else power,
            1.0 if delta is None else delta,
        )
        if obj.to_json() != doc:
            raise ValueError(f"inconsistent objective {doc!r}")
        return obj


def _check_quantile(quantile: Any) -> float | tuple[float, ...]:
    if quantile is None:
        raise ValueError(
            "loss='quantile' needs quantile=: a float in (0, 1), or an increasing sequence of "
            "them for several quantiles at once"
        )

    def one(q: Any) -> float:
        ok = isinstance(q, (int, float, np.integer, np.floating)) and not isinstance(q, bool)
        if not ok or not 0.0 < float(q) < 1.0:
            raise ValueError(f"quantile={quantile!r}: every quantile must be a float in (0, 1)")
        return float(q)

    if isinstance(quantile, (str, bytes)) or not isinstance(quantile, (Sequence, np.ndarray)):
        return one(quantile)
    qs = tuple(one(q) for q in np.asarray(quantile, dtype=object).ravel())
    if len(qs) == 0 or any(b <= a for a, b in itertools.pairwise(qs)):
        raise ValueError(f"quantile={quantile!r} must be a non-empty, strictly increasing sequence")
    return qs


def _power_of_two(y2: np.ndarray) -> np.ndarray:
    """Per column, 1.0, or the power of two near the largest magnitude when that is extreme."""
    top = np.abs(y2).max(axis=0) if len(y2) else np.ones(y2.shape[1])
    exponent = np.frexp(np.where(top > 0, top, 1.0))[1]
    extreme = np.abs(exponent) > _SAFE_EXPONENT
    return np.where(extreme, np.ldexp(1.0, exponent), 1.0)


def constant_columns(y2: np.ndarray) -> np.ndarray:
    """Per column, whether every value equals the first (False for a column without rows)."""
    if len(y2) == 0:
        return np.zeros(y2.shape[1], dtype=bool)
    return np.asarray((y2 == y2[:1]).all(axis=0), dtype=bool)


def robust_mean_std(y2: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Column means and standard deviations, exact scalings of those of ``y2`` divided by a
    power of two where ``y2`` is extreme (so neither its squares overflow nor underflow)."""
    p = _power_of_two(y2)
    z = y2 / p
    return z.mean(axis=0) * p, z.std(axis=0) * p


class Regression(Target):
    """Numbers, 1-D (one output) or 2-D ``(n_samples, n_outputs)``, and an :class:`Objective`.

    Identity link (squared_error, absolute_error, huber, quantile): the network predicts the
    standardised target ``(y - mean) / scale`` per output (``scale`` 1 for a constant output).
    Log link (poisson, gamma, tweedie): ``mean`` is 0 and ``scale`` the mean of ``y`` (1 when
    that is 0), the network's output ``eta`` gives ``scale * exp(eta)``. A constant output
    (one value in ``y``) has ``scale`` 0 and ``mean`` that value, and is predicted as it
    exactly, whatever the network outputs. Centring would make
    the scaled target negative, where a log link cannot reach; dividing by a positive constant
    keeps it a log-link model (``log scale`` is an offset), multiplies every deviance by a
    constant (so it changes neither the minimiser nor which epoch early stopping picks) and
    starts training at the right level (``exp(0) = 1`` is the mean of ``y / scale``).
    Predictions are on the original scale, 1-D for a 1-D ``y`` and one quantile; with several
    quantiles ``(n_samples, n_quantiles)``, sorted along each row (quantiles never cross).
    """

    name = "regression"
    export_task = "regression"

    def __init__(
        self, mean: np.ndarray, scale: np.ndarray, ndim: int, objective: Objective | None = None
    ) -> None:
        self.mean = mean
        self.scale = scale
        self.ndim = ndim
        self.objective = Objective() if objective is None else objective
        self._explained_head: nn.Module | None = None

    @staticmethod
    def _as_2d(y: Any) -> tuple[np.ndarray, int]:
        y = check_array(
            y, ensure_2d=False, dtype=np.float64, ensure_all_finite=True, input_name="y"
        )
        if y.ndim not in (1, 2):
            raise ValueError(f"y must be 1-D or 2-D, got shape {y.shape}")
        return y.reshape(len(y), -1), y.ndim

    @classmethod
    def fit(cls, y: Any, objective: Objective | None = None) -> tuple[Regression, np.ndarray]:
        objective = Objective() if objective is None else objective
        y2, ndim = cls._as_2d(y)
        objective.check_y(y2, ndim)
        mean, std = robust_mean_std(y2)
        constant = constant_columns(y2)
        if objective.log_link:
            centre, scale = np.zeros_like(mean), np.where(mean > 0, mean, 1.0)
        else:
            centre, scale = mean, np.where(std > 0, std, 1.0)
        if constant.any():  # the value itself, not a rounded mean of its copies
            centre = np.where(constant, y2[0], centre)
            scale = np.where(constant, 0.0, scale)
        target = cls(centre, scale, ndim, objective)
        return target, target._standardise(y2)

    def encode(self, y: Any) -> np.ndarray:
        y2, ndim = self._as_2d(y)
        if y2.shape[1] != self.n_outputs:
            raise ValueError(f"y has {y2.shape[1]} outputs, but the model has {self.n_outputs}")
        self.objective.check_y(y2, ndim)
        return self._standardise(y2)

    @property
    def constant(self) -> np.ndarray:
        """Per output, whether it was constant at fit (marked by a scale of 0)."""
        return np.asarray(self.scale == 0, dtype=bool)

    def _affine(self) -> tuple[np.ndarray, np.ndarray]:
        """``(shift, divisor)`` of the network's target ``(y - shift) / divisor``: ``mean`` and
        ``scale``, except for a constant output, trained towards 0 (identity link) or 1 (log
        link, the constant's ``y / mean``; 0 for a constant 0)."""
        constant = self.constant
        if not constant.any():
            return self.mean, self.scale
        if self.objective.log_link:
            shift = np.where(constant, 0.0, self.mean)
            divisor = np.where(constant, np.where(self.mean > 0, self.mean, 1.0), self.scale)
            return shift, divisor
        return self.mean, np.where(constant, 1.0, self.scale)

    def _standardise(self, y2: np.ndarray) -> np.ndarray:
        shift, divisor = self._affine()
        return ((y2 - shift) / divisor).astype(np.float32)

    def _destandardise(self, z: np.ndarray) -> np.ndarray:
        shift, divisor = self._affine()
        out = z.astype(np.float64) * divisor + shift
        constant = self.constant
        if constant.any():  # broadcast over the quantiles of a single output as well
            out = np.where(constant, self.mean, out)
        return out[:, 0] if self.ndim == 1 and self.objective.quantiles is None else out

    def unscale(self, z: np.ndarray) -> np.ndarray:
        """Network outputs to predictions on the original scale (link, scale, sorted
        quantiles)."""
        z = z.astype(np.float64)
        if self.objective.log_link:
            z = np.exp(z)
        if self.objective.quantiles is not None:
            z = np.sort(z, axis=1)
        return self._destandardise(z)

    @property
    def n_outputs(self) -> int:
        return len(self.mean)

    @property
    def n_network_outputs(self) -> int:
        qs = self.objective.quantiles
        return self.n_outputs if qs is None else len(qs)

    def loss(self) -> LossFn:
        return self.objective.loss_fn()

    def tensor(self, encoded: np.ndarray, device: torch.device) -> torch.Tensor:
        return torch.from_numpy(np.ascontiguousarray(encoded, dtype=np.float32)).to(device)

    def explained(self, logits: torch.Tensor) -> torch.Tensor:
        """The predictions on ``y``'s scale, ``(m, n_outputs)`` (one column per quantile)."""
        if self._explained_head is None:  # built once: attributions call this per batch
            self._explained_head = self.serving_head()
        head = self._explained_head.to(logits.device)
        return head(logits).reshape(logits.shape[0], -1)  # type: ignore[no-any-return]

    def explained_names(self) -> list[str]:
        qs = self.objective.quantiles
        if qs is not None:
            return [f"q{q:g}" for q in qs]
        return [str(j) for j in range(self.n_outputs)]

    def outputs(self, logits: torch.Tensor) -> dict[str, Any]:
        return {"predict": self.unscale(logits.float().cpu().numpy())}

    def true_values(self, target: torch.Tensor) -> np.ndarray:
        shift, divisor = self._affine()
        y = target.cpu().numpy().astype(np.float64) * divisor + shift
        return y[:, 0] if self.ndim == 1 else y

    def score(self, y: Any, y_pred: Any, sample_weight: Any = None) -> float:
        """R2, as :meth:`sklearn.base.RegressorMixin.score`, computed on ``y`` and ``y_pred``
        divided by a power of two where they are extreme (so 1e300 targets do not overflow);
        with several quantiles, the mean over them of :func:`sklearn.metrics.d2_pinball_score`
        (the R2 of the pinball loss)."""
        y_arr = np.asarray(y, dtype=np.float64)
        pred = np.asarray(y_pred, dtype=np.float64)
        p = float(_power_of_two(y_arr.reshape(-1, 1))[0])
        qs = self.objective.quantiles
        if qs is None:
            return float(r2_score(y_arr / p, pred / p, sample_weight=sample_weight))
        scores = [
            d2_pinball_score(y_arr / p, pred[:, j] / p, sample_weight=sample_weight, alpha=q)
            for j, q in enumerate(qs)
        ]
        return float(np.mean(scores))

    def attributes(self) -> dict[str, Any]:
        return {
            "n_outputs_": self.n_outputs,
            "target_mean_": self.mean,
            "target_scale_": self.scale,
            "_y_ndim": self.ndim,
            "_objective": self.objective.to_json(),
        }

    @classmethod
    def from_attributes(cls, estimator: Any) -> Regression:
        """The target of a fitted regressor (squared_error when it has no ``_objective``, as
        in model files from before objectives)."""
        doc = getattr(estimator, "_objective", None)
        objective = None if doc is None else Objective.from_json(doc)
        return cls(estimator.target_mean_, estimator.target_scale_, estimator._y_ndim, objective)

    @classmethod
    def check_attributes(cls, estimator: Any) -> None:
        """Finite float scalings of shape ``(n_outputs_,)``, a positive scale (0 for a constant
        output), ``_y_ndim`` 1 or 2, and an ``_objective`` (squared_error when absent) that
        fits the scaling."""
        n = estimator.n_outputs_
        if not is_int(n) or n < 1:
            raise ValueError(f"n_outputs_={n!r} must be an integer >= 1")
        for name in ("target_mean_", "target_scale_"):
            v = getattr(estimator, name)
            if not isinstance(v, np.ndarray) or v.dtype.kind != "f" or v.shape != (n,):
                raise ValueError(f"{name} must be a float array of shape ({n},)")
            if not np.all(np.isfinite(v)):
                raise ValueError(f"{name} must be finite")
        if not np.all(estimator.target_scale_ >= 0):
            raise ValueError("target_scale_ must be positive (or 0 for a constant output)")
        ndim = estimator._y_ndim
        if ndim not in (1, 2) or isinstance(ndim, bool):
            raise ValueError(f"_y_ndim={ndim!r} must be 1 or 2")
        if ndim == 1 and n != 1:
            raise ValueError("_y_ndim=1 needs n_outputs_=1")
        if hasattr(estimator, "_objective"):  # files from before objectives are squared_error
            check_scaling(
                cls.from_attributes(estimator).objective,
                estimator.target_mean_,
                n,
                estimator.target_scale_,
            )

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.name,
            "ndim": self.ndim,
            "mean": [float(v) for v in self.mean],
            "scale": [float(v) for v in self.scale],
            "objective": self.objective.to_json(),
        }

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> Regression:
        ndim = doc.get("ndim")
        mean, scale = doc.get("mean"), doc.get("scale")
        if ndim not in (1, 2) or isinstance(ndim, bool):
            raise ValueError(f"ndim={ndim!r} must be 1 or 2")
        ok = (
            isinstance(mean, list)
            and isinstance(scale, list)
            and len(mean) == len(scale) >= 1
            and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in mean + scale)
        )
        if not ok:
            raise ValueError("mean and scale must be lists of numbers of the same length >= 1")
        m, s = np.asarray(mean, dtype=np.float64), np.asarray(scale, dtype=np.float64)
        if not (np.all(np.isfinite(m)) and np.all(np.isfinite(s)) and np.all(s >= 0)):
            raise ValueError("mean must be finite and scale finite and positive (0: constant)")
        if ndim == 1 and len(m) != 1:
            raise ValueError("ndim=1 needs one output")
        objective = Objective.from_json(doc["objective"]) if "objective" in doc else None
        if objective is not None:
            check_scaling(objective, m, len(m), s)
        return cls(m, s, int(ndim), objective)

    def serving_head(self) -> nn.Module:
        """The traceable output transform for export: raw outputs to predictions (float64)."""
        return RegressionHead(self)

    def serve(self, logits: torch.Tensor) -> torch.Tensor:
        return self.serving_head().to(logits.device)(logits)  # type: ignore[no-any-return]

    def export_spec(self) -> dict[str, Any]:
        qs = self.objective.quantiles
        return {
            "n_outputs": self.n_outputs,
            "ndim": self.ndim,
            "mean": [float(v) for v in self.mean],
            "scale": [float(v) for v in self.scale],
            "loss": self.objective.loss,
            "link": "log" if self.objective.log_link else "identity",
            "quantiles": None if qs is None else list(qs),
        }

    def export_sections(self) -> dict[str, Any]:
        qs = self.objective.quantiles
        return {
            "outputs": {
                "name": "predictions",
                "dtype": "float64",
                "shape": ["batch", self.n_outputs if qs is None else len(qs)],
                "description": "predictions on the original target scale (column 0 is the "
                "prediction when the model was fitted on a 1-D target; one column per entry of "
                "'target.quantiles' when that is a list)",
            },
            "classes": None,
            "class_types": None,
            "target": self.export_spec(),
        }


def check_scaling(
    objective: Objective, mean: np.ndarray, n_outputs: int, scale: np.ndarray | None = None
) -> None:
    """``ValueError`` when the fitted scaling cannot belong to ``objective`` (a log link has a
    mean of 0, except for constant outputs: ``scale`` 0)."""
    varying = np.ones(np.shape(mean), dtype=bool) if scale is None else np.asarray(scale) != 0
    if objective.log_link and np.any((mean != 0) & varying):
        raise ValueError(
            f"a log-link objective ({objective.loss}) has target_mean_ 0 (except for constant "
            "outputs, whose target_scale_ is 0)"
        )
    if objective.quantiles is not None and n_outputs != 1:
        raise ValueError("several quantiles need one output")


class RegressionHead(nn.Module):
    """Raw network outputs to predictions, as :meth:`Regression.unscale` (float64, 2-D)."""

    mean: torch.Tensor
    scale: torch.Tensor
    constant: torch.Tensor
    is_constant: torch.Tensor

    def __init__(self, target: Regression) -> None:
        super().__init__()
        self.log_link = target.objective.log_link
        self.sort = target.objective.quantiles is not None
        self.register_buffer(
            "mean", torch.as_tensor(target.mean, dtype=torch.float64).reshape(1, -1)
        )
        shift, divisor = target._affine()
        self.has_constant = bool(target.constant.any())
        self.register_buffer("mean", torch.as_tensor(shift, dtype=torch.float64).reshape(1, -1))
        self.register_buffer("scale", torch.as_tensor(divisor, dtype=torch.float64).reshape(1, -1))
        self.register_buffer(
            "constant", torch.as_tensor(target.mean, dtype=torch.float64).reshape(1, -1)
        )
        self.register_buffer(
            "is_constant", torch.as_tensor(target.constant, dtype=torch.bool).reshape(1, -1)
        )

    def forward(self, logits: torch.Tensor) -> torch.Tensor:
        z = logits.to(torch.float64)
        if self.log_link:
            z = torch.exp(z)
        if self.sort:
            z = torch.sort(z, dim=1).values
        out = z * self.scale + self.mean
        if self.has_constant:  # constant outputs are their value, whatever the network says
            out = torch.where(self.is_constant, self.constant, out)
        return out
