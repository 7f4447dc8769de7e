"""Explanations of a fitted estimator: ``explain(X)``, ``explain_effects(X)`` and the global
importances of a fit.

:class:`Explaining` is a mixin of :class:`~tabsparse.estimators._base.TabNetBase`: it reads the
fitted ``network_``, ``encoder_`` and ``device_`` and the host's ``_tensor_data`` and
``_encoded_blocks`` (encoding ``X`` block by block); the math of masks and importances lives in
the core (:mod:`tabsparse.nn`, :mod:`tabsparse.importance`).
"""

from __future__ import annotations

import numbers
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted

from tabsparse.explain import Effects, Explanation
from tabsparse.importance import MATERIAL_SHARE, global_importances
from tabsparse.nn.network import TabNet
from tabsparse.training import TensorData, predict_outputs
from tabsparse.training.effects import column_effects

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

        def _encode(self, X: Any, *, what: str = "X") -> Any: ...

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

    def explain_effects(
        self,
        X: Any,
        *,
        background: Any = None,
        n_draws: int = 8,
        material_share: float = MATERIAL_SHARE,
        random_state: Any = 0,
    ) -> Effects:
        """How far each column moves each row's prediction when it is replaced by values drawn
        from its marginal distribution.

        For each row of ``X`` and each column, ``n_draws`` values of that column are drawn
        from ``background``, stratified (the k-th from the k-th of ``n_draws`` equally likely
        slices of the column's distribution: :mod:`tabsparse.training.effects`), and put in the
        row's place; the effect is the mean size of the change of the model's outputs (a
        classifier's logits, centred within its softmax; a regressor's predictions). Where
        :meth:`explain` says which columns the decision steps *read*, this says which *moved*
        the prediction; with a shared first mask (``first_mask_ == "shared"``) a column no step
        reads in a row has an effect of exactly zero. Costs ``n_draws * n_features`` forward
        passes per row.

        Parameters
        ----------
        X : table of shape (n_samples, n_features)
            The rows to explain.
        background : table, optional
            The rows replacement values are drawn from: a sample of the training rows is the
            usual choice. None: the rows of ``X`` (which then needs at least two rows; a sparse
            ``X`` lends its first block of rows).
        n_draws : int
            Draws per row and column (>= 1).
        material_share : float
            The rule for :attr:`Effects.selected`: a column is selected in a row when its share
            of the row's effects is at least this.
        random_state : int, RandomState instance or None
            Seeds the draws.

        Returns
        -------
        Effects
            ``effects`` and ``importances`` (their shares per row) of shape (n_samples,
            n_features), ``feature_names``.
        """
        check_is_fitted(self)
        if not isinstance(self.network_, TabNet):
            raise TypeError(
                f"{type(self).__name__} has no predictions to explain: explain_effects needs a "
                "classifier or a regressor"
            )
        if isinstance(n_draws, bool) or not isinstance(n_draws, numbers.Integral) or n_draws < 1:
            raise ValueError(f"n_draws={n_draws!r} must be an integer >= 1")
        blocks = self._encoded_blocks(X)
        source = blocks[0] if background is None else self._encode(background, what="background")
        pool = self._tensor_data(source, None, None, self.device_)
        if len(pool) < 2:
            where = "X" if background is None else "background"
            raise ValueError(
                f"explain_effects draws replacement values from the rows of {where}, which has "
                f"{len(pool)} row(s); pass background= with at least 2 rows (e.g. a sample of "
                "the training rows)"
            )
        seed = int(check_random_state(random_state).randint(np.iinfo(np.int32).max))
        generator = torch.Generator().manual_seed(seed)
        numeric = list(self.encoder_.numeric_columns)
        categorical = list(self.encoder_.categorical_columns)
        places = [
            ("numeric", numeric.index(c)) if c in numeric else ("codes", categorical.index(c))
            for c in range(len(numeric) + len(categorical))
        ]
        parts = [
            column_effects(
                self.network_,
                self._tensor_data(enc, None, None, self.device_),
                pool,
                places,
                n_draws=int(n_draws),
                generator=generator,
            ).numpy()
            for enc in blocks
        ]
        effects = parts[0] if len(parts) == 1 else np.concatenate(parts)
        return Effects(effects, list(self.encoder_.feature_names), material_share)
