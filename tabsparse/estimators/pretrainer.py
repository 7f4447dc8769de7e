"""TabNetPretrainer: self-supervised pretraining of the TabNet encoder, and fine-tuning from it.

The estimator is a scikit-learn transformer: ``fit(X)`` trains the encoder and a decoder to
reconstruct masked cells (:mod:`tabsparse.pretraining`), ``transform(X)`` returns the encoder's
representation. ``TabNetClassifier(pretrained=pretrainer)`` / ``TabNetRegressor(pretrained=...)``
start from its weights; the helpers at the end of this module do that copy.
"""

from __future__ import annotations

import copy
import os
from numbers import Integral, Real
from typing import Any

import numpy as np
import pandas as pd
import torch
from sklearn.base import TransformerMixin, clone
from sklearn.utils.validation import check_is_fitted

from tabsparse._compat import Interval, _check_feature_names_in
from tabsparse.data import EncodedTable, TableEncoder
from tabsparse.estimators._base import (
    TabNetBase,
    _check_table,
    _verbose_logging,
    resolve_device,
)
from tabsparse.nn.decoder import PretrainingNetwork
from tabsparse.pretraining import CellMasker, ReconstructionLoss, encode_rows, mask_cells
from tabsparse.training import (
    LossFn,
    ScoreFn,
    TensorData,
    TrainingError,
    inference_batch_size,
    load_checkpoint,
)

#: Parameters that decide the shapes of the encoder weights: a fine-tuned estimator must use the
#: pretrainer's values.
ARCHITECTURE_PARAMS = (
    "n_d",
    "n_a",
    "n_steps",
    "n_independent",
    "n_shared",
    "cat_emb_dim",
    "grouped_features",
)

_NOT_HERE = {"scoring", "distributed", "pretrained"}


class TabNetPretrainer(TransformerMixin, TabNetBase):
    """Self-supervised TabNet pretraining by masked-cell reconstruction (Arik & Pfister, sec. 3).

    Each training batch gets a fresh Bernoulli mask over its cells (probability
    ``pretraining_ratio``); the masked cells are shown to the encoder as missing values (a
    learned value for numbers, the "missing" embedding for categories, so the encoder can tell
    "masked" from "zero") and a decoder reconstructs them from the encoder's step outputs. Cells
    that are missing in the data are never targets. The loss is normalised per feature::

        numeric j:      l_ij = (r_ij - z_ij)^2,   z_ij = (x_ij - mean_j) / std_j (fit-time stats)
        categorical k:  l_ik = cross-entropy over the vocabulary / log(max(|V_k|, 2))
        L = mean over the features with masked cells of (mean of l over their masked cells)

    so it stays finite for constant and near-constant columns, and 1 is the loss of the trivial
    guess (the column mean, a uniform distribution over the categories). Validation data (a
    split of ``X``, or ``X_val``) is masked once with a mask drawn from the seed, so
    ``val_loss`` is comparable across epochs.

    The other parameters (``n_d``, ``n_a``, ``n_steps``, ``gamma``, ``n_independent``,
    ``n_shared``, ``momentum``, ``mask_type``, ``lambda_sparse``, ``virtual_batch_size``,
    ``batch_size``, ``max_epochs``, ``learning_rate``, ``weight_decay``, ``lr_schedule``,
    ``ema_decay``, ``early_stopping``, ``validation_fraction``, ``n_iter_no_change``, ``tol``,
    ``categorical_features``, ``cat_emb_dim``, ``grouped_features``, ``device``,
    ``compile``, ``random_state``, ``verbose``, ``warm_start``, ``callbacks``, ``checkpoint_dir``,
    ``checkpoint_every``) are those of :class:`tabsparse.TabNetClassifier`; early stopping
    watches the validation loss. Five defaults differ, because the benchmark that chose the
    classifier's and regressor's (``benchmarks/bench_quality.py``) does not cover pretraining:
    ``momentum=0.02``, ``tol=1e-4``, ``batch_size=1024``, ``max_epochs=100`` and
    ``n_iter_no_change=10`` (``batch_size="auto"`` is accepted here too).

    Parameters
    ----------
    pretraining_ratio : float, default=0.2
        Probability that a cell is masked (the paper's p_s).
    n_shared_decoder, n_indep_decoder : int, default=1
        Shared and step-specific GLU layers of the decoder's feature transformers.

    Attributes
    ----------
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        Only when ``X`` was a DataFrame with string column names.
    history_ : list of dict
        Per epoch: ``epoch``, ``train_loss``, ``learning_rate``, ``seconds`` and, with
        validation data, ``val_loss`` (and ``val_score = -val_loss``).
    n_iter_ : int
    best_iteration_ : int
    feature_importances_ : ndarray of shape (n_features,)
        Attention importances of the encoder on a sample of the training rows.
    device_ : torch.device
    compiled_ : bool
        Whether the fit's last epochs ran the compiled training step (see ``compile``).
    network_ : tabsparse.nn.decoder.PretrainingNetwork
    encoder_ : tabsparse.data.TableEncoder

    Examples
    --------
    >>> from sklearn.datasets import load_diabetes
    >>> X, _ = load_diabetes(return_X_y=True, as_frame=True)
    >>> pre = TabNetPretrainer(n_d=8, n_a=8, max_epochs=3, random_state=0).fit(X)
    >>> pre.transform(X.iloc[:4]).shape
    (4, 8)
    >>> from tabsparse import TabNetRegressor
    >>> _, y = load_diabetes(return_X_y=True)
    >>> reg = TabNetRegressor(n_d=8, n_a=8, pretrained=pre, max_epochs=3, random_state=0).fit(X, y)
    """

    network_: PretrainingNetwork  # type: ignore[assignment]

    _parameter_constraints = {
        **{k: v for k, v in TabNetBase._parameter_constraints.items() if k not in _NOT_HERE},
        "pretraining_ratio": [Interval(Real, 0.0, 1.0, closed="neither")],
        "n_shared_decoder": [Interval(Integral, 0, None, closed="left")],
        "n_indep_decoder": [Interval(Integral, 0, None, closed="left")],
    }

    def __init__(
        self,
        *,
        n_d: int = 16,
        n_a: int = 16,
        n_steps: int = 3,
        gamma: float = 1.3,
        n_independent: int = 2,
        n_shared: int = 2,
        momentum: float = 0.02,
        mask_type: str = "sparsemax",
        lambda_sparse: float = 1e-3,
        virtual_batch_size: int = 128,
        batch_size: int = 1024,
        max_epochs: int = 100,
        learning_rate: float = 0.02,
        weight_decay: float = 0.0,
        lr_schedule: str = "cosine",
        ema_decay: float | None = None,
        early_stopping: str | bool = "auto",
        validation_fraction: float = 0.1,
        n_iter_no_change: int = 10,
        tol: float = 1e-4,
        pretraining_ratio: float = 0.2,
        n_shared_decoder: int = 1,
        n_indep_decoder: int = 1,
        categorical_features: Any = "from_dtype",
        cat_emb_dim: int = 1,
        grouped_features: list[list[int]] | None = None,
        device: str = "auto",
        compile: bool | str = "auto",
        random_state: int | np.random.RandomState | None = None,
        verbose: int = 0,
        warm_start: bool = False,
        callbacks: list[Any] | None = None,
        checkpoint_dir: str | os.PathLike[str] | None = None,
        checkpoint_every: int = 1,
    ) -> None:
        # TabNetBase.__init__ would also set the prediction-only parameters (scoring, ...).
        self.n_d = n_d
        self.n_a = n_a
        self.n_steps = n_steps
        self.gamma = gamma
        self.n_independent = n_independent
        self.n_shared = n_shared
        self.momentum = momentum
        self.mask_type = mask_type
        self.lambda_sparse = lambda_sparse
        self.virtual_batch_size = virtual_batch_size
        self.batch_size = batch_size
        self.max_epochs = max_epochs
        self.learning_rate = learning_rate
        self.weight_decay = weight_decay
        self.lr_schedule = lr_schedule
        self.ema_decay = ema_decay
        self.early_stopping = early_stopping
        self.validation_fraction = validation_fraction
        self.n_iter_no_change = n_iter_no_change
        self.tol = tol
        self.pretraining_ratio = pretraining_ratio
        self.n_shared_decoder = n_shared_decoder
        self.n_indep_decoder = n_indep_decoder
        self.categorical_features = categorical_features
        self.cat_emb_dim = cat_emb_dim
        self.grouped_features = grouped_features
        self.device = device
        self.compile = compile
        self.random_state = random_state
        self.verbose = verbose
        self.warm_start = warm_start
        self.callbacks = callbacks
        self.checkpoint_dir = checkpoint_dir
        self.checkpoint_every = checkpoint_every

    # ---- fit ----------------------------------------------------------------------------------
    def fit(  # type: ignore[override]  # a transformer's fit: no target, no sample weights
        self,
        X: Any,
        y: Any = None,
        *,
        X_val: Any = None,
        resume_from: str | os.PathLike[str] | None = None,
    ) -> TabNetPretrainer:
        """Pretrain the encoder on ``X`` (no target).

        Parameters
        ----------
        X : DataFrame or array-like of shape (n_samples, n_features)
            Numeric, categorical, string, boolean and nullable columns; NaN allowed.
        y : None
            Ignored (accepted for pipelines).
        X_val : DataFrame or array-like, optional
            Validation rows for early stopping (instead of a split of ``X``).
        resume_from : path, optional
            A checkpoint written with ``checkpoint_dir`` by an earlier fit with the same
            parameters on the same data.

        Returns
        -------
        self
        """
        self._validate_params()
        if self.n_shared_decoder + self.n_indep_decoder < 1:
            raise ValueError(
                f"n_shared_decoder={self.n_shared_decoder} + n_indep_decoder="
                f"{self.n_indep_decoder} must be >= 1"
            )
        device = resolve_device(self.device)
        X = _check_table(X)
        continuing = self.warm_start and hasattr(self, "network_")
        seed = self._seed()
        rng = np.random.default_rng(seed)
        if continuing:
            encoded = self._encode(X)
        else:
            self.encoder_ = TableEncoder(categorical_features=self.categorical_features)
            encoded = self.encoder_.fit_transform(X)
            self._set_feature_attributes()
        val_table: EncodedTable | None = None
        if X_val is not None:
            val_table = self._encode(X_val, what="X_val")
        elif self._use_early_stopping(len(encoded)):
            train_idx, val_idx = self._split(len(encoded), rng, None)
            encoded, val_table = encoded.take(train_idx), encoded.take(val_idx)
        if not continuing:
            self.network_ = self._build_network(seed).to(device)
            self.history_: list[dict[str, float]] = []
        self.network_.to(device)
        self.device_ = device
        train = self._tensor_data(encoded, None, None, device)
        val = None if val_table is None else self._masked(val_table, rng, device)
        trainer = self._trainer(train, seed, device, None)
        trainer.transform_batch = CellMasker(self.pretraining_ratio, self.network_.inputs)
        try:
            with _verbose_logging(self.verbose):
                resume = None if resume_from is None else load_checkpoint(resume_from)
                trainer.fit(train, val, resume=resume)
        except (TrainingError, KeyboardInterrupt):
            if trainer.best_iteration is None:
                for name in ("network_", "n_iter_", "best_iteration_", "feature_importances_"):
                    self.__dict__.pop(name, None)
            else:
                self._finish_fit(trainer, train, rng)
            raise
        self._finish_fit(trainer, train, rng)
        return self

    def _masked(
        self, table: EncodedTable, rng: np.random.Generator, device: torch.device
    ) -> TensorData:
        """Validation rows with one fixed mask (drawn from the fit's seed)."""
        data = self._tensor_data(table, None, None, device)
        n_columns = table.n_numeric + table.n_categorical
        mask = torch.from_numpy(rng.random((len(table), n_columns)) < self.pretraining_ratio)
        numeric, codes, target = mask_cells(data.numeric, data.codes, mask, self.network_.inputs)
        return TensorData(numeric, codes, target)

    # ---- hooks of TabNetBase ------------------------------------------------------------------
    def _build_network(self, seed: int) -> PretrainingNetwork:  # type: ignore[override]
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            return PretrainingNetwork(
                **self._network_kwargs(),
                n_shared_decoder=self.n_shared_decoder,
                n_indep_decoder=self.n_indep_decoder,
            )

    def _n_outputs(self) -> int:
        """Width of the reconstruction: one value per numeric column, one logit per category."""
        enc = self.encoder_
        return len(enc.numeric_columns) + sum(c - 2 for c in enc.cardinalities)

    def _loss_fn(self) -> LossFn:
        return ReconstructionLoss(
            n_numeric=self.network_.n_numeric, vocab_sizes=self.network_.vocab_sizes
        )

    def _score_fn(self) -> ScoreFn | None:
        return None

    # ---- public methods after fit -------------------------------------------------------------
    def transform(self, X: Any) -> np.ndarray:
        """The encoder's representation of each row: the sum over decision steps of the ReLU'd
        decision outputs (what a fine-tuned estimator's head reads).

        Returns
        -------
        ndarray of shape (n_samples, n_d), float32
        """
        check_is_fitted(self)
        data = self._tensor_data(self._encode(X), None, None, self.device_)
        out = encode_rows(self.network_, data, batch_size=inference_batch_size(self.batch_size))
        return out.cpu().numpy()

    def get_feature_names_out(self, input_features: Any = None) -> np.ndarray:
        """``tabnet0 .. tabnet{n_d-1}``: names of the :meth:`transform` columns."""
        check_is_fitted(self)
        _check_feature_names_in(self, input_features)
        return np.asarray([f"tabnet{i}" for i in range(self.network_.encoder.n_d)], dtype=object)

    def export(self, path: Any, format: str = "onnx", *, masks: bool = False) -> Any:
        """Not available: a pretrainer has no prediction head (fine-tune an estimator with
        ``pretrained=`` and export that)."""
        raise TypeError(
            "TabNetPretrainer cannot be exported; fit TabNetClassifier(pretrained=...) or "
            "TabNetRegressor(pretrained=...) and export that"
        )

    def __sklearn_tags__(self):  # type: ignore[no-untyped-def]
        tags = super().__sklearn_tags__()
        tags.target_tags.required = False
        if tags.transformer_tags is not None:
            tags.transformer_tags.preserves_dtype = []  # always float32
        return tags


# ---- fine-tuning: used by TabNetBase.fit --------------------------------------------------------
def adopt_pretrained(estimator: TabNetBase, X: Any) -> TabNetPretrainer:
    """Check ``estimator.pretrained`` against the estimator and ``X``; give the estimator the
    pretrainer's column schema (a copy of its ``encoder_``). The pretrainer is not changed."""
    pre = estimator.pretrained  # type: ignore[attr-defined]
    if not isinstance(pre, TabNetPretrainer):
        raise TypeError(f"pretrained must be a fitted TabNetPretrainer, got {type(pre).__name__}")
    if not pre.__sklearn_is_fitted__():
        raise ValueError(
            "pretrained is an unfitted TabNetPretrainer; fit it first (pretrainer.fit(X)) and "
            "pass the fitted object"
        )
    built = _built_architecture(pre)
    wrong = [
        f"{name}={built[name]!r} in the pretrainer but {name}={getattr(estimator, name)!r} here"
        for name in ARCHITECTURE_PARAMS
        if built[name] != getattr(estimator, name)
    ]
    if wrong:
        raise ValueError(
            f"{type(estimator).__name__} does not match the architecture of pretrained: "
            + "; ".join(wrong)
            + ". Use the pretrainer's values for these parameters."
        )
    _check_columns(pre, X)
    estimator.encoder_ = copy.deepcopy(pre.encoder_)
    estimator._set_feature_attributes()
    return pre


def _built_architecture(pre: TabNetPretrainer) -> dict[str, Any]:
    """The architecture the pretrainer's network was built with, read from the network (so a
    ``set_params`` on the pretrainer after its fit cannot make the check pass wrongly)."""
    net = pre.network_
    enc = net.encoder
    independent = enc.initial.independent
    return {
        "n_d": enc.n_d,
        "n_a": enc.n_a,
        "n_steps": enc.n_steps,
        "n_independent": 0 if independent is None else len(independent.layers),
        "n_shared": len(enc.shared),
        "cat_emb_dim": net.inputs.cat_emb_dim,
        "grouped_features": pre.grouped_features,  # the group layout is compared at the copy
    }


def _check_columns(pre: TabNetPretrainer, X: Any) -> None:
    names = list(pre.encoder_.feature_names)
    if isinstance(X, pd.DataFrame) and pre.encoder_.has_feature_names:
        given = [str(c) for c in X.columns]
        missing = [c for c in names if c not in given]
        extra = [c for c in given if c not in names]
        if missing or extra:
            raise ValueError(
                "X does not have the columns pretrained was fitted on: "
                f"missing {missing[:20]}, unexpected {extra[:20]}"
            )
        return
    n = X.shape[1] if hasattr(X, "shape") and len(X.shape) == 2 else None
    if n is not None and n != len(names):
        raise ValueError(f"X has {n} columns, but pretrained was fitted on {len(names)} columns")


def load_pretrained_weights(network: torch.nn.Module, pre: TabNetPretrainer) -> None:
    """Copy the pretrainer's input-layer and encoder weights (and buffers) into ``network``."""
    source = pre.network_
    for part in ("inputs", "encoder"):
        target_module = getattr(network, part)
        state = getattr(source, part).state_dict()
        mine = target_module.state_dict()
        bad = [
            f"{name}: {tuple(t.shape)} vs {tuple(mine[name].shape)}"
            for name, t in state.items()
            if name in mine and mine[name].shape != t.shape
        ]
        if bad or set(state) != set(mine):
            raise ValueError(f"cannot copy the pretrained {part} weights: {bad[:5]}")
        layout = [  # integer buffers describe the layout (groups, offsets): they must agree
            name
            for name, t in state.items()
            if not t.is_floating_point()
            and name != "num_batches_tracked"
            and not name.endswith(".num_batches_tracked")
            and not torch.equal(t.cpu(), mine[name].cpu())
        ]
        if layout:
            raise ValueError(
                f"cannot copy the pretrained {part} weights: the column layout differs "
                f"({layout}); check grouped_features and the columns"
            )
        target_module.load_state_dict(state)


def clone_keeping_pretrained(estimator: TabNetBase) -> TabNetBase:
    """scikit-learn's clone, except that the ``pretrained`` parameter is passed on as it is.

    ``sklearn.base.clone`` would clone a fitted pretrainer into an *unfitted* one; the
    pretrained weights are only read at fit (never changed), so sharing the object is safe and
    makes ``clone``, ``GridSearchCV`` and ``cross_val_score`` work with ``pretrained=``.
    """
    params = estimator.get_params(deep=False)
    new_params = {
        name: value if name == "pretrained" else clone(value, safe=False)
        for name, value in params.items()
    }
    new = type(estimator)(**new_params)
    for attr in ("_metadata_request", "_sklearn_output_config"):
        if hasattr(estimator, attr):
            setattr(new, attr, copy.deepcopy(getattr(estimator, attr)))
    return new
