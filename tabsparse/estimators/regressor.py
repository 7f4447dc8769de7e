"""TabNetRegressor: single- and multi-output regression on standardised targets."""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.base import RegressorMixin

from tabsparse.estimators._supervised import TabNetSupervised
from tabsparse.estimators._targets import Regression, Target


class TabNetRegressor(RegressorMixin, TabNetSupervised):
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

    _target_attributes = ("n_outputs_", "target_mean_", "target_scale_", "_y_ndim")

    def _target_kind_for(self, y: Any) -> type[Target]:
        return Regression

    def predict(self, X: Any) -> np.ndarray:
        """Predictions: (n_samples,) for a 1-D ``y`` at fit, else (n_samples, n_outputs)."""
        return self._outputs_from_logits(self._predict_logits(X))["predict"]

    def __sklearn_tags__(self):  # type: ignore[no-untyped-def]
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        return tags
