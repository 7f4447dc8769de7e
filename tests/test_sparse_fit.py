"""Fitting on a scipy sparse matrix: batch by batch, never the whole matrix dense, and the same
model as the fit on its dense array (issue 25 item 6)."""

from __future__ import annotations

import tracemalloc
from typing import Any

import numpy as np
import pytest
import torch
from conftest import TINY_FIT

import tabsparse.data.encoder as encoder_module
import tabsparse.data.sparse as sparse_module
import tabsparse.estimators._explaining as explaining_module
import tabsparse.estimators._tables as base_module
from tabsparse import TabNetClassifier, TabNetPretrainer, TabNetRegressor
from tabsparse.data import TableEncoder
from tabsparse.data.sparse import CSRRows, as_csr, encode_sparse_rows, fit_sparse_rows
from tabsparse.training import Callback, TensorData, data_fingerprint
from tabsparse.training.sparse_rows import SparseRows, sparse_tensor_data

sp = pytest.importorskip("scipy.sparse")

TINY: dict[str, Any] = {**TINY_FIT, "virtual_batch_size": 32}


def wide(n: int = 700, k: int = 30, density: float = 0.2, seed: int = 0) -> tuple[Any, np.ndarray]:
    """A sparse float64 matrix with a NaN, negative values and an all-zero column; a target."""
    rng = np.random.default_rng(seed)
    X = sp.random(n, k, density=density, format="csr", random_state=seed, dtype=np.float64)
    X.data = 3.0 * X.data - 1.0
    X = X.tolil()
    X[3, 2] = np.nan
    X = X.tocsr()
    X.eliminate_zeros()
    cols = np.zeros(k)
    cols[:4] = [1.5, -2.0, 1.0, 0.5]
    y = np.nan_to_num(X @ cols) + 0.1 * rng.normal(size=n)
    return X, y


def assert_same_fit(a: Any, b: Any, X: Any) -> None:
    """Two fitted estimators predict (and explain) alike, to float32 rounding."""
    if hasattr(a, "predict_proba"):
        np.testing.assert_allclose(a.predict_proba(X), b.predict_proba(X), rtol=1e-5, atol=1e-6)
    else:
        np.testing.assert_allclose(a.predict(X), b.predict(X), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(a.explain(X).masks, b.explain(X).masks, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(a.feature_importances_, b.feature_importances_, rtol=1e-5)
    assert [r["train_loss"] for r in a.history_] == pytest.approx(
        [r["train_loss"] for r in b.history_], rel=1e-5
    )


# ---- the same model as the dense fit ----------------------------------------------------------


@pytest.mark.parametrize("early_stopping", [False, True])
@pytest.mark.parametrize("weighted", [False, True])
def test_regressor_on_sparse_equals_the_dense_fit(early_stopping: bool, weighted: bool) -> None:
    X, y = wide()
    w = np.random.default_rng(1).uniform(0.2, 2.0, size=len(y)) if weighted else None
    params = {**TINY, "early_stopping": early_stopping}
    sparse_model = TabNetRegressor(**params).fit(X, y, sample_weight=w)
    dense_model = TabNetRegressor(**params).fit(X.toarray(), y, sample_weight=w)
    assert ("val_loss" in sparse_model.history_[0]) is early_stopping
    assert_same_fit(sparse_model, dense_model, X)
    if early_stopping:
        assert [r["val_loss"] for r in sparse_model.history_] == pytest.approx(
            [r["val_loss"] for r in dense_model.history_], rel=1e-5
        )


@pytest.mark.parametrize("early_stopping", [False, True])
@pytest.mark.parametrize("weighted", [False, True])
def test_classifier_on_sparse_equals_the_dense_fit(early_stopping: bool, weighted: bool) -> None:
    X, y = wide(seed=2)
    labels = np.digitize(y, np.quantile(y, [0.33, 0.66]))  # three classes, stratified split
    w = np.random.default_rng(3).uniform(0.2, 2.0, size=len(y)) if weighted else None
    params = {**TINY, "early_stopping": early_stopping, "scoring": "accuracy"}
    if not early_stopping:
        params["scoring"] = "loss"
    sparse_model = TabNetClassifier(**params).fit(X, labels, sample_weight=w)
    dense_model = TabNetClassifier(**params).fit(X.toarray(), labels, sample_weight=w)
    assert_same_fit(sparse_model, dense_model, X)
    if early_stopping:
        assert [r["val_score"] for r in sparse_model.history_] == pytest.approx(
            [r["val_score"] for r in dense_model.history_], rel=1e-6
        )


def test_sparse_x_val_and_warm_start_equal_the_dense_ones() -> None:
    X, y = wide(n=600, seed=4)
    X_val, y_val = wide(n=150, seed=5)
    params = {**TINY, "warm_start": True}
    sparse_model = TabNetRegressor(**params).fit(X, y, X_val=X_val, y_val=y_val)
    dense_model = TabNetRegressor(**params).fit(X.toarray(), y, X_val=X_val.toarray(), y_val=y_val)
    assert_same_fit(sparse_model, dense_model, X)
    sparse_model.fit(X, y, X_val=X_val.tocsc(), y_val=y_val)  # warm start: a second fit
    dense_model.fit(X.toarray(), y, X_val=X_val.toarray(), y_val=y_val)
    assert len(sparse_model.history_) == 2 * TINY["max_epochs"]
    assert_same_fit(sparse_model, dense_model, X)


@pytest.mark.parametrize(
    "make",
    [
        lambda X: X.tocsc(),
        lambda X: X.tocoo(),
        lambda X: sp.csr_array(X),
        lambda X: sp.coo_array(X),
    ],
    ids=["csc", "coo", "csr_array", "coo_array"],
)
def test_every_sparse_format_fits_as_csr(make: Any) -> None:
    X, y = wide(n=300, k=12, seed=6)
    reference = TabNetRegressor(**TINY).fit(X, y)
    model = TabNetRegressor(**TINY).fit(make(X), y)
    np.testing.assert_array_equal(model.predict(X), reference.predict(X))


@pytest.mark.parametrize("dtype", [np.int64, np.int8, np.uint16, np.bool_, np.float32])
def test_integer_and_bool_sparse_matrices_fit_as_their_dense_arrays(dtype: Any) -> None:
    rng = np.random.default_rng(7)
    dense = (rng.random((300, 10)) < 0.3) * rng.integers(1, 5, size=(300, 10))
    X = sp.csr_matrix(dense.astype(dtype))
    y = (dense[:, 0] + dense[:, 1] > 2).astype(int)
    model = TabNetClassifier(**TINY).fit(X, y)
    reference = TabNetClassifier(**TINY).fit(dense.astype(dtype), y)
    np.testing.assert_array_equal(model.predict_proba(X), reference.predict_proba(X))


def test_stored_nan_is_missing_as_in_the_dense_fit_and_inf_is_refused() -> None:
    X, y = wide(n=300, k=8, seed=8)
    X = X.tolil()
    X[::7, 1] = np.nan  # many missing values in one column
    X = X.tocsr()
    model = TabNetRegressor(**TINY).fit(X, y)
    reference = TabNetRegressor(**TINY).fit(X.toarray(), y)
    np.testing.assert_array_equal(
        model.encoder_.numeric_missing, reference.encoder_.numeric_missing
    )
    assert model.encoder_.numeric_missing[1]
    np.testing.assert_allclose(model.predict(X), reference.predict(X), rtol=1e-5, atol=1e-5)
    bad = X.copy()
    bad.data[5] = np.inf
    column = int(bad.indices[5])
    with pytest.raises(ValueError, match=f"Column 'x{column}' contains infinite values"):
        TabNetRegressor(**TINY).fit(bad, y)
    with pytest.raises(ValueError, match=f"Column 'x{column}' contains infinite values"):
        TabNetRegressor(**TINY).fit(X, y, X_val=bad, y_val=y)


@pytest.mark.filterwarnings("ignore:X does not have valid feature names")
def test_sparse_x_val_against_a_frame_fitted_model_is_refused() -> None:
    import pandas as pd

    X, y = wide(n=300, k=4, seed=9)
    frame = pd.DataFrame(X.toarray(), columns=list("abcd"))
    frame["c"] = np.where(frame["c"] > 0, "u", "v")  # a categorical column
    model = TabNetRegressor(**TINY, warm_start=True).fit(frame, y)
    with pytest.raises(ValueError, match="numeric columns only"):
        model.fit(X, y)


def test_pretrainer_and_fine_tuning_on_sparse_equal_the_dense_ones() -> None:
    X, y = wide(n=600, seed=10)
    params = {**TINY, "early_stopping": True}
    pre = TabNetPretrainer(**params).fit(X)
    pre_dense = TabNetPretrainer(**params).fit(X.toarray())
    np.testing.assert_allclose(pre.transform(X), pre_dense.transform(X), rtol=1e-5, atol=1e-5)
    assert [r["val_loss"] for r in pre.history_] == pytest.approx(
        [r["val_loss"] for r in pre_dense.history_], rel=1e-5
    )
    tuned = TabNetRegressor(**TINY, pretrained=pre).fit(X, y)
    tuned_dense = TabNetRegressor(**TINY, pretrained=pre_dense).fit(X.toarray(), y)
    assert_same_fit(tuned, tuned_dense, X)


class StopAfter(Callback):
    def __init__(self, epochs: int) -> None:
        self.epochs = epochs

    def on_epoch_end(self, trainer: Any, record: dict[str, float]) -> None:
        trainer.stop = len(trainer.history) == self.epochs


def test_checkpointed_sparse_fit_resumes_on_its_rows_only(tmp_path: Any) -> None:
    X, y = wide(n=300, k=8, seed=11)
    params = {**TINY, "max_epochs": 4, "early_stopping": True}
    whole = TabNetRegressor(**params).fit(X, y)
    TabNetRegressor(**params, checkpoint_dir=tmp_path, callbacks=[StopAfter(2)]).fit(X, y)
    other = X.copy()
    other.data[0] += 1.0  # one stored value changed
    with pytest.raises(ValueError, match="written by a fit on other data"):
        TabNetRegressor(**params).fit(other, y, resume_from=tmp_path)
    resumed = TabNetRegressor(**params).fit(X, y, resume_from=tmp_path)
    assert resumed.n_iter_ == 4
    np.testing.assert_allclose(resumed.predict(X), whole.predict(X), rtol=1e-5, atol=1e-5)


# ---- never densified as a whole ---------------------------------------------------------------


class Densified:
    """Records the number of rows of every dense block made from sparse data during a fit."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.rows: list[int] = []
        dense, to_float32 = CSRRows.dense, encoder_module.sparse_to_float32

        def record_dense(rows: CSRRows, idx: Any = None) -> np.ndarray:
            out = dense(rows, idx)
            self.rows.append(out.shape[0])
            return out

        def record_to_float32(csr: Any) -> np.ndarray:
            self.rows.append(int(csr.shape[0]))
            return to_float32(csr)

        def refuse(matrix: Any, *args: Any, **kwargs: Any) -> Any:
            raise AssertionError(f"a sparse matrix of shape {matrix.shape} was densified")

        monkeypatch.setattr(CSRRows, "dense", record_dense)
        monkeypatch.setattr(encoder_module, "sparse_to_float32", record_to_float32)
        for cls in (sp._base._spbase, sp._compressed._cs_matrix, sp._coo._coo_base):
            for name in ("toarray", "todense"):
                if name in vars(cls):
                    monkeypatch.setattr(cls, name, refuse)


@pytest.mark.parametrize("early_stopping", [False, True])
def test_fit_densifies_one_batch_or_block_at_a_time(
    monkeypatch: pytest.MonkeyPatch, early_stopping: bool
) -> None:
    X, y = wide(n=3000, k=20, density=0.1, seed=12)
    block, sample, batch = 500, 400, 256
    monkeypatch.setattr(sparse_module, "SPARSE_BLOCK_ROWS", block)  # encoder statistics
    monkeypatch.setattr(base_module, "SPARSE_BLOCK_ROWS", block)  # predict / explain
    monkeypatch.setattr(explaining_module, "IMPORTANCE_SAMPLE", sample)
    monkeypatch.setattr(explaining_module, "SELECTOR_ROWS", 300)
    seen = Densified(monkeypatch)
    params = {**TINY, "batch_size": batch, "max_epochs": 2, "early_stopping": early_stopping}
    model = TabNetClassifier(**params).fit(X, (y > np.median(y)).astype(int))
    n_train = 2700 if early_stopping else 3000
    rows = seen.rows
    assert max(rows) <= block < X.shape[0]
    assert rows[:6] == [block] * 6  # the encoder's statistics, block by block
    assert rows[-3] == sample  # the importance sample
    assert rows[-2] == explaining_module.BACKGROUND_ROWS  # the attributions' background
    assert rows[-1] == 300  # the column selector's rows
    epochs = rows[6:-3]
    if early_stopping:  # each epoch: its batches, then the validation rows as one chunk
        assert [i for i, r in enumerate(epochs) if r == 300] == [
            len(epochs) // 2 - 1,
            len(epochs) - 1,
        ]
        epochs = [r for r in epochs if r != 300]
    # every row once per epoch, and the weight average's batch-norm statistics pass (all the
    # training rows here, fewer than 4,096) after each validated epoch, or once at the end
    passes = 2 if early_stopping else 1
    assert max(epochs) <= batch and sum(epochs) == (2 + passes) * n_train
    seen.rows.clear()
    model.predict_proba(X)
    model.explain(X)
    assert seen.rows == [block] * 12


def test_x_val_and_pretrainer_are_not_densified_as_a_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    X, y = wide(n=2000, k=10, density=0.1, seed=13)
    monkeypatch.setattr(sparse_module, "SPARSE_BLOCK_ROWS", 300)
    monkeypatch.setattr(explaining_module, "IMPORTANCE_SAMPLE", 200)
    seen = Densified(monkeypatch)
    TabNetRegressor(**TINY).fit(X[:1500], y[:1500], X_val=X[1500:], y_val=y[1500:])
    assert max(seen.rows) == 500  # X_val: one inference chunk of its 500 rows
    seen.rows.clear()
    TabNetPretrainer(**TINY, early_stopping=True).fit(X)
    # training batches, encoder blocks and the sample; the validation rows (10%) at most
    assert max(seen.rows) <= 300


def test_fit_memory_stays_far_below_the_dense_table() -> None:
    """A 200,000 x 500 matrix at 0.1% density (dense float32: 400 MB; float64: 800 MB): the
    fit's numpy allocations peak at a few blocks of rows, never the table."""
    n, k = 200_000, 500
    rng = np.random.default_rng(14)
    nnz = n * k // 1000
    rows, cols = rng.integers(0, n, nnz), rng.integers(0, k, nnz)
    X = sp.csr_matrix((rng.normal(size=nnz), (rows, cols)), shape=(n, k))
    y = np.asarray(X[:, :5].sum(axis=1)).ravel()
    dense_bytes = 4 * n * k
    # the data path is what is measured: the network stays small (no numeric embedding, whose
    # 4,000 channels would only slow the fit; torch's allocations are not traced anyway)
    params = {"n_d": 4, "n_a": 4, "n_steps": 1, "max_epochs": 1, "batch_size": 8192}
    params["numeric_embedding"] = None
    tracemalloc.start()
    try:
        model = TabNetRegressor(**params, random_state=0, early_stopping=True).fit(X, y)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert model.n_features_in_ == k and model.n_iter_ == 1
    assert peak < dense_bytes / 3, f"peak {peak / 2**20:.0f} MiB"


# ---- the pieces -------------------------------------------------------------------------------


def test_csr_rows_dense_and_take_match_the_dense_array() -> None:
    X, _ = wide(n=50, k=7, seed=15)
    dense = X.toarray().astype(np.float32)
    rows = CSRRows.from_csr(as_csr(X))
    assert rows.shape == (50, 7) and rows.data.dtype == np.float32
    np.testing.assert_array_equal(rows.dense(), dense)
    idx = np.array([4, 0, 4, 49, 17])
    np.testing.assert_array_equal(rows.dense(idx), dense[idx])
    np.testing.assert_array_equal(rows.dense(slice(10, 20)), dense[10:20])
    np.testing.assert_array_equal(rows.dense(slice(1, 30, 3)), dense[1:30:3])
    np.testing.assert_array_equal(rows.dense(slice(5, 5)), dense[5:5])
    sub = rows.take(idx)
    np.testing.assert_array_equal(sub.dense(), dense[idx])
    np.testing.assert_array_equal(sub.take(slice(1, 3)).dense(), dense[idx[1:3]])
    assert rows.nbytes < dense.nbytes
    assert sub.fingerprint() != rows.fingerprint()
    assert rows.take(np.arange(50)).fingerprint() == rows.fingerprint()


def test_sparse_tensor_data_batches_equal_the_dense_tensor_data() -> None:
    X, y = wide(n=200, k=6, seed=16)
    dense = X.toarray().astype(np.float32)
    target = torch.from_numpy(y)
    rows = CSRRows.from_csr(as_csr(X))
    data = sparse_tensor_data(rows, target, None, torch.device("cpu"))
    reference = TensorData(
        torch.from_numpy(dense), torch.zeros((200, 0), dtype=torch.int64), target
    )
    assert len(data) == 200 and isinstance(data.numeric, SparseRows)
    assert tuple(data.numeric.shape) == (200, 6)
    pairs = zip(
        data.iter_batches(64, torch.Generator().manual_seed(0), multiple=32),
        reference.iter_batches(64, torch.Generator().manual_seed(0), multiple=32),
        strict=True,
    )
    for (a, na), (b, nb) in pairs:
        assert na == nb
        assert isinstance(a.numeric, torch.Tensor)
        torch.testing.assert_close(a.numeric, b.numeric, equal_nan=True)
        torch.testing.assert_close(a.target, b.target)
    torch.testing.assert_close(
        data.take(slice(10, 30)).numeric, reference.take(slice(10, 30)).numeric, equal_nan=True
    )
    assert data_fingerprint(data) == data_fingerprint(sparse_tensor_data(rows, target, None, "cpu"))
    assert data_fingerprint(data) != data_fingerprint(
        sparse_tensor_data(rows.take(np.arange(199)), target[:199], None, "cpu")
    )
    with pytest.raises(ValueError, match="rows only"):
        data.numeric.index_select(1, torch.tensor([0]))


def test_fit_sparse_rows_gives_the_state_of_fit(monkeypatch: pytest.MonkeyPatch) -> None:
    X, _ = wide(n=1000, k=9, seed=17)
    monkeypatch.setattr(sparse_module, "SPARSE_BLOCK_ROWS", 128)
    enc = TableEncoder()
    rows = fit_sparse_rows(enc, X)
    whole = TableEncoder().fit(X.toarray())
    np.testing.assert_allclose(enc.numeric_mean, whole.numeric_mean, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(enc.numeric_std, whole.numeric_std, rtol=1e-10)
    np.testing.assert_array_equal(enc.numeric_missing, whole.numeric_missing)
    assert enc.n_rows_seen == 1000
    np.testing.assert_array_equal(rows.dense(), whole.transform(X.toarray()).numeric)
    again = encode_sparse_rows(enc, X.tocsc())
    np.testing.assert_array_equal(again.dense(), rows.dense())
    with pytest.raises(ValueError, match="9 features"):
        encode_sparse_rows(enc, X[:, :5])
    with pytest.raises(ValueError, match="at least 1 row"):
        fit_sparse_rows(TableEncoder(), X[:0])


# ---- inside a scikit-learn pipeline -----------------------------------------------------------


def test_column_transformer_pipeline_with_one_hot_and_tfidf(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import pandas as pd
    from sklearn.compose import make_column_transformer
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import OneHotEncoder

    rng = np.random.default_rng(18)
    n = 600
    words = np.array(["red", "blue", "green", "fast", "slow", "big", "small", "old", "new"])
    text = [" ".join(rng.choice(words, size=4)) for _ in range(n)]
    X = pd.DataFrame(
        {
            "city": rng.choice(["paris", "rome", "oslo", "lima"], size=n),
            "text": text,
            "size": rng.normal(size=n),
        }
    )
    y = np.array([("fast" in t) ^ (c == "oslo") for t, c in zip(text, X["city"], strict=True)])
    columns = make_column_transformer(
        (OneHotEncoder(sparse_output=True), ["city"]),
        (TfidfVectorizer(), "text"),
        remainder="passthrough",
        sparse_threshold=1.0,
    )
    encoded = columns.fit_transform(X)
    assert sp.issparse(encoded) and encoded.shape == (n, 4 + 9 + 1)
    table = encoded.toarray()
    monkeypatch.setattr(sparse_module, "SPARSE_BLOCK_ROWS", 256)
    monkeypatch.setattr(base_module, "SPARSE_BLOCK_ROWS", 256)
    monkeypatch.setattr(explaining_module, "IMPORTANCE_SAMPLE", 200)
    seen = Densified(monkeypatch)
    pipe = make_pipeline(columns, TabNetClassifier(**TINY)).fit(X, y)
    proba = pipe.predict_proba(X)
    explanation = pipe[-1].explain(pipe[:-1].transform(X))
    assert max(seen.rows) <= 256 < n
    assert pipe.predict(X).tolist() == pipe.classes_[proba.argmax(axis=1)].tolist()
    assert explanation.importances.shape == (n, 14)
    np.testing.assert_allclose(explanation.importances.sum(axis=1), 1.0, rtol=1e-5)
    # the same fit as on the dense encoded table
    dense = TabNetClassifier(**TINY).fit(table, y)
    np.testing.assert_allclose(proba, dense.predict_proba(table), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(explanation.masks, dense.explain(table).masks, rtol=1e-5, atol=1e-6)
