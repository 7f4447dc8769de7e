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
from tabsparse.data.column_checks import ColumnChecks
from tabsparse.data.column_warnings import warn_unlikely_features
from tabsparse.data.columns import Column, infer_kind, read_column, resolve_categorical
from tabsparse.data.datetimes import (
    datetime_index,
    expand_column,
    is_datetime_column,
    part_name,
    varying_parts,
    zone_of,
)
from tabsparse.data.encoded import CODE_OFFSET, EncodedTable
from tabsparse.data.numeric import check_finite_block, fill_columns, numeric_values
from tabsparse.data.sparse import check_sparse_values, sparse_stats, sparse_to_float32
from tabsparse.data.state import encoder_from_dict, encoder_to_dict
from tabsparse.data.stats import block_stats, column_scale, empty_stats, merge_stats
from tabsparse.data.tables import Table, as_table, short_list

DATETIME_OPTIONS = ("error", "expand")


class EncoderNotFittedError(ValueError, AttributeError):
    """Raised when a :class:`TableEncoder` is used before it was fitted."""


class TableEncoder(ColumnChecks):
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
    datetime_features : {"error", "expand"}, default="error"
        What to do with datetime columns. ``"error"`` refuses them with a
        ``TypeError`` (convert them yourself); ``"expand"`` turns each one
        that is not listed in ``categorical_features`` into numeric features
        ``"<name>__year"``, ``"<name>__month"``, ... -- the parts of a fixed
        set that vary in the training data (see :mod:`tabsparse.data.datetimes`).

    Attributes
    ----------
    feature_names : list of str
        Names of the features the network sees: the column names as strings
        (``"x0", "x1", ...`` for input without names), each expanded datetime
        column replaced by its parts (``"when__year", ...``). Without expanded
        datetime columns this equals ``input_names``.
    input_names : list of str
        The input column names as strings, matched at transform.
    has_feature_names : bool
        Whether the fitted input was a DataFrame whose column names are all strings.
    n_features : int
        Number of features (``len(feature_names)``).
    datetime_parts : dict of str to list of str
        The parts each expanded datetime column gives, by input name (empty
        unless ``datetime_features="expand"`` met a datetime column).
    datetime_zones : dict of str to str or None
        The time zone each expanded datetime column had at fit (None: naive).
    kinds : list of str
        ``"numeric"`` or ``"categorical"`` per feature.
    numeric_columns, categorical_columns : list of int
        Positions of the numeric / categorical features, i.e. the feature
        of each column of ``EncodedTable.numeric`` / ``EncodedTable.codes``.
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
    input_names: list[str]
    datetime_parts: dict[str, list[str]]
    datetime_zones: dict[str, str | None]
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
        "input_names",
        "datetime_parts",
        "datetime_zones",
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

    def __init__(
        self, *, categorical_features: object = "from_dtype", datetime_features: str = "error"
    ) -> None:
        self.categorical_features = categorical_features
        self.datetime_features = datetime_features
        self._reset()

    def __repr__(self) -> str:
        extra = ""
        if self.datetime_features != "error":
            extra = f", datetime_features={self.datetime_features!r}"
        return f"TableEncoder(categorical_features={self.categorical_features!r}{extra})"

    # ---- state ---------------------------------------------------------------------

    def _reset(self) -> None:
        for attr in self._FITTED_ATTRIBUTES:
            self.__dict__.pop(attr, None)
        self._vocab_keys: list[set[tuple[int, Category]]] = []
        self._stats: tuple[np.ndarray, ...] = empty_stats(0)
        self._lookups: list[CodeLookup] | None = None
        self._warned: set[str] = set()  # columns a warning of the first chunk named
        # Missing values per categorical column at fit (None: unknown, a state without them).
        self._cat_missing: np.ndarray | None = np.zeros(0, dtype=np.int64)

    @property
    def is_fitted(self) -> bool:
        """Whether :meth:`fit` or :meth:`partial_fit` has been called."""
        return "kinds" in self.__dict__

    @property
    def input_positions(self) -> np.ndarray:
        """int64 ``(n_features,)``: the position in ``input_names`` of each feature's input
        column (the parts of an expanded datetime column share their column's position)."""
        self._check_fitted()
        out = [
            i
            for i, name in enumerate(self.input_names)
            for _ in self.datetime_parts.get(name, [name])
        ]
        return np.asarray(out, dtype=np.int64)

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
        X : DataFrame, numpy.ndarray, scipy sparse matrix or list of rows
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
            For datetime-like (unless ``datetime_features="expand"``), complex
            or bytes columns and non-numeric sparse matrices.

        Warns
        -----
        ColumnWarning
            Once per text column that looks like dates stored as strings or
            is nearly unique per row, and once per feature missing in every
            row or constant (one value, none missing, at least 2 rows; not
            checked for sparse matrices, whose all-zero columns are common);
            see :mod:`tabsparse.data.column_warnings`.
        """
        self._reset()
        table = as_table(X)
        _, cols = self._fit_table(table)
        self._warn_uninformative(table, cols)
        return self

    def partial_fit(self, X: object) -> TableEncoder:
        """Update the encoder with one chunk of rows.

        The first call decides the columns and their kinds; later calls must
        have the same columns (matched as in :meth:`transform`) and kinds.
        Any sequence of chunks gives the same state as :meth:`fit` on their
        concatenation (statistics to rounding error).

        Parameters
        ----------
        X : DataFrame, numpy.ndarray, scipy sparse matrix or list of rows
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
        X : DataFrame, numpy.ndarray, scipy sparse matrix or list of rows
            The training table.

        Returns
        -------
        EncodedTable
            Same as ``fit(X).transform(X)``.
        """
        self._reset()
        table = as_table(X)
        numeric, cols = self._fit_table(table)
        self._warn_uninformative(table, cols)
        return EncodedTable(numeric, self._encode_codes(cols, table.n_rows))

    def _fit_table(self, table: Table) -> tuple[np.ndarray, list[Column]]:
        if self.datetime_features not in DATETIME_OPTIONS:
            raise ValueError(
                f"datetime_features must be 'error' or 'expand', got {self.datetime_features!r}."
            )
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
        cols = self._read_features(table, positions)
        self._check_kinds(table, cols)
        numeric = self._encode_numeric(table, positions, cols)
        if table.sparse is not None:
            chunk_stats = sparse_stats(table.sparse)
        else:
            chunk_stats = block_stats(numeric)
        chunk_keys: list[set[tuple[int, Category]]] = []
        chunk_missing = np.zeros(len(self.categorical_columns), dtype=np.int64)
        for k, j in enumerate(self.categorical_columns):
            keys: set[tuple[int, Category]] = set()
            vocab_update(keys, cols[j])
            chunk_keys.append(keys)
            chunk_missing[k] = int(np.count_nonzero(cols[j].missing_mask()))
        if self.n_rows_seen == 0:  # the first chunk: advice on columns that are no features
            for j, keys in zip(self.categorical_columns, chunk_keys, strict=True):
                if warn_unlikely_features(cols[j], len(keys)):
                    self._warned.add(cols[j].name)
        for keys, new in zip(self._vocab_keys, chunk_keys, strict=True):
            keys.update(new)
        self._stats = merge_stats(self._stats, chunk_stats)
        if self._cat_missing is not None:
            self._cat_missing = self._cat_missing + chunk_missing
        self.n_rows_seen += table.n_rows
        self._finalize()
        return numeric, cols

    def _init_schema(self, table: Table) -> None:
        declared = resolve_categorical(self.categorical_features, table)
        parts: dict[str, list[str]] = {}
        zones: dict[str, str | None] = {}
        if table.sparse is not None:
            if declared:
                raise ValueError(
                    "A sparse matrix has numeric columns only; categorical_features must be "
                    "'from_dtype', None or empty for sparse input, got "
                    f"{self.categorical_features!r}."
                )
            names, kinds = list(table.names), ["numeric"] * table.n_cols
        else:
            chosen = set(declared or [])
            names, kinds = [], []
            for j, name in enumerate(table.names):
                raw = table.column(j)
                if (
                    self.datetime_features == "expand"
                    and j not in chosen
                    and is_datetime_column(raw)
                ):
                    index = datetime_index(raw, name)
                    parts[name], zones[name] = varying_parts(index), zone_of(index)
                    names += [part_name(name, part) for part in parts[name]]
                    kinds += ["numeric"] * len(parts[name])
                    continue
                col = read_column(table, j, name)
                names.append(name)
                if declared is None:
                    kinds.append(infer_kind(col, table.frame is not None)[0])
                else:
                    kinds.append("categorical" if j in chosen else "numeric")
            clashes = sorted({n for n in names if names.count(n) > 1})
            if clashes:
                raise ValueError(
                    f"Expanded datetime features clash with other column names: {clashes}; "
                    "rename those columns."
                )
        self.input_names = list(table.names)
        self.datetime_parts = parts
        self.datetime_zones = zones
        self.feature_names = names
        self.has_feature_names = table.has_names
        self.n_features = len(names)
        self.kinds = kinds
        self.numeric_columns = [j for j, k in enumerate(kinds) if k == "numeric"]
        self.categorical_columns = [j for j, k in enumerate(kinds) if k == "categorical"]
        self.n_rows_seen = 0
        self._vocab_keys = [set() for _ in self.categorical_columns]
        self._cat_missing = np.zeros(len(self.categorical_columns), dtype=np.int64)
        self._stats = empty_stats(len(self.numeric_columns))

    def _check_kinds(self, table: Table, cols: list[Column]) -> None:
        if (
            self.n_rows_seen == 0
            or not isinstance(self.categorical_features, str)
            or table.sparse is not None
        ):
            return  # explicit kinds cannot change; empty chunks carry no kinds; sparse: numeric
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

    def transform(self, X: object, *, what: str = "X") -> EncodedTable:
        """Encode ``X`` with the fitted state.

        Parameters
        ----------
        X : DataFrame, numpy.ndarray, scipy sparse matrix or list of rows
            A table with the fitted columns (by name for a DataFrame when the
            encoder was fitted with feature names, otherwise by position).
            Zero rows are allowed. A sparse matrix is accepted when every
            feature is numeric and no datetime column was expanded; it is
            encoded block of rows by block (see :mod:`tabsparse.data.sparse`).
        what : str
            The table's name in the messages of mismatched columns.

        Returns
        -------
        EncodedTable
            The numeric block (float32, in memory for the whole table) and
            the category codes.

        Raises
        ------
        EncoderNotFittedError
            If the encoder is not fitted.
        ValueError
            For mismatched columns, infinite or out-of-range values,
            non-numeric values in numeric columns and sparse matrices given to
            an encoder with categorical or datetime columns.
        TypeError
            For datetime-like (unless expanded at fit) or complex columns.
        """
        self._check_fitted()
        table = as_table(X)
        positions = self._match_columns(table, what)
        cols = self._read_features(table, positions)
        numeric = self._encode_numeric(table, positions, cols)
        codes = self._encode_codes(cols, table.n_rows)
        if table.sparse is None:
            numeric = self._drift(numeric, codes, cols)
        return EncodedTable(numeric, codes)

    def _read_features(self, table: Table, positions: list[int]) -> list[Column]:
        """The features of ``table`` (its columns at ``positions``, datetime ones expanded);
        none for a sparse matrix, whose values are read by the numeric encoding."""
        if table.sparse is not None:
            if self.categorical_columns or self.datetime_parts:
                raise ValueError(
                    "A sparse matrix has numeric columns only, but the encoder was fitted with "
                    "categorical or datetime columns; pass a DataFrame or a dense array."
                )
            return []
        cols: list[Column] = []
        for p, name in zip(positions, self.input_names, strict=True):
            if name in self.datetime_parts:
                raw = table.column(p)
                zone = self.datetime_zones[name]
                cols += expand_column(raw, name, self.datetime_parts[name], zone)
            else:
                cols.append(read_column(table, p, name))
        return cols

    def _match_columns(self, table: Table, what: str = "X") -> list[int]:
        """Position in ``table`` (named ``what`` in errors) of each fitted input column."""
        if self.has_feature_names and table.frame is not None:
            position = {name: j for j, name in enumerate(table.names)}
            missing = [name for name in self.input_names if name not in position]
            fitted = set(self.input_names)
            unexpected = [name for name in table.names if name not in fitted]
            if missing or unexpected:
                parts = []
                if missing:
                    parts.append(f"missing columns: {short_list(missing)}")
                if unexpected:
                    parts.append(f"unexpected columns: {short_list(unexpected)}")
                raise ValueError(
                    f"The columns of {what} do not match those seen at fit; "
                    + "; ".join(parts)
                    + "."
                )
            return [position[name] for name in self.input_names]
        n_inputs = len(self.input_names)
        if table.n_cols != n_inputs:
            raise ValueError(
                f"{what} has {table.n_cols} features, but the encoder was fitted with "
                f"{n_inputs} features."
            )
        return list(range(n_inputs))

    def _encode_numeric(self, table: Table, positions: list[int], cols: list[Column]) -> np.ndarray:
        names = [self.feature_names[j] for j in self.numeric_columns]
        if table.sparse is not None:  # every feature numeric, positions == range (checked)
            check_sparse_values(table.sparse, names)
            return sparse_to_float32(table.sparse)
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

    def _fit_all_missing(self) -> tuple[np.ndarray, np.ndarray]:
        """Per numeric and per categorical column, whether it was missing in every fitted row
        (a categorical column of a state without missing counts: whether its vocabulary is
        empty)."""
        numeric = np.asarray(self._stats[0] == 0, dtype=bool)
        if self._cat_missing is None:
            categorical = np.array([not c for c in self.categories], dtype=bool)
        else:
            categorical = np.asarray(self._cat_missing >= self.n_rows_seen, dtype=bool)
        return numeric, categorical

    def _encode_codes(self, cols: list[Column], n: int) -> np.ndarray:
        lookups = self._get_lookups()
        empty = self._fit_all_missing()[1]
        sources = [
            np.zeros(n, dtype=np.int64) if empty[k] else lookups[k].encode(cols[j])
            for k, j in enumerate(self.categorical_columns)
        ]
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
