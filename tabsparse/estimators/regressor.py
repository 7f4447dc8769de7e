"""TabNetRegressor: single- and multi-output regression on standardised targets."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from sklearn.base import RegressorMixin
from sklearn.utils.validation import check_array

from tabsparse.estimators._base import TabNetBase
from tabsparse.training import LossFn


class TabNetRegressor(RegressorMixin, TabNetBase):
    """TabNet regressor (Arik & Pfister) with sparsemax attention.

    Takes the same parameters as :class:`tabsparse.TabNetClassifier` (without
    ``class_weight``). Targets are standardised internally (per output) and predictions are
    returned on the original scale; a 1-D ``y`` gives 1-D predictions, a 2-D ``y`` gives
    ``(n_samples, n_outputs)``. The loss is the mean squared error.

    Attributes
    ----------
    n_outputs_ : int
    target_mean_, target_scale_ : ndarray of shape (n_outputs,)
        The standardisation applied to ``y``.

    The other fitted attributes (``n_features_in_``, ``feature_names_in_``,
    ``feature_importances_``, ``history_``, ``n_iter_``, ``best_iteration_``, ``device_``,
    ``compiled_``, ``network_``, ``encoder_``) are as for :class:`tabsparse.TabNetClassifier`.

    Examples
    --------
    >>> from sklearn.datasets import load_diabetes
    >>> X, y = load_diabetes(return_X_y=True, as_frame=True)
    >>> reg = TabNetRegressor(max_epochs=5, random_state=0).fit(X, y)
    >>> reg.predict(X.iloc[:3]).shape
    (3,)
    """

    def _prepare_target(self, y: Any, *, fitting: bool) -> np.ndarray:
        y = check_array(
            y, ensure_2d=False, dtype=np.float64, ensure_all_finite=True, input_name="y"
        )
        if y.ndim not in (1, 2):
            raise ValueError(f"y must be 1-D or 2-D, got shape {y.shape}")
        y2 = y.reshape(len(y), -1)
        if fitting:
            self._y_ndim = y.ndim
            self.n_outputs_ = y2.shape[1]
            self.target_mean_ = y2.mean(axis=0)
            scale = y2.std(axis=0)
            self.target_scale_ = np.where(scale > 0, scale, 1.0)
        elif y2.shape[1] != self.n_outputs_:
            raise ValueError(f"y has {y2.shape[1]} outputs, but the model has {self.n_outputs_}")
        return ((y2 - self.target_mean_) / self.target_scale_).astype(np.float32)

    def _n_outputs(self) -> int:
        return self.n_outputs_

    def _loss_fn(self) -> LossFn:
        def loss(pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
            return ((pred - target) ** 2).mean(dim=1)

        return loss

    def _target_tensor(self, y: np.ndarray, device: torch.device) -> torch.Tensor:
        return torch.from_numpy(np.ascontiguousarray(y, dtype=np.float32)).to(device)

    def _unscale(self, z: np.ndarray) -> np.ndarray:
        out = z.astype(np.float64) * self.target_scale_ + self.target_mean_
        return out[:, 0] if self._y_ndim == 1 else out

    def _target_for_scoring(self, target: torch.Tensor) -> np.ndarray:
        return self._unscale(target.cpu().numpy())

    def _outputs_from_logits(self, logits: torch.Tensor) -> dict[str, np.ndarray]:
        return {"predict": self._unscale(logits.float().cpu().numpy())}

    def predict(self, X: Any) -> np.ndarray:
        """Predictions: (n_samples,) for a 1-D ``y`` at fit, else (n_samples, n_outputs)."""
        return self._outputs_from_logits(self._predict_logits(X))["predict"]

    def __sklearn_tags__(self):  # type: ignore[no-untyped-def]
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        return tags
