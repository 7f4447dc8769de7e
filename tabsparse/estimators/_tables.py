"""The tables of a fit and after it: checked with scikit-learn's rules, encoded by the fitted
:class:`~tabsparse.data.TableEncoder` (a scipy sparse matrix stays sparse, or is encoded in
blocks), and turned into the core's :class:`~tabsparse.training.TensorData`.

:class:`TableHandling` is a mixin of :class:`~tabsparse.estimators._base.TabNetBase`.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import torch
from sklearn.utils.validation import validate_data

from tabsparse.data import SPARSE_BLOCK_ROWS, EncodedTable, TableEncoder, as_pandas
from tabsparse.data import is_sparse_matrix as _is_sparse
from tabsparse.data.sparse import CSRRows, encode_sparse_rows, fit_sparse_rows
from tabsparse.estimators._inputs import check_table, to_tensor
from tabsparse.training import TensorData
from tabsparse.training.sparse_rows import sparse_tensor_data

__all__ = ["TableHandling"]


class TableHandling:
    """Checking and encoding the tables of a fit and after it (see the module docstring)."""

    if TYPE_CHECKING:  # provided by the estimator this is mixed into
        encoder_: TableEncoder
        n_features_in_: int
        categorical_features: Any

        def _target_tensor(self, y: np.ndarray, device: torch.device) -> torch.Tensor: ...

    def _check_fit_table(self, X: Any, *, continuing: bool) -> Any:
        """The training table, checked. A table of another library (polars, pyarrow, ...)
        becomes a pandas DataFrame first (:func:`tabsparse.data.as_pandas`). An array or a
        scipy sparse matrix goes through scikit-learn's ``validate_data`` (which also resets
        ``n_features_in_``; a sparse matrix stays sparse); a DataFrame is kept as it is (see
        :meth:`_encode`), and a warm start leaves the checks against the fit to :meth:`_encode`."""
        X = as_pandas(X)
        if isinstance(X, pd.DataFrame) or continuing:
            return check_table(X)
        return validate_data(
            self, X, reset=True, accept_sparse=True, dtype=None, ensure_all_finite=False
        )

    def _new_encoder(self) -> TableEncoder:
        """An unfitted encoder with this estimator's column settings."""
        return TableEncoder(
            categorical_features=self.categorical_features,
            datetime_features=getattr(self, "datetime_features", "error"),
        )

    def _fit_encoder(self, X: Any) -> EncodedTable | CSRRows:
        """Fit a new ``encoder_`` on ``X`` and encode it; a scipy sparse matrix stays sparse
        (:class:`~tabsparse.data.sparse.CSRRows`, densified batch by batch in training)."""
        self.encoder_ = self._new_encoder()
        if _is_sparse(X):
            encoded: EncodedTable | CSRRows = fit_sparse_rows(self.encoder_, X)
        else:
            encoded = self.encoder_.fit_transform(X)
        self._set_feature_attributes()
        return encoded

    def _set_feature_attributes(self) -> None:
        """``n_features_in_`` and ``feature_names_in_`` describe the input columns (an expanded
        datetime column is one of them, though the network sees its parts)."""
        enc = self.encoder_
        self.n_features_in_ = len(enc.input_names)
        if enc.has_feature_names:
            self.feature_names_in_ = np.asarray(enc.input_names, dtype=object)
        elif hasattr(self, "feature_names_in_"):
            del self.feature_names_in_

    def _encode(self, X: Any, *, what: str = "X") -> EncodedTable | CSRRows:
        """Encode a table for a fitted model (a warm start's ``X``, an ``X_val``): the checks of
        :meth:`_check_table_after_fit`, then the encoder; a scipy sparse matrix stays sparse."""
        X = self._check_table_after_fit(X, what=what)
        if _is_sparse(X):
            return encode_sparse_rows(self.encoder_, X)
        return self.encoder_.transform(X, what=what)

    def _encoded_blocks(self, X: Any) -> list[EncodedTable]:
        """``X`` encoded for a fitted model, a scipy sparse matrix in blocks of
        :data:`~tabsparse.data.SPARSE_BLOCK_ROWS` rows (only one block is dense at a time)."""
        X = self._check_table_after_fit(X)
        if not _is_sparse(X) or X.shape[0] <= SPARSE_BLOCK_ROWS:
            return [self.encoder_.transform(X)]
        csr = X.tocsr()
        return [
            self.encoder_.transform(csr[start : start + SPARSE_BLOCK_ROWS])
            for start in range(0, X.shape[0], SPARSE_BLOCK_ROWS)
        ]

    def _check_table_after_fit(self, X: Any, *, what: str = "X") -> Any:
        """``X`` checked against the fit with scikit-learn's feature-name rules.

        A table of another library becomes a pandas DataFrame first. An array or a sparse matrix
        ``X`` goes through ``validate_data(reset=False)``. A DataFrame (and ``X_val``, whose
        messages name it) keeps this check: the encoder matches a DataFrame's columns by name in
        any order and takes names of mixed types as no names, where ``validate_data`` would
        refuse both."""
        name = type(self).__name__
        X = as_pandas(X)
        if what == "X" and not isinstance(X, pd.DataFrame):
            return validate_data(
                self, X, reset=False, accept_sparse=True, dtype=None, ensure_all_finite=False
            )
        X = check_table(X, what=what)
        fitted_names = hasattr(self, "feature_names_in_")
        is_frame = isinstance(X, pd.DataFrame)
        has_names = is_frame and all(isinstance(c, str) for c in X.columns)
        if has_names and not fitted_names:
            warnings.warn(
                f"X has feature names, but {name} was fitted without feature names",
                UserWarning,
                stacklevel=4,
            )
        if fitted_names and not has_names:
            warnings.warn(
                f"X does not have valid feature names, but {name} was fitted with feature names",
                UserWarning,
                stacklevel=4,
            )
        if not (fitted_names and has_names) and X.shape[1] != self.n_features_in_:
            raise ValueError(
                f"{what} has {X.shape[1]} features, but {name} is expecting "
                f"{self.n_features_in_} features as input."
            )
        return X

    def _tensor_data(
        self,
        enc: EncodedTable | CSRRows,
        y: np.ndarray | None,
        weight: np.ndarray | None,
        device: torch.device,
    ) -> TensorData:
        target = None if y is None else self._target_tensor(y, device)
        w = None if weight is None else to_tensor(weight, device)
        if isinstance(enc, CSRRows):  # rows densified only when taken (a batch at a time)
            return sparse_tensor_data(enc, target, w, device)
        return TensorData(
            numeric=to_tensor(enc.numeric, device),
            codes=to_tensor(enc.codes, device),
            target=target,
            weight=w,
        )
