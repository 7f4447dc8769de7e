"""Explanations of a fitted estimator: ``explain(X)`` and the global importances of a fit.

:class:`Explaining` is a mixin of :class:`~tabsparse.estimators._base.TabNetBase`: it reads the
fitted ``network_``, ``encoder_`` and ``device_`` and the host's ``_tensor_data`` and
``_encoded_blocks`` (encoding ``X`` block by block); the math of masks and importances lives in
the core (:mod:`tabsparse.nn`, :mod:`tabsparse.importance`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from sklearn.utils.validation import check_is_fitted

from tabsparse.explain import Explanation
from tabsparse.importance import global_importances
from tabsparse.training import TensorData, predict_outputs

__all__ = ["IMPORTANCE_SAMPLE", "Explaining"]

IMPORTANCE_SAMPLE = 8192  # rows used for feature_importances_ (bounded: never a pass over all rows)


class Explaining:
    """``explain`` and the importances computed at the end of a fit (see the module docstring)."""

    if TYPE_CHECKING:  # provided by the estimator this is mixed into
        network_: Any
        encoder_: Any
        device_: torch.device

        def _tensor_data(self, enc: Any, y: Any, weight: Any, device: Any) -> TensorData: ...

        def _encoded_blocks(self, X: Any) -> list[Any]: ...

    def _importances_on_sample(
        self, data: TensorData, rng: np.random.Generator
    ) -> tuple[np.ndarray, np.ndarray]:
        """``feature_importances_`` and ``feature_importances_std_``: the mean importance over
        up to :data:`IMPORTANCE_SAMPLE` rows of ``data`` drawn from ``rng`` (normalised to sum
        to one) and its standard error over those rows, or for an ensemble over its members
        (:func:`tabsparse.importance.global_importances`); both in the dtype of the masks."""
        n = len(data)
        idx = np.sort(rng.choice(n, size=min(n, IMPORTANCE_SAMPLE), replace=False))
        sample = data.take(torch.from_numpy(idx).to(data.device))
        per_row = self._explain_tensors(sample, members=True)[0]
        mean, std = global_importances(per_row)
        return mean.astype(per_row.dtype), std.astype(per_row.dtype)

    def _explain_tensors(
        self, data: TensorData, *, members: bool = False
    ) -> tuple[np.ndarray, np.ndarray]:
        """Per-row importances ``(n, n_features)`` and column masks ``(n_steps, n,
        n_features)``; with ``members``, each member's importances ``(n_members, n, n_features)``
        instead (one member: ``(1, n, n_features)``)."""
        net: Any = self.network_
        out = predict_outputs(net, data, with_masks=True)
        with torch.inference_mode():
            per_row = net.member_importances if members else net.importances
            importances = per_row(out.masks, out.step_importance)
            masks = net.column_masks(out.masks)
        return importances.cpu().numpy(), masks.cpu().numpy()

    def explain(self, X: Any) -> Explanation:
        """Which columns each decision step selected for each row of ``X``.

        Returns
        -------
        Explanation
            ``importances`` (n_samples, n_features), rows summing to one; ``masks``
            (n_steps, n_samples, n_features); ``feature_names``.
        """
        check_is_fitted(self)
        parts = [
            self._explain_tensors(self._tensor_data(enc, None, None, self.device_))
            for enc in self._encoded_blocks(X)
        ]
        if len(parts) == 1:  # one block: no copy of the masks
            importances, masks = parts[0]
        else:
            importances = np.concatenate([p[0] for p in parts])
            masks = np.concatenate([p[1] for p in parts], axis=1)
        return Explanation(importances, masks, list(self.encoder_.feature_names))
