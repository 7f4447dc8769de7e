"""Explanations of a fitted estimator: ``explain(X)``, the global importances of a fit, and the
column selector and background rows a fit keeps for them.

:class:`Explaining` is a mixin of :class:`~tabsparse.estimators._base.TabNetBase`: it reads the
fitted ``network_``, ``encoder_`` and ``device_`` and the host's ``_tensor_data`` and
``_encoded_blocks`` (encoding ``X`` block by block); the math of masks and importances lives in
the core (:mod:`tabsparse.nn`, :mod:`tabsparse.importance`), of the selector in
:mod:`tabsparse.training.selection` and of Shapley values in :mod:`tabsparse.training.shapley`.
"""

from __future__ import annotations

import math
import numbers
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted

import tabsparse.data.sparse as _sparse
from tabsparse.explain import Explanation
from tabsparse.importance import global_importances, sum_to_columns
from tabsparse.nn.network import TabNet
from tabsparse.training import TensorData, predict_outputs
from tabsparse.training.places import ColumnPlace
from tabsparse.training.selection import (
    SELECTION_BUDGET,
    SelectorNet,
    fit_selector,
    selection_probabilities,
)
from tabsparse.training.shapley import exact_shapley, sampled_shapley

__all__ = ["IMPORTANCE_SAMPLE", "Explaining"]

IMPORTANCE_SAMPLE = 8192  # rows used for feature_importances_ (bounded: never a pass over all rows)
#: Training rows a fitted model keeps as the default background of its attributions.
BACKGROUND_ROWS = 64
#: The most rows a background passed to ``explain`` may have.
MAX_BACKGROUND = 4096
#: Forward passes per row up to which ``n_permutations="auto"`` computes exact Shapley values,
#: and beyond which ``"exact"`` is refused: ``2**p * n_background``.
EXACT_EVALUATIONS = 2048
#: Forward passes per row beyond which ``n_permutations="exact"`` is refused.
EXACT_LIMIT = 2**24
#: Random orders per row of ``n_permutations="auto"`` when exact values cost more.
DEFAULT_PERMUTATIONS = 64
#: The column selector a fit learns (``selector_``): at most this many Adam steps ...
SELECTOR_STEPS = 50
#: ... of this learning rate, on this many rows each ...
SELECTOR_LR = 1e-2
SELECTOR_BATCH = 256
#: ... and at most this share of the rows the fit trained on (epochs times training rows), so
#: that it adds little to a short fit (``benchmarks/selector_budget.py`` measures the choice).
SELECTOR_SHARE = 0.12
#: Training rows the selector learns on and draws replacement values from.
SELECTOR_ROWS = 4096


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
        per_row = self._to_columns(self._explain_tensors(sample, members=True)[0])
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

    def explain(
        self,
        X: Any,
        *,
        attributions: bool = False,
        background: Any = None,
        n_permutations: int | str = "auto",
        random_state: Any = 0,
        datetime_parts: bool = False,
    ) -> Explanation:
        """Explain the predictions for the rows of ``X``: which columns each row's prediction
        needs (``selected``), what each decision step read (``masks``, ``importances``) and,
        with ``attributions=True``, how much and which way each column moved each prediction.

        ``selected`` comes from the column selector the fit learned (``selector_``: a small
        network trained, against the fitted model, to keep the fewest columns whose values
        hold a row's prediction when every other column is replaced by a training row's;
        :mod:`tabsparse.training.selection`): one small forward pass per row. A model without
        one (a fit whose outputs no column moves) selects where the masks read.

        Parameters
        ----------
        X : table of shape (n_samples, n_features)
            The rows to explain.
        attributions : bool
            Also compute Shapley values of the interventional game over the input columns
            (``Explanation.attributions``, ``base_values``, ``attributions_std``): signed, in
            the units of the model's raw output (a binary classifier: the log-odds of
            ``classes_[1]``; multi-class: the logits centred over the classes, one set per
            class; a regressor: the prediction; multi-label: each label's logit, centred within
            the sparsemax for ``multilabel_loss="sparsemax"``; multi-task: each task's logits
            centred), adding up per row: ``base_values + attributions.sum(axis=1)`` is the raw
            output. They cost forward passes: exact, ``2**p * n_background`` per row for ``p``
            columns; sampled, ``n_permutations * (p - 1)`` (:mod:`tabsparse.training.shapley`).
            The model is read as a function of the table's columns: a column's attribution
            is what replacing its values by a background row's changes on average, whatever
            other columns are correlated with it.
        background : table, optional
            The rows whose values replace a column's (the game's reference distribution; at
            least one row). None: ``background_``, the sample of training rows kept at fit.
        n_permutations : "auto", "exact" or int
            How the Shapley values are computed. ``"exact"``: by enumerating every coalition of
            columns (refused beyond :data:`EXACT_LIMIT` forward passes per row). An even
            int: the mean over that many random orders of the columns per row, walked in
            antithetic pairs, each pair with its own background row; unbiased, with a standard
            error per value (``attributions_std``), and adding up exactly. ``"auto"``: exact
            when it costs at most :data:`EXACT_EVALUATIONS` passes per row (``2**p *
            n_background``: up to 5 columns with the default background), else
            :data:`DEFAULT_PERMUTATIONS` orders.
        random_state : int, RandomState instance or None
            Seeds the sampled orders and background rows.
        datetime_parts : bool
            With ``datetime_features="expand"``: one entry per part of an expanded datetime
            column (``"<name>__<part>"``, the network's features ``encoder_.feature_names``)
            instead of one per input column (the parts summed back to their column for
            importances and masks, and one player together for attributions: the default).
            Without expanded columns both are the same.

        Returns
        -------
        Explanation
            ``selected`` and ``selection_probabilities`` (n_samples, n_columns);
            ``importances`` (n_samples, n_columns), rows summing to one; ``masks``
            (n_steps, n_samples, n_columns); ``feature_names``: the input columns
            (``feature_names_in_``, or ``x0, x1, ...``), or with ``datetime_parts`` the
            network's features; with ``attributions``, also ``attributions``,
            ``attributions_std`` (n_samples, n_columns) or, for several outputs, (n_samples,
            n_columns, n_outputs), ``base_values`` (n_samples,) or (n_samples, n_outputs),
            ``output_names`` and ``data`` (the rows of ``X``, for plots).
        """
        check_is_fitted(self)
        blocks = self._encoded_blocks(X)
        selector = self._selector_net()
        parts, chosen = [], []
        for enc in blocks:
            data = self._tensor_data(enc, None, None, self.device_)
            parts.append(self._explain_tensors(data))
            if selector is not None:
                chosen.append(selection_probabilities(self.network_, selector, data).numpy())
        if len(parts) == 1:  # one block: no copy of the masks
            importances, masks = parts[0]
        else:
            importances = np.concatenate([p[0] for p in parts])
            masks = np.concatenate([p[1] for p in parts], axis=1)
        probabilities = np.concatenate(chosen) if chosen else None
        if datetime_parts:
            names = list(self.encoder_.feature_names)
            if probabilities is not None:  # a part is needed where its column is
                probabilities = probabilities[:, list(self.encoder_.input_positions)]
        else:
            importances, masks = self._to_columns(importances), self._to_columns(masks)
            names = list(self.encoder_.input_names)
        if not attributions:
            return Explanation(importances, masks, names, selection_probabilities=probabilities)
        values, base, std = self._attributions(
            blocks, background, n_permutations, random_state, datetime_parts
        )
        target = self._target()  # type: ignore[attr-defined]
        return Explanation(
            importances,
            masks,
            names,
            selection_probabilities=probabilities,
            attributions=values,
            base_values=base,
            attributions_std=std,
            output_names=target.explained_names(),
            data=None if datetime_parts else _display_rows(X, len(importances)),
        )

    def _attributions(
        self,
        blocks: list[Any],
        background: Any,
        n_permutations: int | str,
        random_state: Any,
        datetime_parts: bool,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Shapley values ``(n, p[, k])``, base values ``(n[, k])`` and standard errors of the
        encoded ``blocks``: the outputs of one column dropped when the model has one."""
        self._check_explainable("explain(attributions=True)")
        pool = self._background_rows(background)
        players = self._input_columns(datetime_parts)
        exact = _exact(n_permutations, len(players), len(pool))
        generator = _generator(random_state)
        output = self._target().explained  # type: ignore[attr-defined]
        results = []
        for enc in blocks:
            data = self._tensor_data(enc, None, None, self.device_)
            if exact:
                results.append(exact_shapley(self.network_, output, data, pool, players))
            else:
                n = DEFAULT_PERMUTATIONS if n_permutations == "auto" else int(n_permutations)
                results.append(
                    sampled_shapley(
                        self.network_,
                        output,
                        data,
                        pool,
                        players,
                        n_permutations=n,
                        generator=generator,
                    )
                )
        values = torch.cat([r.values for r in results]).numpy()
        std = torch.cat([r.std for r in results]).numpy()
        base = np.broadcast_to(results[0].base.numpy(), (len(values), values.shape[2])).copy()
        if values.shape[2] == 1:  # one output: (n, p) and (n,), as LightGBM and shap give
            return values[:, :, 0], base[:, 0], std[:, :, 0]
        return values, base, std

    def _background_rows(self, background: Any) -> TensorData:
        """The game's background rows: ``background`` encoded, or ``background_``."""
        if background is None:
            kept = getattr(self, "background_", None)
            if kept is None:
                raise ValueError(
                    "this model keeps no background rows (a model file written before "
                    "attributions): pass background= with a sample of the training rows"
                )
            return TensorData(
                numeric=torch.from_numpy(kept["numeric"]).to(self.device_),
                codes=torch.from_numpy(kept["codes"]).to(self.device_),
            )
        blocks = self._encoded_blocks(background)
        pool = self._tensor_data(blocks[0], None, None, self.device_)
        pool = pool.take(slice(0, len(pool)))  # a sparse block: dense rows
        if len(blocks) > 1 or len(pool) > MAX_BACKGROUND:
            raise ValueError(
                f"background has more than {MAX_BACKGROUND} rows: pass a sample of the "
                "training rows (its size sets the cost of exact attributions and none of the "
                "sampled ones)"
            )
        if len(pool) < 1:
            raise ValueError("background has no rows: pass at least one row")
        return pool

    def _keep_background(self, data: TensorData, rng: np.random.Generator) -> None:
        """``background_``: :data:`BACKGROUND_ROWS` rows of ``data`` drawn from ``rng``,
        encoded (a classifier or regressor only)."""
        if not isinstance(self.network_, TabNet):
            return
        n = len(data)
        idx = np.sort(rng.choice(n, size=min(n, BACKGROUND_ROWS), replace=False))
        rows = data.take(torch.from_numpy(idx).to(data.device))
        self.background_ = {
            "numeric": np.ascontiguousarray(rows.numeric.cpu().numpy(), dtype=np.float32),
            "codes": np.ascontiguousarray(rows.codes.cpu().numpy(), dtype=np.int64),
        }

    def _to_columns(self, per_feature: np.ndarray) -> np.ndarray:
        """Per-feature values (last axis: ``encoder_.feature_names``) summed to one per input
        column (:func:`tabsparse.importance.sum_to_columns`)."""
        enc = self.encoder_
        return sum_to_columns(per_feature, enc.input_positions, len(enc.input_names))

    def _check_explainable(self, method: str) -> None:
        check_is_fitted(self)
        if not isinstance(self.network_, TabNet):
            raise TypeError(
                f"{type(self).__name__} has no predictions to explain: {method} needs a "
                "classifier or a regressor"
            )

    def _input_columns(self, datetime_parts: bool = False) -> list[list[ColumnPlace]]:
        """Where each input column is in the network's inputs, in the table's order: one place
        each, except an expanded datetime column, which has one per part (with
        ``datetime_parts``, each part on its own)."""
        numeric = list(self.encoder_.numeric_columns)
        categorical = list(self.encoder_.categorical_columns)
        places: list[ColumnPlace] = [
            ("numeric", numeric.index(c)) if c in numeric else ("codes", categorical.index(c))
            for c in range(len(numeric) + len(categorical))
        ]
        if datetime_parts:
            return [[place] for place in places]
        owner = self.encoder_.input_positions
        return [
            [place for place, o in zip(places, owner, strict=True) if o == c]
            for c in range(len(self.encoder_.input_names))
        ]

    def _learn_selector(self, rows: TensorData, n_train: int, rng: np.random.Generator) -> None:
        """``selector_``: the column selector of ``explain(X).selected``, trained against the
        fitted network on up to :data:`SELECTOR_ROWS` of ``rows`` (training rows) drawn from
        ``rng`` (:mod:`tabsparse.training.selection`; a classifier or regressor only). None
        where the network's outputs do not depend on the columns (nothing to select)."""
        self.__dict__.pop("selector_", None)
        if not isinstance(self.network_, TabNet) or len(rows) < 2:
            return
        work = SELECTOR_SHARE * int(getattr(self, "n_iter_", 1)) * n_train / SELECTOR_BATCH
        steps = max(1, min(SELECTOR_STEPS, math.ceil(work)))
        n = len(rows)
        # at most one block of rows dense at a time (a sparse fit's promise)
        size = min(n, SELECTOR_ROWS, _sparse.SPARSE_BLOCK_ROWS)
        idx = np.sort(rng.choice(n, size=size, replace=False))
        pool = rows.take(torch.from_numpy(idx).to(rows.device))
        generator = torch.Generator().manual_seed(int(rng.integers(np.iinfo(np.int32).max)))
        try:
            net = fit_selector(
                self.network_,
                pool,
                self._input_columns(),
                budget=SELECTION_BUDGET,
                n_iter=steps,
                generator=generator,
                batch_size=SELECTOR_BATCH,
                lr=SELECTOR_LR,
            )
        except ValueError:  # outputs that no column moves: explain falls back to the masks
            return
        self.selector_ = net.state()

    def _selector_net(self) -> SelectorNet | None:
        """The fitted column selector on ``device_`` (None without one), checked against the
        network and the encoder (``ValueError`` for a ``selector_`` that does not fit them)."""
        state = getattr(self, "selector_", None)
        if state is None:
            return None
        if not isinstance(state, dict):
            raise ValueError("selector_ must be a dict of the selector's arrays and its scale")
        net = SelectorNet.from_state(state)
        n_columns = len(self.encoder_.input_names)
        owner = net.channel_column
        scale = state.get("scale")
        problems = [
            (
                net.layers[0].in_features != self.network_.inputs.output_dim,
                f"reads {net.layers[0].in_features} input channels, the network has "
                f"{self.network_.inputs.output_dim}",
            ),
            (net.n_columns != n_columns, f"gives {net.n_columns} columns, not {n_columns}"),
            (
                owner.dtype != torch.int64
                or owner.shape != (net.layers[0].in_features,)
                or bool(((owner < 0) | (owner >= n_columns)).any()),
                "channel_column must be one int64 column position per input channel",
            ),
            (
                any(
                    p.dtype != torch.float32 or not bool(torch.isfinite(p).all())
                    for p in net.parameters()
                ),
                "must hold finite float32 weights",
            ),
            (not (isinstance(scale, float) and 0 < scale < math.inf), "scale must be > 0"),
        ]
        for bad, message in problems:
            if bad:
                raise ValueError(f"selector_ {message}")
        return net.to(self.device_)


def _exact(n_permutations: Any, p: int, n_background: int) -> bool:
    """Whether ``n_permutations`` asks for exact values (``ValueError`` for a bad value or an
    exact computation beyond :data:`EXACT_LIMIT` passes per row)."""
    cost = 2**p * n_background if p < 64 else float("inf")
    if n_permutations == "auto":
        return cost <= EXACT_EVALUATIONS
    if n_permutations == "exact":
        if cost > EXACT_LIMIT:
            raise ValueError(
                f"exact attributions of {p} columns with {n_background} background rows cost "
                f"2**{p} * {n_background} forward passes per row: pass n_permutations= an even "
                "number (sampled attributions with standard errors) or fewer background rows"
            )
        return True
    if (
        isinstance(n_permutations, bool)
        or not isinstance(n_permutations, numbers.Integral)
        or n_permutations < 2
        or n_permutations % 2
    ):
        raise ValueError(
            f"n_permutations={n_permutations!r} must be 'auto', 'exact' or an even integer >= 2"
        )
    return False


def _display_rows(X: Any, n: int) -> Any:
    """The explained rows as an array for plots (a DataFrame's values, an object array when
    its dtypes mix), or None where ``X`` is not a table with one row per explanation."""
    try:
        import pandas as pd

        if isinstance(X, pd.DataFrame):
            values = X.to_numpy()
        elif hasattr(X, "toarray"):  # scipy sparse: not kept (it may be huge)
            return None
        else:
            values = np.asarray(X)
    except (TypeError, ValueError):  # a table numpy cannot read as one array: no display data
        return None
    return values if values.ndim == 2 and values.shape[0] == n else None


def _generator(random_state: Any) -> torch.Generator:
    seed = int(check_random_state(random_state).randint(np.iinfo(np.int32).max))
    return torch.Generator().manual_seed(seed)
