"""Regression targets: one or more outputs, standardised for the network."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from sklearn.metrics import r2_score
from sklearn.utils.validation import check_array

from tabsparse.estimators._targets._base import Target
from tabsparse.training import LossFn

__all__ = ["Regression"]


class Regression(Target):
    """Numbers, 1-D (one output) or 2-D ``(n_samples, n_outputs)``: the network predicts the
    standardised target (``(y - mean) / scale`` per output, ``scale`` 1 for a constant output)
    under the mean squared error; predictions are returned on the original scale, 1-D for a
    1-D ``y``."""

    name = "regression"
    export_task = "regression"

    def __init__(self, mean: np.ndarray, scale: np.ndarray, ndim: int) -> None:
        self.mean = mean
        self.scale = scale
        self.ndim = ndim

    @staticmethod
    def _as_2d(y: Any) -> tuple[np.ndarray, int]:
        y = check_array(
            y, ensure_2d=False, dtype=np.float64, ensure_all_finite=True, input_name="y"
        )
        if y.ndim not in (1, 2):
            raise ValueError(f"y must be 1-D or 2-D, got shape {y.shape}")
        return y.reshape(len(y), -1), y.ndim

    @classmethod
    def fit(cls, y: Any) -> tuple[Regression, np.ndarray]:
        y2, ndim = cls._as_2d(y)
        scale = y2.std(axis=0)
        target = cls(y2.mean(axis=0), np.where(scale > 0, scale, 1.0), ndim)
        return target, target._standardise(y2)

    def encode(self, y: Any) -> np.ndarray:
        y2, _ = self._as_2d(y)
        if y2.shape[1] != self.n_outputs:
            raise ValueError(f"y has {y2.shape[1]} outputs, but the model has {self.n_outputs}")
        return self._standardise(y2)

    def _standardise(self, y2: np.ndarray) -> np.ndarray:
        return ((y2 - self.mean) / self.scale).astype(np.float32)

    def unscale(self, z: np.ndarray) -> np.ndarray:
        """Network outputs (standardised) to predictions on the original scale."""
        out = z.astype(np.float64) * self.scale + self.mean
        return out[:, 0] if self.ndim == 1 else out

    @property
    def n_outputs(self) -> int:
        return len(self.mean)

    @property
    def n_network_outputs(self) -> int:
        return self.n_outputs

    def loss(self) -> LossFn:
        def squared_error(pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
            return ((pred - target) ** 2).mean(dim=1)

        return squared_error

    def tensor(self, encoded: np.ndarray, device: torch.device) -> torch.Tensor:
        return torch.from_numpy(np.ascontiguousarray(encoded, dtype=np.float32)).to(device)

    def outputs(self, logits: torch.Tensor) -> dict[str, Any]:
        return {"predict": self.unscale(logits.float().cpu().numpy())}

    def true_values(self, target: torch.Tensor) -> np.ndarray:
        return self.unscale(target.cpu().numpy())

    def score(self, y: Any, y_pred: Any, sample_weight: Any = None) -> float:
        """R2, as :meth:`sklearn.base.RegressorMixin.score`."""
        return float(r2_score(y, y_pred, sample_weight=sample_weight))

    def attributes(self) -> dict[str, Any]:
        return {
            "n_outputs_": self.n_outputs,
            "target_mean_": self.mean,
            "target_scale_": self.scale,
            "_y_ndim": self.ndim,
        }

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.name,
            "ndim": self.ndim,
            "mean": [float(v) for v in self.mean],
            "scale": [float(v) for v in self.scale],
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
        if not (np.all(np.isfinite(m)) and np.all(np.isfinite(s)) and np.all(s > 0)):
            raise ValueError("mean must be finite and scale finite and positive")
        if ndim == 1 and len(m) != 1:
            raise ValueError("ndim=1 needs one output")
        return cls(m, s, int(ndim))

    def serve(self, logits: torch.Tensor) -> torch.Tensor:
        mean = torch.as_tensor(self.mean, dtype=torch.float64, device=logits.device)
        scale = torch.as_tensor(self.scale, dtype=torch.float64, device=logits.device)
        return logits.to(torch.float64) * scale.reshape(1, -1) + mean.reshape(1, -1)

    def export_spec(self) -> dict[str, Any]:
        return {
            "n_outputs": self.n_outputs,
            "ndim": self.ndim,
            "mean": [float(v) for v in self.mean],
            "scale": [float(v) for v in self.scale],
        }
