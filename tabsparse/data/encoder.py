"""The :class:`TableEncoder`: fit, partial_fit and transform of raw tables.

It ties the pieces together: input validation (:mod:`~tabsparse.data.tables`), column kinds
(:mod:`~tabsparse.data.columns`), numeric blocks and their statistics
(:mod:`~tabsparse.data.numeric`, :mod:`~tabsparse.data.stats`), vocabularies and codes
(:mod:`~tabsparse.data.categories`) and the JSON state (:mod:`~tabsparse.data.state`).
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from tabsparse.data.categories import Category, CodeLookup, vocab_update
from tabsparse.data.columns import Column, infer_kind, read_column, resolve_categorical
from tabsparse.data.encoded import CODE_OFFSET, EncodedTable
from tabsparse.data.numeric import check_finite_block, fill_columns, numeric_values
from tabsparse.data.state import encoder_from_dict, encoder_to_dict
from tabsparse.data.stats import block_stats, column_scale, empty_stats, merge_stats
from tabsparse.data.tables import Table, as_table, short_list


class EncoderNotFittedError(ValueError, AttributeError):
    """Raised when a :class:`TableEncoder` is used before it was fitted."""


class TableEncoder:
    """Encode raw tables into numeric and categorical-code arrays.

    Parameters
    ----------
    categorical_features : "from_dtype", None, list of str, list of int or array of bool, \
default="from_dtype"
        Which columns are categorical. ``"from_dtype"`` decides from the
        dtypes (see the module documentation); ``None`` or an empty list makes
        every column numeric; names (DataFrame input only), positions or a
        boolean mask of length ``n_features`` list the categorical columns,
        all others being numeric.

    Attributes
    ----------
    feature_names : list of str
        Column names as strings (``"x0", "x1", ...`` for input without names).
    has_feature_names : bool
        Whether the fitted input was a DataFrame whose column names are all strings.
    n_features : int
        Number of input columns.
    kinds : list of str
        ``"numeric"`` or ``"categorical"`` per input column.
    numeric_columns, categorical_columns : list of int
        Positions of the numeric / categorical input columns, i.e. the input
        column of each column of ``EncodedTable.numeric`` / ``EncodedTable.codes``.
    categories : list of list
        Vocabulary per categorical column (bools, then numbers, then strings,
        each sorted).
    cardinalities : list of int
        ``len(vocabulary) + 2`` per categorical column.
    numeric_mean, numeric_std : numpy.ndarray
        float64 mean and population standard deviation per numeric column,
        ignoring NaN; ``std`` is 1.0 for constant or empty columns, ``mean``
        is 0.0 for empty columns.
    numeric_min, numeric_max : numpy.ndarray
        float64 extremes per numeric column (NaN when the column had no values).
    numeric_missing : numpy.ndarray
        bool per numeric column: whether it had missing values.
    n_rows_seen : int
        Number of rows fitted.
    """

    feature_names: list[str]
    has_feature_names: bool
    n_features: int
    kinds: list[str]
    numeric_columns: list[int]
    categorical_columns: list[int]
    categories: list[list[Category]]
    cardinalities: list[int]
    numeric_mean: np.ndarray
    numeric_std: np.ndarray
    numeric_min: np.ndarray
    numeric_max: np.ndarray
    numeric_missing: np.ndarray
    n_rows_seen: int

    _FITTED_ATTRIBUTES: ClassVar[tuple[str, ...]] = (
        "feature_names",
        "has_feature_names",
        "n_features",
        "kinds",
        "numeric_columns",
        "categorical_columns",
        "categories",
        "cardinalities",
        "numeric_mean",
        "numeric_std",
        "numeric_min",
        "numeric_max",
        "numeric_missing",
        "n_rows_seen",
    )

    def __init__(self, *, categorical_features: object = "from_dtype") -> None:
        self.categorical_features = categorical_features
        self._reset()

    def __repr__(self) -> str:
        return f"TableEncoder(categorical_features={self.categorical_features!r})"

    # ---- state ---------------------------------------------------------------------

    def _reset(self) -> None:
        for attr in self._FITTED_ATTRIBUTES:
            self.__dict__.pop(attr, None)
        self._vocab_keys: list[set[tuple[int, Category]]] = []
        self._stats: tuple[np.ndarray, ...] = empty_stats(0)
        self._lookups: list[CodeLookup] | None = None

    @property
    def is_fitted(self) -> bool:
        """Whether :meth:`fit` or :meth:`partial_fit` has been called."""
        return "kinds" in self.__dict__

    def _check_fitted(self) -> None:
        if not self.is_fitted:
            raise EncoderNotFittedError(
                "This TableEncoder is not fitted yet; call fit or partial_fit first."
            )

    def _finalize(self) -> None:
        self.categories = [[v for _, v in sorted(keys)] for keys in self._vocab_keys]
        self.cardinalities = [len(c) + CODE_OFFSET for c in self.categories]
        count, _, _, lo, hi = self._stats
        has = count > 0
        self.numeric_mean, self.numeric_std = column_scale(self._stats)
        self.numeric_min = np.where(has, lo, np.nan)
        self.numeric_max = np.where(has, hi, np.nan)
        self.numeric_missing = count < self.n_rows_seen
        self._lookups = None

    def _get_lookups(self) -> list[CodeLookup]:
        if self._lookups is None:
            self._lookups = [CodeLookup(vocab) for vocab in self.categories]
        return self._lookups

    # ---- fitting -------------------------------------------------------------------

    def fit(self, X: object) -> TableEncoder:
        """Learn column kinds, vocabularies and numeric statistics from ``X``.

        Parameters
        ----------
        X : pandas.DataFrame, numpy.ndarray or list of rows
            The training table (at least one row and one column).

        Returns
        -------
        TableEncoder
            ``self``.

        Raises
        ------
        ValueError
            For malformed input (not 2-D, no rows or columns, duplicated
            names, bad ``categorical_features``, infinite or out-of-range
            values, non-numeric values in a numeric column).
        TypeError
            For sparse matrices and datetime-like, complex or bytes columns.
        """
        self._reset()
        self._fit_table(as_table(X))
        return self

    def partial_fit(self, X: object) -> TableEncoder:
        """Update the encoder with one chunk of rows.

        The first call decides the columns and their kinds; later calls must
        have the same columns (matched as in :meth:`transform`) and kinds.
        Any sequence of chunks gives the same state as :meth:`fit` on their
        concatenation (statistics to rounding error).

        Parameters
        ----------
        X : pandas.DataFrame, numpy.ndarray or list of rows
            A chunk. Chunks with 0 rows are accepted once the encoder is fitted.

        Returns
        -------
        TableEncoder
            ``self``.

        Raises
        ------
        ValueError
            As :meth:`fit`, and when a chunk's columns or column kinds differ
            from the first chunk.
        TypeError
            As :meth:`fit`.
        """
        self._fit_table(as_table(X))
        return self

    def fit_transform(self, X: object) -> EncodedTable:
        """Fit on ``X`` and return its encoding.

        Parameters
        ----------
        X : pandas.DataFrame, numpy.ndarray or list of rows
            The training table.

        Returns
        -------
        EncodedTable
            Same as ``fit(X).transform(X)``.
        """
        self._reset()
        table = as_table(X)
        numeric, cols = self._fit_table(table)
        return EncodedTable(numeric, self._encode_codes(cols, table.n_rows))

    def _fit_table(self, table: Table) -> tuple[np.ndarray, list[Column]]:
        if self.is_fitted:
            return self._update(table)
        if table.n_rows == 0:
            raise ValueError(
                f"Found 0 rows (shape {(0, table.n_cols)}); at least 1 row is required to fit."
            )
        try:
            self._init_schema(table)
            return self._update(table)
        except BaseException:
            self._reset()  # a failed first fit leaves the encoder unfitted
            raise

    def _update(self, table: Table) -> tuple[np.ndarray, list[Column]]:
        """Add one chunk to the fitted state; the state is unchanged if this raises."""
        positions = self._match_columns(table)
        cols = [
            read_column(table, p, name)
            for p, name in zip(positions, self.feature_names, strict=True)
        ]
        self._check_kinds(table, cols)
        numeric = self._encode_numeric(table, positions, cols)
        chunk_stats = block_stats(numeric)
        chunk_keys: list[set[tuple[int, Category]]] = []
        for j in self.categorical_columns:
            keys: set[tuple[int, Category]] = set()
            vocab_update(keys, cols[j])
            chunk_keys.append(keys)
        for keys, new in zip(self._vocab_keys, chunk_keys, strict=True):
            keys.update(new)
        self._stats = merge_stats(self._stats, chunk_stats)
        self.n_rows_seen += table.n_rows
        self._finalize()
        return numeric, cols

    def _init_schema(self, table: Table) -> None:
        cols = [read_column(table, j, name) for j, name in enumerate(table.names)]
        declared = resolve_categorical(self.categorical_features, table)
        if declared is None:
            kinds = [infer_kind(col, table.frame is not None)[0] for col in cols]
        else:
            chosen = set(declared)
            kinds = ["categorical" if j in chosen else "numeric" for j in range(table.n_cols)]
        self.feature_names = list(table.names)
        self.has_feature_names = table.has_names
        self.n_features = table.n_cols
        self.kinds = kinds
        self.numeric_columns = [j for j, k in enumerate(kinds) if k == "numeric"]
        self.categorical_columns = [j for j, k in enumerate(kinds) if k == "categorical"]
        self.n_rows_seen = 0
        self._vocab_keys = [set() for _ in self.categorical_columns]
        self._stats = empty_stats(len(self.numeric_columns))

    def _check_kinds(self, table: Table, cols: list[Column]) -> None:
        if self.n_rows_seen == 0 or not isinstance(self.categorical_features, str):
            return  # explicit kinds cannot change; empty chunks carry no kinds
        for col, kind in zip(cols, self.kinds, strict=True):
            new_kind, by_value = infer_kind(col, table.frame is not None)
            if new_kind == kind or (by_value and kind == "categorical"):
                continue
            if col.missing_mask().all():
                continue
            raise ValueError(
                f"partial_fit: column {col.name!r} would be {new_kind} in this chunk but was "
                f"{kind} in the first chunk; column kinds are decided on the first chunk. "
                "Convert the chunk's dtypes or pass categorical_features explicitly."
            )

    # ---- transforming --------------------------------------------------------------

    def transform(self, X: object) -> EncodedTable:
        """Encode ``X`` with the fitted state.

        Parameters
        ----------
        X : pandas.DataFrame, numpy.ndarray or list of rows
            A table with the fitted columns (by name for a DataFrame when the
            encoder was fitted with feature names, otherwise by position).
            Zero rows are allowed.

        Returns
        -------
        EncodedTable
            The numeric block and the category codes.

        Raises
        ------
        EncoderNotFittedError
            If the encoder is not fitted.
        ValueError
            For mismatched columns, infinite or out-of-range values and
            non-numeric values in numeric columns.
        TypeError
            For sparse matrices and datetime-like or complex columns.
        """
        self._check_fitted()
        table = as_table(X)
        positions = self._match_columns(table)
        cols = [
            read_column(table, p, name)
            for p, name in zip(positions, self.feature_names, strict=True)
        ]
        numeric = self._encode_numeric(table, positions, cols)
        return EncodedTable(numeric, self._encode_codes(cols, table.n_rows))

    def _match_columns(self, table: Table) -> list[int]:
        """Position in ``table`` of each fitted column."""
        if self.has_feature_names and table.frame is not None:
            position = {name: j for j, name in enumerate(table.names)}
            missing = [name for name in self.feature_names if name not in position]
            fitted = set(self.feature_names)
            unexpected = [name for name in table.names if name not in fitted]
            if missing or unexpected:
                parts = []
                if missing:
                    parts.append(f"missing columns: {short_list(missing)}")
                if unexpected:
                    parts.append(f"unexpected columns: {short_list(unexpected)}")
                raise ValueError(
                    "The columns of X do not match those seen at fit; " + "; ".join(parts) + "."
                )
            return [position[name] for name in self.feature_names]
        if table.n_cols != self.n_features:
            raise ValueError(
                f"X has {table.n_cols} features, but the encoder was fitted with "
                f"{self.n_features} features."
            )
        return list(range(self.n_features))

    def _encode_numeric(self, table: Table, positions: list[int], cols: list[Column]) -> np.ndarray:
        names = [self.feature_names[j] for j in self.numeric_columns]
        arr = table.array
        if (
            arr is not None
            and arr.dtype.kind in "biuf"
            and len(self.numeric_columns) == table.n_cols
            and positions == list(range(table.n_cols))
        ):
            with np.errstate(over="ignore"):
                out = np.asarray(arr, dtype=np.float32, order="C")
            if np.shares_memory(out, arr):  # float32 C-ordered input: no copy of a large table,
                out = out.view()  # but a read-only view, so the caller's array stays untouched
                out.flags.writeable = False
            if arr.dtype.kind == "f" and arr.dtype.itemsize > 4:
                check_finite_block(out, [arr[:, j] for j in range(arr.shape[1])], names)
            elif arr.dtype.kind == "f":
                check_finite_block(out, [out[:, j] for j in range(out.shape[1])], names)
            return out
        sources = [numeric_values(cols[j]) for j in self.numeric_columns]
        out = np.empty((table.n_rows, len(sources)), dtype=np.float32)
        check = any(src.dtype.kind == "f" for src in sources)
        if fill_columns(out, sources, check_inf=check):
            check_finite_block(out, sources, names)
        return out

    def _encode_codes(self, cols: list[Column], n: int) -> np.ndarray:
        lookups = self._get_lookups()
        sources = [lookups[k].encode(cols[j]) for k, j in enumerate(self.categorical_columns)]
        out = np.empty((n, len(sources)), dtype=np.int64)
        fill_columns(out, sources)
        return out

    # ---- serialisation -------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """Return the fitted state as JSON-serialisable plain Python data.

        Returns
        -------
        dict
            Holds ``"format"``, ``"version"``, the constructor parameter, the
            column description, the vocabularies with the type of each entry
            (``"bool"``, ``"int"``, ``"float"`` or ``"str"``) and the numeric
            statistics (``null`` where undefined). ``json.dumps`` accepts it.

        Raises
        ------
        EncoderNotFittedError
            If the encoder is not fitted.
        """
        self._check_fitted()
        return encoder_to_dict(self)

    @classmethod
    def from_dict(cls, d: object) -> TableEncoder:
        """Rebuild a fitted encoder from :meth:`to_dict` output.

        Parameters
        ----------
        d : dict
            State as returned by :meth:`to_dict`, possibly after a JSON round trip.

        Returns
        -------
        TableEncoder
            A fitted encoder whose transforms equal the original's; it can
            continue with :meth:`partial_fit`.

        Raises
        ------
        ValueError
            If the state is malformed or inconsistent; the message starts with
            ``"Invalid TableEncoder state"``.
        """
        return encoder_from_dict(cls, d)


def describe_columns(enc: TableEncoder) -> list[tuple[str, str, int]]:
    """Describe the columns of a fitted encoder.

    Parameters
    ----------
    enc : TableEncoder
        A fitted encoder.

    Returns
    -------
    list of (str, str, int)
        ``(name, kind, n_categories)`` per input column in original order,
        ``n_categories`` being the vocabulary size of a categorical column
        (without the missing/unseen slots) and 0 for a numeric one.
    """
    enc._check_fitted()
    sizes = dict(zip(enc.categorical_columns, (len(c) for c in enc.categories), strict=True))
    return [
        (name, kind, sizes.get(j, 0))
        for j, (name, kind) in enumerate(zip(enc.feature_names, enc.kinds, strict=True))
    ]
