"""Conversion of raw tables into the two arrays the network consumes.

:class:`TableEncoder` turns a table -- a pandas DataFrame as it comes, a polars
DataFrame, a pyarrow Table or anything with the Arrow or dataframe-interchange
protocol (converted once by :func:`as_pandas`, see :mod:`tabsparse.data.frames`),
a 2-D numpy array, a scipy sparse matrix (encoded block of rows by block, never
densified as a whole, see :mod:`tabsparse.data.sparse`) or a list of rows -- into
an :class:`EncodedTable`: a float32 block of numeric columns and an int64 block of
category codes. It learns what it needs
(column kinds, category vocabularies, numeric statistics) with :meth:`fit`, or
chunk by chunk with :meth:`partial_fit` for data larger than memory, and its
state round-trips through JSON (:meth:`TableEncoder.to_dict` /
:meth:`TableEncoder.from_dict`) so that a non-Python consumer can encode rows
from the stored specification. This package depends on numpy and pandas only
(and on pyarrow when a table from another library arrives).

Encoding
--------
* ``EncodedTable.numeric``: float32, C-contiguous, one column per numeric
  feature in original column order. Missing values stay NaN (the network
  handles them); values are neither scaled nor shifted here, the statistics
  are only recorded. ``inf`` never appears: infinite values, and finite
  values beyond the float32 range (about 3.4e38), raise ``ValueError``
  naming the column, at fit and at transform.
* ``EncodedTable.codes``: int64, C-contiguous, one column per categorical
  feature. ``0`` means missing, ``1`` means a value not seen during fitting,
  ``k + 2`` means the ``k``-th entry of that column's vocabulary, so a
  column needs ``len(vocabulary) + 2`` embedding rows (``cardinalities``).

Column kinds (``categorical_features``)
---------------------------------------
* ``"from_dtype"`` (default). DataFrame columns: numeric for numpy
  int/uint/float/bool dtypes of any width and the pandas nullable ``Int*``,
  ``UInt*``, ``Float*`` and ``boolean`` dtypes (``<NA>`` becomes NaN);
  categorical for ``category``, ``object`` and string dtypes (``string``
  and pandas' default ``str``). Numpy arrays and lists of rows: a numeric
  array is all numeric. In an object or string array each column is
  inspected: it is numeric when all its non-missing values are numbers
  (int, float or bool; a column with no values at all also counts as
  numeric), otherwise categorical. Strings that look like numbers ("1.5")
  are strings and make the column categorical.
* ``None`` or an empty list: every column is numeric.
* A list of column names (DataFrame input only; compared with the names as
  strings, see ``feature_names``), a list of integer positions (negative
  positions count from the end) or a boolean mask of length ``n_features``:
  the listed columns are categorical, all others numeric. Integers are always
  positions, even for a DataFrame with integer column names.
* A column treated as numeric whose dtype is not numeric (object, string,
  category) is converted with :func:`pandas.to_numeric`, so numeric strings
  such as ``"1.5"`` are accepted and bools count as 0/1; any other value
  raises ``ValueError`` naming the column and an example value.
* datetime, timedelta, period, interval, complex and bytes columns raise
  ``TypeError``; convert them to numeric features (timestamps, parts,
  durations in seconds, ...) or to strings first. With
  ``datetime_features="expand"`` a datetime column instead becomes numeric
  features ``"<name>__year"``, ``"<name>__month"``, ... (the parts that vary
  in the training data; see :mod:`tabsparse.data.datetimes`); ``feature_names``
  then lists the features and ``input_names`` the input columns.
* A scipy sparse matrix or array has numeric columns only, named ``x0, x1, ...``;
  a stored NaN is missing as in a dense array.
* At fit, a text column that looks like dates stored as strings or is nearly
  unique per row (identifiers, titles) gets one :class:`ColumnWarning` naming
  it and saying what to do (see :mod:`tabsparse.data.column_warnings`); so does,
  at :meth:`fit`, a feature missing in every row or constant. A feature missing
  in every fitted row is missing at transform whatever it holds (it cannot move
  predictions), and a transform whose rows are mostly unseen categories of a
  column, or mostly missing where fit saw few, gets a :class:`DriftWarning`.

Categorical values
------------------
* Vocabularies hold JSON-able Python scalars of three kinds: bool, number
  (``int``, or ``float`` when not integral; integral floats are stored as
  ints, so ``1.0`` and ``1`` are the same category) and ``str``. NaN, None,
  ``pd.NA`` and ``NaT`` are missing and never enter a vocabulary; ``inf``
  raises ``ValueError``. Values of any other type raise ``TypeError`` at fit.
  Ints are compared exactly (``2**60`` and ``2**60 + 1`` are two categories,
  also next to floats and bools); ints beyond the int64 range are stored as
  the nearest float, so two of them that round to one float are one category.
* Within one column values of different kinds are different categories:
  ``"1"``, ``1`` and ``True`` are three categories when all three occur in
  the fitted data. Mixed object columns are allowed.
* Order: bools, then numbers, then strings, each sorted by value. This is
  deterministic and identical for :meth:`fit` and any sequence of
  :meth:`partial_fit` calls over the same rows.
* A ``category`` dtype contributes *all* its declared categories, observed or
  not (in the order above, not the dtype's order): the dtype is the user's
  declaration of the possible values, and the vocabulary then does not depend
  on which rows were sampled.
* At transform the dtype may differ from fit (category at fit and object at
  transform, ints at fit and floats at transform, ...). Values are matched
  by value, and where a value's kind is absent from the vocabulary it is
  converted when that is unambiguous:

  - bool and number follow Python equality (``True == 1``, ``False == 0``)
    unless the vocabulary holds both bools and numbers, in which case the
    kinds stay strictly apart;
  - a vocabulary of only strings receives numbers as their canonical text
    (``7`` and ``7.0`` match ``"7"``, ``2.5`` matches ``"2.5"``);
  - a vocabulary of only numbers receives strings parsed as numbers
    (``"7"`` and ``"7.0"`` match ``7``).

  Anything else that is not in the vocabulary gets code 1 (unseen), never an
  error, except ``inf``.

Columns and names
-----------------
* ``feature_names`` are the column names as strings, or ``x0, x1, ...`` for
  input without names. ``has_feature_names`` follows scikit-learn: true only
  for a DataFrame whose column names are all strings. Duplicated names
  (after conversion to ``str``) raise ``ValueError``.
* Fitted with feature names, a DataFrame is matched by column name (any
  order; missing or unexpected columns raise ``ValueError``). In every other
  case columns are taken by position and their number must match.

Statistics and streaming
------------------------
* ``numeric_mean`` / ``numeric_std`` are the mean and population standard
  deviation (ddof=0) in float64 of the values as encoded (after the float32
  cast), ignoring NaN. A column that is constant or has no values gets
  ``std = 1.0``; one with no values gets ``mean = 0.0``.
* Statistics are accumulated per block of rows (count, mean, sum of squared
  deviations, min, max) and merged with Chan et al.'s parallel update, so
  :meth:`partial_fit` over any chunking agrees with :meth:`fit` on the
  concatenation to rounding error.
* Kinds are decided on the first chunk. A later chunk in which a column
  would get another kind raises ``ValueError``, except when the column is
  entirely missing in that chunk or when a categorical column of an object
  array happens to hold only numbers. Fix the kinds with an explicit
  ``categorical_features`` to stream data whose dtypes vary.

Performance
-----------
Work is vectorised per column: numeric columns are copied into the output in
cache-sized row blocks, categorical columns are mapped with pandas hash
tables (``Index.get_indexer``). The only per-value Python loops are for
object columns holding several kinds of values (say ints and strings): at
fit, and at transform for the values not found directly or when the
vocabulary holds both bools and numbers.

Its modules:

=======================  ================================================================
:mod:`.tables`           a raw 2-D input validated into a table (DataFrame, array, rows)
:mod:`.frames`           DataFrames of other libraries (polars, pyarrow, Arrow protocols)
:mod:`.sparse`           scipy sparse input, encoded block by block without a dense copy
:mod:`.columns`          one input column in a normalised form and its kind
:mod:`.numeric`          numeric columns: conversion and the float32 block
:mod:`.categories`       category vocabularies and codes
:mod:`.datetimes`        datetime columns expanded into numeric parts
:mod:`.stats`            streaming statistics of numeric columns and their scale
:mod:`.encoder`          :class:`TableEncoder`: fit, partial_fit, transform
:mod:`.encoded`          :class:`EncodedTable` and the category-code convention
:mod:`.state`            the encoder's JSON state: writing and validating it
:mod:`.column_checks`    what the encoder says about its columns (kinds, sizes)
:mod:`.column_warnings`  warnings about identifier- and date-like text columns
=======================  ================================================================
"""

from __future__ import annotations

from tabsparse.data.categories import Category
from tabsparse.data.column_checks import describe_columns
from tabsparse.data.column_warnings import ColumnWarning, DriftWarning
from tabsparse.data.datetimes import DATETIME_PARTS
from tabsparse.data.encoded import CODE_MISSING, CODE_OFFSET, CODE_UNSEEN, EncodedTable
from tabsparse.data.encoder import EncoderNotFittedError, TableEncoder
from tabsparse.data.frames import as_pandas
from tabsparse.data.sparse import SPARSE_BLOCK_ROWS, is_sparse_matrix
from tabsparse.data.state import STATE_VERSION

__all__ = [
    "CODE_MISSING",
    "CODE_OFFSET",
    "CODE_UNSEEN",
    "DATETIME_PARTS",
    "SPARSE_BLOCK_ROWS",
    "STATE_VERSION",
    "Category",
    "ColumnWarning",
    "DriftWarning",
    "EncodedTable",
    "EncoderNotFittedError",
    "TableEncoder",
    "as_pandas",
    "describe_columns",
    "is_sparse_matrix",
]
