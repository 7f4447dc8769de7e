"""TabNetRegressor: single- and multi-output regression with HistGradientBoosting's losses."""

from __future__ import annotations

import os
from collections.abc import Sequence
from numbers import Real
from typing import Any

import numpy as np
from sklearn.base import RegressorMixin
from sklearn.utils.validation import check_is_fitted

from tabsparse._compat import Interval, StrOptions
from tabsparse.estimators._supervised import TabNetSupervised
from tabsparse.estimators._targets import Regression, Target
from tabsparse.estimators._targets._regression import LOSSES, Objective


class TabNetRegressor(RegressorMixin, TabNetSupervised):
    """TabNet regressor (Arik & Pfister) with sparsemax attention.

    Takes the parameters of :class:`tabsparse.TabNetClassifier` (without ``class_weight``,
    ``multilabel_loss`` and ``label_smoothing``) and the loss parameters below. Predictions
    are returned on the original scale of ``y``; a 1-D ``y`` gives 1-D predictions, a 2-D
    ``y`` gives ``(n_samples, n_outputs)``, several quantiles give ``(n_samples,
    n_quantiles)``.

    Parameters
    ----------
    loss : {"squared_error", "absolute_error", "huber", "poisson", "gamma", "tweedie", \
            "quantile"}, default="squared_error"
        HistGradientBoostingRegressor's names. ``"absolute_error"`` predicts the median,
        ``"quantile"`` the ``quantile``; ``"poisson"``, ``"gamma"`` and ``"tweedie"`` use a log
        link (predictions are always positive) and the mean deviance of their distribution
        (``y >= 0`` for poisson and tweedie with ``power < 2``, ``y > 0`` for gamma and tweedie
        with ``power >= 2``). See "Objectives" in the user guide.
    quantile : float or sequence of float, default=None
        With ``loss="quantile"`` (required there): a float in (0, 1), or a strictly increasing
        sequence of them, e.g. ``[0.05, 0.5, 0.95]`` for a 90% prediction interval around the
        median: ``predict`` then returns ``(n_samples, n_quantiles)``, sorted along each row so
        quantiles never cross (a 1-D ``y`` only). Ignored by the other losses.
    power : float, default=1.5
        With ``loss="tweedie"``: the Tweedie power, ``>= 1`` (1 is poisson, in (1, 2) a
        compound Poisson-gamma for zeros and positive amounts, 2 gamma, 3 inverse Gaussian), as
        :class:`sklearn.linear_model.TweedieRegressor`'s (whose powers below 1 this log-link
        model does not take). Ignored by the other losses.

    ``loss="huber"`` squares residuals up to one standard deviation of ``y`` and counts larger
    ones linearly (on ``y``'s scale the threshold is ``target_scale_``): a fixed threshold in
    units of the standardised target, not GradientBoostingRegressor's residual quantile, which
    would move during training.

    Attributes
    ----------
    n_outputs_ : int
    target_mean_, target_scale_ : ndarray of shape (n_outputs,)
        The scaling applied to ``y``: standardisation, or for a log link a mean of 0 and the
        mean of ``y`` as the scale. An output constant in ``y`` has its value as the mean and
        a scale of 0, and is predicted as that value exactly.

    Notes
    -----
    The other fitted attributes (``n_features_in_``, ``feature_names_in_``,
    ``feature_importances_``, ``feature_importances_std_``, ``history_``, ``n_iter_``,
    ``best_iteration_``, ``n_members_``, ``numeric_embedding_``, ``first_mask_``,
    ``cat_emb_dim_``, ``architecture_``, ``background_``, ``selector_``, ``device_``,
    ``compiled_``, ``network_``, ``encoder_``) are as for :class:`tabsparse.TabNetClassifier`.

    Early stopping with ``scoring="loss"`` (the default) watches the validation loss, which is
    the objective's own mean deviance or (mean) pinball loss on the scaled target: a constant
    multiple of scikit-learn's ``mean_poisson_deviance`` (``neg_mean_poisson_deviance``),
    ``mean_gamma_deviance``, ``mean_tweedie_deviance``, ``mean_pinball_loss``, so it stops at the
    same epoch.

    Examples
    --------
    >>> from sklearn.datasets import load_diabetes
    >>> X, y = load_diabetes(return_X_y=True, as_frame=True)
    >>> reg = TabNetRegressor(max_epochs=5, random_state=0).fit(X, y)
    >>> reg.predict(X.iloc[:3]).shape
    (3,)
    >>> intervals = TabNetRegressor(loss="quantile", quantile=[0.1, 0.9], max_epochs=5,
    ...                             random_state=0).fit(X, y)
    >>> intervals.predict(X.iloc[:3]).shape
    (3, 2)
    """

    _parameter_constraints = {
        **TabNetSupervised._parameter_constraints,
        "loss": [StrOptions(set(LOSSES))],
        "quantile": [Interval(Real, 0.0, 1.0, closed="neither"), "array-like", None],
        "power": [Interval(Real, 1.0, None, closed="left")],
    }
    _target_attributes = ("n_outputs_", "target_mean_", "target_scale_", "_y_ndim", "_objective")

    def __init__(
        self,
        *,
        n_d: int = 16,
        n_a: int = 16,
        n_steps: int = 3,
        gamma: float = 1.3,
        n_independent: int = 2,
        n_shared: int = 2,
        lambda_sparse: float = 1e-3,
        virtual_batch_size: int = 128,
        batch_size: int | str = "auto",
        max_epochs: int = 200,
        learning_rate: float | str = "auto",
        early_stopping: str | bool = "auto",
        validation_fraction: float = 0.1,
        n_iter_no_change: int = 20,
        scoring: Any = "loss",
        categorical_features: Any = "from_dtype",
        datetime_features: str = "error",
        grouped_features: list[list[int]] | None = None,
        numeric_embedding: str | None = "auto",
        n_members: int | str = "auto",
        loss: str = "squared_error",
        quantile: float | Sequence[float] | None = None,
        power: float = 1.5,
        device: str = "auto",
        random_state: int | np.random.RandomState | None = None,
        verbose: int = 0,
        warm_start: bool = False,
        callbacks: list[Any] | None = None,
        checkpoint_dir: str | os.PathLike[str] | None = None,
        pretrained: Any = None,
    ) -> None:
        super().__init__(
            n_d=n_d,
            n_a=n_a,
            n_steps=n_steps,
            gamma=gamma,
            n_independent=n_independent,
            n_shared=n_shared,
            lambda_sparse=lambda_sparse,
            virtual_batch_size=virtual_batch_size,
            batch_size=batch_size,
            max_epochs=max_epochs,
            learning_rate=learning_rate,
            early_stopping=early_stopping,
            validation_fraction=validation_fraction,
            n_iter_no_change=n_iter_no_change,
            scoring=scoring,
            categorical_features=categorical_features,
            datetime_features=datetime_features,
            grouped_features=grouped_features,
            numeric_embedding=numeric_embedding,
            n_members=n_members,
            device=device,
            random_state=random_state,
            verbose=verbose,
            warm_start=warm_start,
            callbacks=callbacks,
            checkpoint_dir=checkpoint_dir,
            pretrained=pretrained,
        )
        self.loss = loss
        self.quantile = quantile
        self.power = power

    def _objective_of_params(self) -> Objective:
        return Objective.from_params(self.loss, self.quantile, self.power, self._fixed.huber_delta)

    def _target_kind_for(self, y: Any) -> type[Target]:
        return Regression

    def _members_suit(self) -> bool:
        """``n_members="auto"`` trains members for one target column (a 1-D ``y``, or a 2-D
        ``y`` of one column: the same fit)."""
        return bool(self.n_outputs_ == 1)

    def _wide_categories_suit(self) -> bool:
        """The categorical width rule widens the categorical columns for every regression (with a
        numeric embedding)."""
        return True

    def _periodic_suits(self) -> bool:
        """``numeric_embedding="auto"`` embeds the numeric columns for every regression."""
        return True

    def _target(self) -> Regression:
        return Regression.from_attributes(self)

    def _prepare_target(self, y: Any, *, fitting: bool) -> np.ndarray:
        """Encode ``y``; when fitting, learn its scaling under the objective of the parameters
        (a warm start or ``y_val`` keeps the fitted objective, and a warm start refuses another
        one)."""
        objective = self._objective_of_params()
        if not fitting:
            target = self._target()
            if target.objective != objective:
                raise ValueError(
                    f"the model was fitted with the objective {target.objective.to_json()}, "
                    f"but the parameters now give {objective.to_json()}; warm_start continues "
                    "the fitted objective: set the parameters back or fit without warm_start"
                )
            return target.encode(y)
        if (
            objective.quantiles is not None
            and isinstance(self.scoring, str)
            and self.scoring != "loss"
        ):
            raise ValueError(
                f"scoring={self.scoring!r} cannot score several quantiles (predict returns one "
                "column per quantile); use scoring='loss', the mean pinball loss over them"
            )
        target, encoded = Regression.fit(y, objective)
        for name in self._target_attributes:
            self.__dict__.pop(name, None)
        for name, value in target.attributes().items():
            setattr(self, name, value)
        return encoded

    def predict(self, X: Any) -> np.ndarray:
        """Predictions on the scale of ``y``: ``(n_samples,)`` for a 1-D ``y`` at fit,
        ``(n_samples, n_outputs)`` for a 2-D one, ``(n_samples, n_quantiles)`` with several
        quantiles (in the order of ``quantile``)."""
        return self._outputs_from_logits(self._predict_logits(X))["predict"]

    def score(self, X: Any, y: Any, sample_weight: Any = None) -> float:
        """R2 of ``predict(X)`` (as :meth:`sklearn.base.RegressorMixin.score`, also for
        targets near 1e300); with several quantiles the mean over them of
        :func:`sklearn.metrics.d2_pinball_score`."""
        check_is_fitted(self)
        return self._target().score(y, self.predict(X), sample_weight)

    def __sklearn_tags__(self):  # type: ignore[no-untyped-def]
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        return tags
