"""Explanations of a fitted estimator: ``explain(X)``, ``explain_effects(X)`` and the global
importances of a fit.

:class:`Explaining` is a mixin of :class:`~tabsparse.estimators._base.TabNetBase`: it reads the
fitted ``network_``, ``encoder_`` and ``device_`` and the host's ``_tensor_data`` and
``_encoded_blocks`` (encoding ``X`` block by block); the math of masks and importances lives in
the core (:mod:`tabsparse.nn`, :mod:`tabsparse.importance`).
"""

from __future__ import annotations

import hashlib
import numbers
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted

from tabsparse.explain import Effects, Explanation, Selection
from tabsparse.importance import MATERIAL_SHARE, global_importances, sum_to_columns
from tabsparse.nn.network import TabNet
from tabsparse.training import TensorData, predict_outputs
from tabsparse.training.effects import ColumnPlace, column_effects
from tabsparse.training.selection import (
    SELECTION_BUDGET,
    SelectorNet,
    fit_selector,
    held_out_loss,
    residual_change,
    selection_probabilities,
)
from tabsparse.training.shapley import exact_shapley, sampled_shapley

__all__ = ["IMPORTANCE_SAMPLE", "ColumnSelector", "Explaining"]

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
        """Explain the predictions for the rows of ``X``: what each decision step read and,
        with ``attributions=True``, how much and which way each column moved each prediction.

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
        parts = [
            self._explain_tensors(self._tensor_data(enc, None, None, self.device_))
            for enc in blocks
        ]
        if len(parts) == 1:  # one block: no copy of the masks
            importances, masks = parts[0]
        else:
            importances = np.concatenate([p[0] for p in parts])
            masks = np.concatenate([p[1] for p in parts], axis=1)
        if datetime_parts:
            names = list(self.encoder_.feature_names)
        else:
            importances, masks = self._to_columns(importances), self._to_columns(masks)
            names = list(self.encoder_.input_names)
        if not attributions:
            return Explanation(importances, masks, names)
        values, base, std = self._attributions(
            blocks, background, n_permutations, random_state, datetime_parts
        )
        target = self._target()  # type: ignore[attr-defined]
        return Explanation(
            importances,
            masks,
            names,
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
        places = self._column_places()
        if datetime_parts:
            players = [[place] for place in places]
        else:
            owner = self.encoder_.input_positions
            players = [
                [place for place, o in zip(places, owner, strict=True) if o == c]
                for c in range(len(self.encoder_.input_names))
            ]
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
        self._check_explainable("explain_effects")
        _check_count("n_draws", n_draws)
        blocks = self._encoded_blocks(X)
        pool = self._draw_pool(blocks[0] if background is None else None, background)
        generator = _generator(random_state)
        places = self._column_places()
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

    def fit_selector(
        self,
        X: Any,
        *,
        budget: float = SELECTION_BUDGET,
        n_iter: int = 2400,
        n_selectors: int = 1,
        random_state: Any = 0,
    ) -> ColumnSelector:
        """Learn which columns each row's prediction needs: a small network trained on the rows
        of ``X`` against this fitted model, which stays as it is.

        The selector gives each column of a row a probability of being needed; it is trained
        so that keeping the row's needed columns and replacing every other column by a value
        drawn from ``X`` moves the prediction little, with a cost for each column kept
        (:mod:`tabsparse.training.selection`). Train it once, on a sample of the training rows
        (a few thousand or more), then explain any rows with :meth:`ColumnSelector.explain`
        (one small forward pass per row). Training costs ``n_iter`` steps of the model's
        forward and backward pass on 256 rows, about half a minute on one CPU thread for the
        default model on a table of 11 columns.

        Parameters
        ----------
        X : table of shape (n_samples, n_features)
            The rows the selector learns on, and whose values replace the unselected columns
            (at least 2 rows).
        budget : float
            The cost of a kept column, in units of how far a row's prediction moves on
            average when all of its columns are drawn: a column is worth keeping in a row
            when dropping it would move that row's prediction by more than about ``budget``
            of that. Larger keeps fewer columns.
        n_iter : int
            Training steps (>= 1).
        n_selectors : int
            Selectors trained one after the other with their own weights and draws (>= 1; each
            costs ``n_iter`` steps): :meth:`ColumnSelector.explain` averages their probabilities
            and reports their spread (``Selection.probabilities_std``), which says how much of a
            selection is the selector's own seed.
        random_state : int, RandomState instance or None
            Seeds the selectors' weights and the draws.

        Returns
        -------
        ColumnSelector
        """
        self._check_explainable("fit_selector")
        if not (isinstance(budget, numbers.Real) and not isinstance(budget, bool)) or not (
            0 < budget < float("inf")
        ):
            raise ValueError(f"budget={budget!r} must be a positive number")
        _check_count("n_iter", n_iter)
        _check_count("n_selectors", n_selectors)
        pool = self._draw_pool(None, X, what="X")
        generator = _generator(random_state)
        places = self._column_places()
        nets: list[SelectorNet] = []
        for _ in range(int(n_selectors)):
            nets.append(
                fit_selector(
                    self.network_,
                    pool,
                    places,
                    budget=float(budget),
                    n_iter=int(n_iter),
                    generator=generator,
                    scale=nets[0].scale if nets else None,
                )
            )
        return ColumnSelector(self, nets, pool, float(budget))

    def _check_explainable(self, method: str) -> None:
        check_is_fitted(self)
        if not isinstance(self.network_, TabNet):
            raise TypeError(
                f"{type(self).__name__} has no predictions to explain: {method} needs a "
                "classifier or a regressor"
            )

    def _draw_pool(self, own: Any, background: Any, *, what: str = "background") -> TensorData:
        """The rows replacement values are drawn from: ``own`` (the explained rows, encoded)
        when ``background`` is None, else ``background`` encoded; at least 2 rows."""
        source = own if background is None else self._encode(background, what=what)
        pool = self._tensor_data(source, None, None, self.device_)
        if len(pool) < 2:
            where, fix = ("X", "background= with ") if background is None else (what, "")
            raise ValueError(
                f"replacement values are drawn from the rows of {where}, which has "
                f"{len(pool)} row(s); pass {fix}at least 2 rows (e.g. a sample of the training "
                "rows)"
            )
        return pool

    def _column_places(self) -> list[ColumnPlace]:
        """Where each column of the table is in the network's inputs, in the table's order."""
        numeric = list(self.encoder_.numeric_columns)
        categorical = list(self.encoder_.categorical_columns)
        return [
            ("numeric", numeric.index(c)) if c in numeric else ("codes", categorical.index(c))
            for c in range(len(numeric) + len(categorical))
        ]


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


def _check_count(name: str, value: Any) -> None:
    """A ``ValueError`` unless ``value`` is an integer >= 1 (not a bool)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise ValueError(f"{name}={value!r} must be an integer >= 1")


def _generator(random_state: Any) -> torch.Generator:
    seed = int(check_random_state(random_state).randint(np.iinfo(np.int32).max))
    return torch.Generator().manual_seed(seed)


def _fingerprint(network: torch.nn.Module) -> str:
    """A digest of a network's weights and buffers: what tells a refitted estimator apart
    (also across pickling, which rebuilds the network object)."""
    digest = hashlib.sha1(usedforsecurity=False)
    for name, value in network.state_dict().items():
        digest.update(name.encode())
        digest.update(value.detach().cpu().contiguous().view(-1).view(torch.uint8).numpy())
    return digest.hexdigest()


class ColumnSelector:
    """A learned per-row column selector for a fitted estimator: what
    ``estimator.fit_selector(X)`` returns.

    Attributes
    ----------
    estimator : TabNetClassifier or TabNetRegressor
        The model it explains (not copied: refitting the estimator makes the selector stale).
    budget : float
        The ``budget`` it was trained with.
    scale : float
        How far a background row's outputs move, on average, when all of its columns are
        drawn: the unit of ``budget`` and of :attr:`Selection.residual`.
    n_selectors : int
        How many selectors it averages.
    """

    def __init__(
        self, estimator: Any, nets: list[SelectorNet], pool: TensorData, budget: float
    ) -> None:
        self.estimator = estimator
        self.budget = budget
        self._nets = nets
        self._pool = pool
        self._fitted = _fingerprint(estimator.network_)

    @property
    def scale(self) -> float:
        return float(self._nets[0].scale)

    @property
    def n_selectors(self) -> int:
        return len(self._nets)

    def __repr__(self) -> str:
        return (
            f"ColumnSelector({type(self.estimator).__name__}, budget={self.budget}, "
            f"rows={len(self._pool)}, n_selectors={self.n_selectors})"
        )

    def loss(self, X: Any, *, n_draws: int = 4, random_state: Any = 0) -> float:
        """The selectors' training objective on the rows of ``X`` (lower is better): how far
        a row's prediction moves when its unselected columns are drawn (relaxed gates, values
        from the rows the selector learned on), over ``scale``, plus ``budget`` times each kept
        column's cost; the mean over the rows, ``n_draws`` draws and the selectors. On held-out
        rows it says how well a selector fits its objective, to compare selectors of the same
        budget (e.g. of other seeds or ``n_iter``)."""
        est, network = self.estimator, self._network()
        _check_count("n_draws", n_draws)
        generator = _generator(random_state)
        total, n_rows = 0.0, 0
        for enc in est._encoded_blocks(X):  # a sparse X: one dense block at a time
            data = est._tensor_data(enc, None, None, est.device_)
            n_rows += len(data)
            for net in self._nets:
                total += len(data) * held_out_loss(
                    network,
                    net,
                    data,
                    self._pool,
                    budget=self.budget,
                    n_draws=int(n_draws),
                    generator=generator,
                )
        return total / (len(self._nets) * n_rows)

    def _network(self) -> Any:
        """The estimator's network, if it is still the one the selectors were trained on."""
        network = getattr(self.estimator, "network_", None)
        if network is None or _fingerprint(network) != self._fitted:
            raise ValueError(
                "the estimator was refitted after fit_selector: fit a new selector for it"
            )
        return network

    def explain(self, X: Any, *, n_draws: int = 8, random_state: Any = 0) -> Selection:
        """Which columns each row of ``X`` needs, and how far its prediction still moves when
        the others are drawn (``residual``, the mean over ``n_draws`` draws from the rows the
        selector learned on).

        Returns
        -------
        Selection
        """
        _check_count("n_draws", n_draws)
        network, blocks = self._network(), self.estimator._encoded_blocks(X)
        each = self._each_probabilities(network, blocks)
        mean = each.mean(axis=0)
        return Selection(
            mean,
            self._residual(network, blocks, mean >= 0.5, int(n_draws), random_state),
            list(self.estimator.encoder_.feature_names),
            each.std(axis=0, ddof=1) if len(each) > 1 else None,
        )

    def _each_probabilities(self, network: Any, blocks: list[Any]) -> np.ndarray:
        """Each selector's probabilities for the rows of the encoded ``blocks`` (of
        ``estimator._encoded_blocks``), ``(n_selectors, n, n_columns)`` float64."""
        est = self.estimator
        per_block = [
            torch.stack(
                [
                    selection_probabilities(
                        network, n, est._tensor_data(enc, None, None, est.device_)
                    )
                    for n in self._nets
                ]
            ).numpy()
            for enc in blocks
        ]
        return np.concatenate(per_block, axis=1).astype(np.float64)

    def _residual(
        self, network: Any, blocks: list[Any], keep: np.ndarray, n_draws: int, random_state: Any
    ) -> np.ndarray:
        """How far each row's prediction moves, over ``scale``, when the columns not in ``keep``
        (bool ``(n, n_columns)``) are drawn from the selector's rows (``n_draws`` draws)."""
        est = self.estimator
        generator = _generator(random_state)
        out, start = [], 0
        for enc in blocks:
            data = est._tensor_data(enc, None, None, est.device_)
            kept = torch.from_numpy(np.ascontiguousarray(keep[start : start + len(data)]))
            start += len(data)
            out.append(
                residual_change(
                    network,
                    self._nets[0],
                    data,
                    self._pool,
                    kept,
                    n_draws=n_draws,
                    generator=generator,
                ).numpy()
            )
        return np.concatenate(out)
