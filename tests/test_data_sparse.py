"""Tests for tabsparse.data.sparse: scipy sparse input encodes as the dense array does."""

from __future__ import annotations

import json
import tracemalloc

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

import tabsparse.data.sparse as sparse_module
from tabsparse.data import TableEncoder, is_sparse_matrix


def _dense(seed: int = 0, n: int = 300, k: int = 6) -> np.ndarray:
    rng = np.random.default_rng(seed)
    d = rng.normal(scale=3.0, size=(n, k))
    d[rng.random(d.shape) < 0.7] = 0.0
    d[:, 2] = np.abs(d[:, 2]) + 1.0  # a column without implicit zeros
    d[:, 3] = 0.0  # an all-zero column: nothing stored
    d[5, 1] = np.nan
    d[7, 1] = np.nan
    d[:, 4] = np.nan  # an all-missing column
    return d


FORMATS = [sp.csr_matrix, sp.csc_matrix, sp.coo_matrix, sp.csr_array, sp.csc_array, sp.coo_array]


def _assert_same_state(a: TableEncoder, b: TableEncoder) -> None:
    assert a.feature_names == b.feature_names
    assert a.kinds == b.kinds
    np.testing.assert_allclose(a.numeric_mean, b.numeric_mean, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(a.numeric_std, b.numeric_std, rtol=1e-10)
    np.testing.assert_array_equal(a.numeric_min, b.numeric_min)
    np.testing.assert_array_equal(a.numeric_max, b.numeric_max)
    np.testing.assert_array_equal(a.numeric_missing, b.numeric_missing)
    np.testing.assert_array_equal(a._stats[0], b._stats[0])


@pytest.mark.parametrize("fmt", FORMATS, ids=lambda f: f.__name__)
def test_sparse_formats_encode_and_fit_like_the_dense_array(fmt: type) -> None:
    d = _dense()
    X = fmt(d)
    assert is_sparse_matrix(X)
    got = TableEncoder().fit_transform(X)
    want = TableEncoder().fit_transform(d)
    assert got.numeric.dtype == np.float32 and got.numeric.flags.c_contiguous
    np.testing.assert_array_equal(got.numeric, want.numeric)  # NaN in the same places
    assert got.codes.shape == (300, 0)
    _assert_same_state(TableEncoder().fit(X), TableEncoder().fit(d))
    dense_fit = TableEncoder().fit(d)
    np.testing.assert_array_equal(dense_fit.transform(X).numeric, want.numeric)


def test_sparse_statistics_values() -> None:
    d = np.array([[0.0, 2.0], [4.0, 0.0], [0.0, np.nan], [2.0, 6.0]])
    enc = TableEncoder().fit(sp.csr_matrix(d))
    np.testing.assert_allclose(enc.numeric_mean, [1.5, 8.0 / 3.0])
    np.testing.assert_allclose(enc.numeric_std, [np.std([0, 4, 0, 2]), np.std([2, 0, 6])])
    np.testing.assert_array_equal(enc.numeric_min, [0.0, 0.0])
    np.testing.assert_array_equal(enc.numeric_max, [4.0, 6.0])
    np.testing.assert_array_equal(enc.numeric_missing, [False, True])
    assert enc.n_rows_seen == 4


def test_stored_nan_is_missing_and_negative_values_keep_min() -> None:
    d = np.array([[np.nan, -3.0], [0.0, 0.0], [np.nan, -1.0]])
    enc = TableEncoder()
    out = enc.fit_transform(sp.csc_matrix(d)).numeric
    np.testing.assert_array_equal(np.isnan(out), np.isnan(d))
    assert enc.numeric_missing.tolist() == [True, False]
    assert enc.numeric_min.tolist() == [0.0, -3.0] and enc.numeric_max.tolist() == [0.0, 0.0]
    assert enc.numeric_std[0] == 1.0  # one value only: constant


def test_block_boundaries(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sparse_module, "SPARSE_BLOCK_ROWS", 7)
    d = _dense(seed=3, n=53, k=5)
    d[[6, 7, 13, 14, 52], 0] = [1.0, 2.0, 3.0, 4.0, 5.0]  # entries on both sides of boundaries
    got = TableEncoder().fit_transform(sp.csr_matrix(d)).numeric
    np.testing.assert_array_equal(got, TableEncoder().fit_transform(d).numeric)
    _assert_same_state(TableEncoder().fit(sp.csr_matrix(d)), TableEncoder().fit(d))


def test_default_block_is_8192_rows_and_many_blocks_match() -> None:
    assert sparse_module.SPARSE_BLOCK_ROWS == 8192
    rng = np.random.default_rng(1)
    X = sp.random(8192 * 2 + 11, 4, density=0.05, format="csr", random_state=rng)
    got = TableEncoder().fit_transform(X).numeric
    np.testing.assert_array_equal(got, X.toarray().astype(np.float32))


def test_no_dense_copy_of_the_whole_matrix(monkeypatch: pytest.MonkeyPatch) -> None:
    X = sp.random(200_000, 40, density=0.01, format="csr", random_state=0, dtype=np.float64)

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("the whole matrix was densified")

    for cls in (sp.csr_matrix, sp.csc_matrix, sp.coo_matrix):
        monkeypatch.setattr(cls, "toarray", refuse)
        monkeypatch.setattr(cls, "todense", refuse)
    float32_bytes = 200_000 * 40 * 4
    tracemalloc.start()
    try:
        encoded = TableEncoder().fit_transform(X)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert encoded.numeric.shape == (200_000, 40)
    # the float32 output plus per-block and O(nnz) temporaries; a float64 copy would add 2x
    assert peak < 1.25 * float32_bytes, peak / float32_bytes


def test_duplicated_entries_are_summed_like_toarray() -> None:
    coo = sp.coo_matrix(([1.0, 2.5, 4.0], ([0, 0, 1], [1, 1, 0])), shape=(2, 2))
    enc = TableEncoder()
    out = enc.fit_transform(coo).numeric
    np.testing.assert_array_equal(out, [[0.0, 3.5], [4.0, 0.0]])
    csr = sp.csr_matrix(([1.0, 2.5], [1, 1], [0, 2, 2]), shape=(2, 2))  # duplicates kept by csr
    assert not csr.has_canonical_format
    np.testing.assert_array_equal(enc.transform(csr).numeric, [[0.0, 3.5], [0.0, 0.0]])
    assert csr.nnz == 2  # the caller's matrix is not modified
    np.testing.assert_allclose(enc.numeric_mean, [2.0, 1.75])


@pytest.mark.parametrize("dtype", [np.bool_, np.int8, np.int64, np.uint32, np.float32])
def test_integer_bool_and_float32_matrices(dtype: type) -> None:
    d: np.ndarray = (np.arange(12).reshape(4, 3) % 3).astype(dtype)
    out = TableEncoder().fit_transform(sp.csr_matrix(d)).numeric
    np.testing.assert_array_equal(out, d.astype(np.float32))


def test_infinite_and_out_of_range_values_name_the_column() -> None:
    d = np.zeros((3, 3))
    d[1, 2] = np.inf
    with pytest.raises(ValueError, match="Column 'x2' contains infinite values"):
        TableEncoder().fit(sp.csr_matrix(d))
    d[1, 2] = 0.0
    d[2, 1] = -1e39
    with pytest.raises(ValueError, match=r"Column 'x1' contains values beyond the float32 range"):
        TableEncoder().fit(sp.csr_matrix(d))
    enc = TableEncoder().fit(np.zeros((3, 3)))
    with pytest.raises(ValueError, match="Column 'x1' contains values beyond"):
        enc.transform(sp.csr_matrix(d))


def test_shapes_and_kinds_are_checked() -> None:
    with pytest.raises(ValueError, match="Found 0 rows"):
        TableEncoder().fit(sp.csr_matrix((0, 3)))
    enc = TableEncoder().fit(sp.csr_matrix(np.eye(3)))
    assert enc.transform(sp.csr_matrix((0, 3))).numeric.shape == (0, 3)
    with pytest.raises(ValueError, match="X has 2 features, but the encoder was fitted with 3"):
        enc.transform(sp.csr_matrix(np.ones((2, 2))))
    with pytest.raises(ValueError, match="categorical_features must be 'from_dtype', None or"):
        TableEncoder(categorical_features=[0]).fit(sp.csr_matrix(np.eye(3)))
    assert (
        TableEncoder(categorical_features=None).fit(sp.csr_matrix(np.eye(3))).kinds
        == ["numeric"] * 3
    )
    mixed = TableEncoder().fit(pd.DataFrame({"a": [1.0, 2.0], "b": ["u", "v"]}))
    with pytest.raises(ValueError, match="fitted with categorical or datetime columns"):
        mixed.transform(sp.csr_matrix(np.ones((2, 2))))


def test_dataframe_fitted_encoder_takes_sparse_by_position() -> None:
    df = pd.DataFrame({"a": [0.0, 1.0, 2.0], "b": [3.0, 0.0, 5.0]})
    enc = TableEncoder().fit(df)
    out = enc.transform(sp.csr_matrix(df.to_numpy())).numeric
    np.testing.assert_array_equal(out, df.to_numpy(dtype=np.float32))


def test_partial_fit_mixing_sparse_and_dense_chunks_matches_fit() -> None:
    d = _dense(seed=5, n=120, k=5)
    enc = TableEncoder()
    enc.partial_fit(sp.csr_matrix(d[:50]))
    enc.partial_fit(d[50:90])
    enc.partial_fit(sp.coo_matrix(d[90:]))
    _assert_same_state(enc, TableEncoder().fit(d))


def test_sparse_fitted_state_is_version_1_and_round_trips() -> None:
    d = _dense(seed=2, n=40, k=5)
    enc = TableEncoder().fit(sp.csr_matrix(d))
    state = json.loads(json.dumps(enc.to_dict()))
    assert state["version"] == 1
    back = TableEncoder.from_dict(state)
    np.testing.assert_array_equal(
        back.transform(sp.csr_matrix(d)).numeric, enc.transform(d).numeric
    )


def test_non_2d_sparse_input_is_refused() -> None:
    if not hasattr(sp, "coo_array"):  # pragma: no cover
        pytest.skip("scipy without sparse arrays")
    try:
        one_d = sp.coo_array(np.array([1.0, 0.0, 2.0]))
    except ValueError:  # pragma: no cover - scipy < 1.13 has only 2-D sparse arrays
        pytest.skip("scipy without 1-D sparse arrays")
    if one_d.ndim != 1:  # pragma: no cover
        pytest.skip("scipy makes 1-D input 2-D")
    with pytest.raises(ValueError, match="sparse input of shape"):
        TableEncoder().fit(one_d)
