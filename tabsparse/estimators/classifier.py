"""TabNetClassifier: binary, multi-class, multi-label and multi-task classification."""

from __future__ import annotations

import os
from numbers import Real
from typing import Any

import numpy as np
import torch
from sklearn.base import ClassifierMixin
from sklearn.utils.class_weight import compute_sample_weight
from sklearn.utils.validation import check_is_fitted

import tabsparse.estimators._multioutput as mo
from tabsparse._compat import Interval, StrOptions
from tabsparse.estimators._supervised import TabNetSupervised
from tabsparse.estimators._targets import (
    ClassLabels,
    MultiLabel,
    Target,
    classification_kind,
    labels_1d,
)
from tabsparse.losses import smoothed_cross_entropy
from tabsparse.training import LossFn

#: ``early_stopping="auto"`` on a binary target (one column of two classes) validates from this
#: many held-out rows (1,000 rows at the default ``validation_fraction``); other targets from
#: ``AUTO_EARLY_STOPPING_ROWS`` (500) of ``_base``: a small binary table stops at its best epoch
#: instead of training ``max_epochs`` without validation.
AUTO_EARLY_STOPPING_ROWS_BINARY = 100


class TabNetClassifier(ClassifierMixin, TabNetSupervised):
    """TabNet classifier (Arik & Pfister) with sparsemax attention.

    The defaults were chosen on the quality benchmark (``benchmarks/README.md``; the record of
    what was tried is ``benchmarks/HISTORY.md``). Every fit ends by learning the column selector
    of :meth:`explain` (``selector_``; see "Explaining predictions" in the docs).

    The parameters come in four groups, in this order: the model's size and form (``n_d`` to
    ``lambda_sparse``), training (``max_epochs`` to ``pretrained``), data handling
    (``categorical_features``, ``datetime_features``, ``grouped_features``) and run time
    (``device`` to ``checkpoint_dir``). What "auto" resolves to, and the settings that are
    fixed choices rather than parameters, are listed in "Choosing parameters" in the docs.

    Parameters
    ----------
    n_d, n_a : int, default=16
        Widths of the decision and attention layers.
    n_steps : int, default=3
        Number of decision steps.
    gamma : float, default=1.3
        Relaxation of the prior: after each step a feature's prior is multiplied by
        ``gamma - mask``, and the prior multiplies the attention logits. At 1 a feature one step
        selected alone gets logit 0 (not minus infinity), so later steps can still select it;
        larger values let steps reuse features more freely (user guide, "Explanations").
    n_independent, n_shared : int, default=2
        Step-specific and shared GLU layers per feature transformer.
    n_members : int or "auto", default="auto"
        Members of an ensemble trained as one network, in the manner of TabM's "mini"
        ensembles: every member runs the same encoder on the inputs scaled by its own trainable
        per-channel signs and has its own head and its own loss; their rows run as one batch.
        Predictions are the mean of the members' outputs; ``explain`` averages their masks and
        importances, and ``feature_importances_std_`` becomes their spread. A training step
        costs more than one member's, less than one per member. "auto": 4 members when ``X``
        has fewer than 25,000 rows (where one network's predictions and masks vary most from seed to
        seed and a fit is cheap) and ``y`` is one target (class labels, or one regression
        column), else 1; the fit's choice is ``n_members_``.
    numeric_embedding : {"auto", None, "periodic"}, default="auto"
        None: each numeric column enters the network as its standardised value. "periodic":
        as 8 channels, the value and learned periodic features
        (Gorishniy et al., 2022; :class:`tabsparse.nn.numeric_embedding.PeriodicEmbedding`).
        A column's channels are one attention group, so masks, ``explain`` and
        ``feature_importances_`` stay per original column. "auto": "periodic" for a binary
        target and for regression, None for the others and when starting from ``pretrained``
        (the fit's choice is ``numeric_embedding_``).
    lambda_sparse : float, default=1e-3
        Weight of the mask-entropy sparsity loss.
    max_epochs : int, default=200
        Upper bound on the epochs; with early stopping most fits end well before it.
    learning_rate : float or "auto", default="auto"
        AdamW's step size. "auto": 0.01 when the fit validates (early stopping) and trains in
        batches of fewer than 1,024 rows (tables of fewer than about 18,000 rows at the
        default ``batch_size``), else 0.02, the rate the schedule starts from (``history_``
        records each epoch's rate at its end). Set a number to fix it.
    batch_size : int or "auto", default="auto"
        Rows per optimiser step. "auto": 1024 from 16,384 training rows on; on fewer, the
        largest power of two giving at least 16 steps per epoch, at least 128 rows and one
        virtual batch (2,000 rows: 128; 5,000: 256), so small tables are not underfitted.
    virtual_batch_size : int, default=128
        Rows per ghost-batch-norm virtual batch.
    early_stopping : "auto" or bool, default="auto"
        "auto" enables it when ``X_val`` is given or when the held-out split would have at
        least 100 rows for a binary target (1,000 rows at the default ``validation_fraction``)
        and 500 rows otherwise (5,000 rows; multi-class, multi-label and multi-task targets,
        and the regressor): on the benchmark's small binary tables validating and stopping
        beat 200 epochs without validation (user guide, "Choosing parameters / defaults").
    validation_fraction : float, default=0.1
        Fraction of the training rows held out (stratified) when early stopping without ``X_val``.
    n_iter_no_change : int, default=20
        Epochs without improvement of ``scoring`` before stopping.
    scoring : "loss", str, callable or None, default="loss"
        What early stopping watches: the validation loss, or a scikit-learn scorer (its value,
        with the scorer's sign, is ``val_score`` in ``history_`` and shown under its name by
        the progress bar, e.g. ``roc_auc=0.912``). A scorer needs validation rows (``X_val``,
        or a split of ``X`` with early stopping); without them fit warns that it is unused.
    class_weight : dict, list of dicts, "balanced" or None
        Weights classes in the loss (multiplied with ``sample_weight``). For a multi-task ``y``:
        "balanced" or one dict per column, and a row's weight is the product over the columns
        (as :func:`sklearn.utils.class_weight.compute_sample_weight`). Not available for a
        multi-label ``y`` (``ValueError``): use ``sample_weight``.
    multilabel_loss : {"sparsemax", "bce"}, default="sparsemax"
        The loss when ``y`` is a multi-label indicator matrix. "sparsemax": the sparsemax loss
        of Martins & Astudillo (2016) with a sparsemax output; ``predict_proba`` gives sparse
        per-label probabilities with exact zeros: the sparsemax output times the mean number
        of labels of a training row (``mean_label_count_``). "bce": independent sigmoids with
        the binary cross-entropy. Either way ``predict`` keeps the labels with a probability of
        at least 0.5. See the user guide, "Multi-label and multi-task".
    label_smoothing : float in [0, 1), default=0.0
        For one column of class labels: the cross-entropy's target puts ``1 - label_smoothing``
        on the true class and spreads ``label_smoothing`` evenly over all classes
        (:func:`tabsparse.losses.smoothed_cross_entropy`); the validation loss early stopping
        watches is smoothed alike. Multi-label and multi-task targets keep their losses. A
        training setting: export serves the fitted network as it is.
    warm_start : bool, default=False
        Continue training the fitted network for ``max_epochs`` more epochs (a fresh optimiser
        and schedule); parameters that would build another network are refused.
    pretrained : TabNetPretrainer, optional
        A fitted :class:`tabsparse.TabNetPretrainer`: at fit (unless warm-starting) the column
        schema (``encoder_``: columns, kinds, vocabularies, statistics) is the pretrainer's and
        the input-layer and encoder weights start from its weights; the head starts fresh. The
        architecture parameters (``n_d``, ``n_a``, ``n_steps``, ``n_independent``,
        ``n_shared``, ``grouped_features``) must equal the pretrainer's
        (``ValueError`` names the ones that differ) and ``categorical_features`` is not used.
        The pretrainer is only read; ``clone`` passes it on as it is.
    categorical_features : "from_dtype", list of names or indices, bool mask or None
        Which columns are categorical; by default category, object, string columns.
    datetime_features : {"error", "expand"}, default="error"
        "error" refuses datetime columns (``TypeError`` naming the column); "expand" turns each
        into numeric features ``"<name>__year"``, ``"<name>__month"``, ``"<name>__dayofweek"``,
        ``"<name>__hour"``, ... (the parts that vary in the training data; see
        :mod:`tabsparse.data.datetimes`). The input column stays one column of
        ``feature_names_in_``; ``explain``, ``feature_importances_`` and
        ``encoder_.feature_names`` list the parts. Saved in model files with the encoder.
    grouped_features : list of lists of column names or indices, optional
        Columns that attention selects together.
    device : "auto", "cpu", "cuda" or "cuda:N", default="auto"
    random_state : int, RandomState or None
        Makes training reproducible on CPU without touching global RNG state.
    verbose : int, default=0
        0 is silent; 1 shows a progress bar over epochs (stderr) with the running loss and
        validation score; 2 also logs one line per epoch through the ``tabsparse`` logger.
    callbacks : list of :class:`tabsparse.training.Callback`, optional
    checkpoint_dir : path, optional
        Write a training checkpoint (``checkpoint.pt``: weights, optimiser, schedule, RNG,
        history) to this folder after every epoch; resume with
        ``fit(..., resume_from=checkpoint_dir)``.
    Attributes
    ----------
    classes_ : ndarray or list of ndarray
        The class labels; ``np.arange(n_labels)`` for a multi-label ``y`` (as
        :class:`~sklearn.neural_network.MLPClassifier`); one array per column for a multi-task
        ``y`` (as :class:`~sklearn.multioutput.MultiOutputClassifier`).
    n_outputs_ : int
        1, the number of labels (multi-label) or the number of tasks (multi-task).
    mean_label_count_ : float
        Multi-label with ``multilabel_loss="sparsemax"`` only: the mean number of labels of a
        training row (a row without labels counts 1), which scales sparsemax scores into
        per-label probabilities.
    n_features_in_ : int
        Input columns.
    feature_names_in_ : ndarray of str
        Only when ``X`` was a DataFrame (pandas, polars, pyarrow, ...) with string column names.
    feature_importances_ : ndarray of shape (``n_features_in_``,)
        Global importances (sum to one): the mean of :meth:`explain`'s per-row importances over
        up to 8,192 validation rows when the fit has at least 500 (``X_val`` or early
        stopping's split: rows held out from training), else over up to 8,192 training rows;
        one per input column (``feature_names_in_``; an expanded datetime column's parts
        summed back to it: ``explain(X, datetime_parts=True)`` gives the per-part view).
    feature_importances_std_ : ndarray of shape (``n_features_in_``,)
        The standard error of each of ``feature_importances_``. One member: the standard error
        of the mean over those rows, ``std(ddof=1) / sqrt(n_rows)``; it says how much an
        importance depends on which rows were sampled, not how much a refit with another seed
        would move it. An ensemble (``n_members > 1``): the members' spread,
        ``std(ddof=1) / sqrt(n_members)`` of their global importances, which does reflect how
        much differently initialised models disagree. An importance at most two standard
        errors is indistinguishable from zero (:func:`tabsparse.importance.negligible`).
    history_ : list of dict
        Per epoch: ``epoch``, ``train_loss``, ``learning_rate``, ``seconds`` and, with
        validation data, ``val_loss`` and ``val_score``.
    n_iter_ : int
        Epochs run.
    best_iteration_ : int
        Epoch whose weights were kept.
    n_members_ : int
        The members of the network (``n_members``, with "auto" resolved by the fit).
    numeric_embedding_ : str or None
        The numeric embedding of the network (``numeric_embedding``, "auto" resolved).
    first_mask_ : str
        The first mask of the network: ``"shared"`` (one learned selection for every row, so
        every feature a row's prediction depends on has a non-zero mask weight in that row) with
        a numeric embedding or members, ``"per_row"`` (the paper's) otherwise or the
        pretrainer's with ``pretrained``.
    cat_emb_dim_ : int
        The embedding width (channels) of each categorical column; 1, or for a regressor with
        a numeric embedding as many as a numeric column gets; the pretrainer's with
        ``pretrained``.
    architecture_ : dict
        The arguments the network was built with ("auto" resolved); a later ``set_params``
        changes neither the network nor what ``tabsparse.save`` writes of it.
    background_ : dict
        64 rows of the fit's data (fewer for a smaller fit; drawn from the rows of
        ``feature_importances_``: validation rows when the fit holds out at least 500, else
        training rows), encoded (``{"numeric": float32 (m, n_numeric), "codes": int64 (m,
        n_categorical)}``): the default background of ``explain(X, attributions=True)``. Saved
        in model files: a model file holds these rows of your data.
    selector_ : dict
        The column selector learned at the end of the fit, behind ``explain(X).selected``: the
        weights of a small network (numpy arrays), the input column of each input channel and
        the ``scale`` of the output change it was trained against
        (:mod:`tabsparse.training.selection`). At most 50 Adam steps of 256 rows on up to 4,096
        training rows, and no more rows than 12% of those the fit trained on (epochs times
        training rows). Saved in model files and checked on load. Absent after an interrupted
        fit and where no column moves the outputs; ``explain(X).selected`` then reads the
        masks.
    device_ : torch.device
    compiled_ : bool
        Whether the fit's last epochs ran the compiled training step (:mod:`tabsparse.compiling`).
    network_ : tabsparse.nn.TabNet
    encoder_ : tabsparse.data.TableEncoder

    Examples
    --------
    >>> from sklearn.datasets import load_breast_cancer
    >>> X, y = load_breast_cancer(return_X_y=True, as_frame=True)
    >>> clf = TabNetClassifier(max_epochs=5, random_state=0).fit(X, y)
    >>> clf.predict_proba(X.iloc[:2]).shape
    (2, 2)
    """

    _parameter_constraints = {
        **TabNetSupervised._parameter_constraints,
        "class_weight": [dict, list, StrOptions({"balanced"}), None],
        "multilabel_loss": [StrOptions({"sparsemax", "bce"})],
        "label_smoothing": [Interval(Real, 0.0, 1.0, closed="left")],
    }

    # The kind of target of the last fit (a ``Target.name``, see ``_targets``); a class attribute
    # so that estimators restored from files written before multi-output support are
    # single-output.
    _target_kind: str = ClassLabels.name
    _target_attributes = ("classes_", "n_outputs_", "_target_kind", "mean_label_count_")
    n_outputs_: int
    classes_: Any  # ndarray, or a list of ndarrays for a multi-task target

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
        class_weight: dict[Any, float] | list[dict[Any, float]] | str | None = None,
        multilabel_loss: str = "sparsemax",
        label_smoothing: float = 0.0,
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
        self.class_weight = class_weight
        self.multilabel_loss = multilabel_loss
        self.label_smoothing = label_smoothing

    def fit(
        self,
        X: Any,
        y: Any,
        sample_weight: Any = None,
        *,
        X_val: Any = None,
        y_val: Any = None,
        sample_weight_val: Any = None,
        resume_from: str | os.PathLike[str] | None = None,
    ) -> TabNetClassifier:
        """Fit the classifier; see :meth:`TabNetSupervised.fit`.

        ``y`` is one column of class labels, a multi-label indicator matrix
        ``(n_samples, n_labels)`` of 0 / 1, or a 2-D array / DataFrame of class labels with one
        column per task (multi-task); ``y_val`` must have the same columns.
        """
        if y is not None and y_val is not None:
            n_y, n_val = mo.n_columns(y), mo.n_columns(y_val)
            if n_y is not None and n_val is not None and n_y != n_val:
                raise ValueError(
                    f"y_val has {n_val} column(s) but y has {n_y}; they must describe the same "
                    "target"
                )
        if self.class_weight is not None and y is not None:
            y_check = self._class_weight_target(y)
            cw = compute_sample_weight(self.class_weight, y_check)
            if sample_weight is not None:
                base = np.asarray(sample_weight, dtype=np.float64)
                if base.shape == cw.shape:
                    cw = cw * base
                else:
                    cw = base  # let the shape check report the problem
            sample_weight = cw
        super().fit(
            X,
            y,
            sample_weight,
            X_val=X_val,
            y_val=y_val,
            sample_weight_val=sample_weight_val,
            resume_from=resume_from,
        )
        return self

    def _class_weight_target(self, y: Any) -> np.ndarray:
        """The labels ``compute_sample_weight`` weighs: 1-D, or one column per task."""
        kind = classification_kind(y, self.multilabel_loss)
        if kind is ClassLabels:
            return labels_1d(y)
        if issubclass(kind, MultiLabel):
            raise ValueError(
                "class_weight is not supported for a multi-label y (an indicator matrix); "
                "weight rows with sample_weight instead"
            )
        columns = mo.label_columns(y)
        labels = np.empty((len(columns[0]), len(columns)), dtype=object)
        for j, col in enumerate(columns):
            labels[:, j] = col
        return labels

    def _target_kind_for(self, y: Any) -> type[Target]:
        return classification_kind(y, self.multilabel_loss)

    def _members_suit(self) -> bool:
        """``n_members="auto"`` trains members for one column of class labels (binary or
        multi-class), not for multi-label or multi-task targets."""
        return self._target_kind == ClassLabels.name

    def _periodic_suits(self) -> bool:
        """``numeric_embedding="auto"`` embeds the numeric columns for a binary target."""
        return self._target_kind == ClassLabels.name and len(self.classes_) == 2

    def _auto_validation_rows(self) -> int:
        """A binary target validates from 100 held-out rows; see
        :data:`AUTO_EARLY_STOPPING_ROWS_BINARY`."""
        if self._target_kind == ClassLabels.name and len(self.classes_) == 2:
            return AUTO_EARLY_STOPPING_ROWS_BINARY
        return super()._auto_validation_rows()

    def _loss_fn(self) -> LossFn:
        """The target's loss; for one column of class labels the cross-entropy with
        ``label_smoothing`` (:func:`tabsparse.losses.smoothed_cross_entropy`)."""
        target = self._target()
        # getattr: classifiers pickled before label_smoothing existed
        smoothing = float(getattr(self, "label_smoothing", 0.0))
        if not isinstance(target, ClassLabels) or smoothing == 0.0:
            return target.loss()

        def cross_entropy(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
            return smoothed_cross_entropy(logits, y, smoothing)

        return cross_entropy

    def predict_proba(self, X: Any) -> Any:
        """Class probabilities, shape (n_samples, n_classes), in the order of ``classes_``.

        Multi-label: the probability of each label, (n_samples, n_labels): sparse (exact
        zeros) with ``multilabel_loss="sparsemax"``, sigmoids with "bce". Multi-task: a list
        with one (n_samples, n_classes_j) array per task.
        """
        return self._outputs_from_logits(self._predict_logits(X))["predict_proba"]

    def predict_log_proba(self, X: Any) -> Any:
        """Logarithm of :meth:`predict_proba` (``-inf`` where a sparsemax score is zero)."""
        logits = self._predict_logits(X)  # checks that the classifier is fitted
        return self._target().log_proba(logits)

    def predict(self, X: Any) -> np.ndarray:
        """Most probable class of each row (labels from ``classes_``).

        Multi-label: the indicator matrix (n_samples, n_labels) of int 0 / 1. Multi-task: the
        labels (n_samples, n_tasks), in the dtype of the tasks' classes (``object`` when they
        mix kinds, e.g. strings and integers).
        """
        return self._outputs_from_logits(self._predict_logits(X))["predict"]

    def score(self, X: Any, y: Any, sample_weight: Any = None) -> float:
        """Mean accuracy; for multi-label and multi-task targets the subset accuracy (a row
        counts as correct only when every label / task is), as scikit-learn's
        :meth:`~sklearn.multioutput.MultiOutputClassifier.score`."""
        check_is_fitted(self)
        target = self._target()
        target.check_columns(y)
        return target.score(y, self.predict(X), sample_weight)

    def __sklearn_tags__(self):  # type: ignore[no-untyped-def]
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        tags.classifier_tags.multi_label = True
        return tags
