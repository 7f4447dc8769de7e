"""Behaviour of TabNetClassifier / TabNetRegressor as scikit-learn estimators."""

from __future__ import annotations

import pickle
import re
from typing import Any

import joblib
import numpy as np
import pandas as pd
import pytest
import torch
from fixed_helpers import with_fixed
from sklearn import config_context
from sklearn.base import clone
from sklearn.compose import ColumnTransformer
from sklearn.model_selection import GridSearchCV, cross_val_score
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils.estimator_checks import parametrize_with_checks

from tabsparse import Explanation, TabNetClassifier, TabNetRegressor
from tabsparse.training import Callback

FAST = {"max_epochs": 40, "random_state": 0, "device": "cpu"}
# sklearn's checks are about the API: a small network (one step, one member, no numeric
# embedding) learns their toy tables in 20 epochs
CHECKS = {
    "max_epochs": 20,
    "n_steps": 1,
    "n_members": 1,
    "numeric_embedding": None,
    "random_state": 0,
    "device": "cpu",
}

# Each expected failure of sklearn's common checks, with the reason it is expected.
EXPECTED_FAILURES = {
    "check_sample_weight_equivalence_on_dense_data": (
        "mini-batch training with shuffled batches cannot make weight 2 identical to a repeated row"
    ),
    "check_sample_weight_equivalence_on_sparse_data": (
        "as on dense data: sparse input (accepted since input_tags.sparse) trains the same way"
    ),
}
# Checks that may fail, or pass, by float32 rounding alone (xfail is strict, so these are
# caught in the test instead): the machine's matrix kernels decide.
ROUNDING_SENSITIVE = {
    "check_methods_subset_invariance": (
        "float32 matrix products on CPU may differ in the last bits (about 1e-7 relative) "
        "with the batch size; the check demands rtol=1e-7"
    ),
}


# The classifier's default multi-label scores are sparsemax scores: exact zeros by design, while
# the check wants every score strictly inside (0, 1). multilabel_loss="bce" passes it.
SPARSE_MULTILABEL = {
    "check_classifiers_multilabel_output_format_predict_proba": (
        "multilabel_loss='sparsemax' gives sparse scores with exact zeros"
    ),
}


def expected_failed_checks(estimator: object) -> dict[str, str]:
    if isinstance(estimator, TabNetClassifier) and estimator.multilabel_loss == "sparsemax":
        return {**EXPECTED_FAILURES, **SPARSE_MULTILABEL}
    return EXPECTED_FAILURES


@parametrize_with_checks(
    [TabNetClassifier(**CHECKS), TabNetRegressor(**CHECKS)],
    expected_failed_checks=expected_failed_checks,
)
def test_sklearn_common_checks(estimator: object, check: Any) -> None:
    name = getattr(check, "func", check).__name__
    try:
        check(estimator)
    except AssertionError:
        if name in ROUNDING_SENSITIVE:
            pytest.xfail(ROUNDING_SENSITIVE[name])
        raise


def mixed_frame(n: int = 400, seed: int = 0) -> tuple[pd.DataFrame, np.ndarray]:
    rng = np.random.default_rng(seed)
    signal = rng.normal(size=n)
    color = rng.choice(["red", "green", "blue"], size=n)
    df = pd.DataFrame(
        {
            "signal": signal,
            "noise": rng.normal(size=n),
            "color": pd.Categorical(color),
            "city": rng.choice(["a", "b", None], size=n).astype(object),
            "flag": rng.random(n) > 0.5,
            "count": pd.array(rng.integers(0, 5, size=n), dtype="Int64"),
            "maybe": pd.array(rng.random(n) > 0.3, dtype="boolean"),
            "label_text": pd.array(rng.choice(["x", "y"], size=n), dtype="string"),
        }
    )
    df.loc[::7, "signal"] = np.nan
    df.loc[::5, "count"] = pd.NA
    df.loc[::6, "maybe"] = pd.NA
    y = np.where(np.nan_to_num(signal) + (color == "red") > 0.3, "yes", "no")
    return df, y


def test_fits_every_pandas_dtype_with_missing_values_and_string_labels() -> None:
    X, y = mixed_frame()
    before = X.copy(deep=True)
    clf = TabNetClassifier(**FAST).fit(X, y)
    pd.testing.assert_frame_equal(X, before)  # the caller's frame is untouched
    assert list(clf.classes_) == ["no", "yes"]
    assert list(clf.feature_names_in_) == list(X.columns)
    assert clf.n_features_in_ == 8
    proba = clf.predict_proba(X)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, rtol=1e-6)
    assert set(clf.predict(X)) <= {"no", "yes"}
    assert clf.score(X, y) > 0.8


def test_predict_matches_columns_by_name_and_reports_missing_ones() -> None:
    X, y = mixed_frame()
    clf = TabNetClassifier(**FAST).fit(X, y)
    shuffled = X[list(reversed(X.columns))]
    np.testing.assert_allclose(clf.predict_proba(shuffled), clf.predict_proba(X))
    with pytest.raises(ValueError, match="color"):
        clf.predict(X.drop(columns=["color"]))


def test_unseen_categories_and_all_missing_rows_predict() -> None:
    X, y = mixed_frame()
    clf = TabNetClassifier(**FAST).fit(X, y)
    new = X.head(3).copy()
    new["city"] = ["zzz", "unknown", "b"]
    new["color"] = pd.Categorical(["purple", "red", "teal"])
    new["signal"] = np.nan
    proba = clf.predict_proba(new)
    assert proba.shape == (3, 2)
    assert np.isfinite(proba).all()
    # every unseen value of a column is the same "unseen" category: rows that differ only in
    # which unseen values they hold get identical probabilities
    other = new.copy()
    other["city"] = ["never", "seen", "b"]
    other["color"] = pd.Categorical(["mauve", "red", "ochre"])
    np.testing.assert_array_equal(clf.predict_proba(other), proba)
    codes = clf.encoder_.transform(new).codes  # color, city, label_text: unseen is code 1
    np.testing.assert_array_equal(codes[:, :2], [[1, 1], [4, 1], [1, 3]])


def test_regressor_one_and_multi_output() -> None:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 5))
    y = 1000.0 + 50.0 * X[:, 0] - 20.0 * X[:, 1]
    reg = TabNetRegressor(**FAST).fit(X, y)
    pred = reg.predict(X)
    assert pred.shape == (300,)
    assert reg.score(X, y) > 0.8
    Y = np.column_stack([y, -y])
    multi = TabNetRegressor(**FAST).fit(X, Y)
    pred = multi.predict(X)
    assert pred.shape == (300, 2)
    assert multi.n_outputs_ == 2
    from sklearn.metrics import r2_score

    r2 = r2_score(Y, pred, multioutput="raw_values")
    assert (r2 > 0.8).all(), r2  # each output is learned on its own scale
    np.testing.assert_allclose(pred.mean(axis=0), [1000.0, -1000.0], atol=10.0)


def test_explain_finds_the_informative_columns() -> None:
    rng = np.random.default_rng(0)
    X = pd.DataFrame(rng.normal(size=(2000, 8)), columns=[f"f{i}" for i in range(8)])
    y = (X["f2"] - X["f5"] > 0).astype(int)
    clf = TabNetClassifier(max_epochs=30, random_state=0, device="cpu").fit(X, y)
    exp = clf.explain(X.iloc[:500])
    assert isinstance(exp, Explanation)
    assert exp.importances.shape == (500, 8)
    assert exp.masks.shape == (3, 500, 8)
    np.testing.assert_allclose(exp.importances.sum(axis=1), 1.0, rtol=1e-5)
    np.testing.assert_allclose(exp.masks.sum(axis=2), 1.0, rtol=1e-5)
    assert exp.feature_names == list(X.columns)
    # the two deciding columns of eight hold most of each row's attention (a uniform share
    # would be 0.25; 0.53 with the defaults, whose validated small-batch fit of 30 epochs runs
    # at learning_rate 0.01, 0.80 at 0.02)
    informative = exp.importances[:, [2, 5]].sum(axis=1).mean()
    assert informative > 0.5, informative
    fi = clf.feature_importances_
    np.testing.assert_allclose(fi.sum(), 1.0, rtol=1e-6)
    assert set(np.argsort(fi)[-2:]) == {2, 5}


def test_categorical_embeddings_are_summed_back_to_their_column() -> None:
    X, y = mixed_frame()
    clf = with_fixed(TabNetClassifier(**FAST), cat_emb_dim=3).fit(X, y)
    exp = clf.explain(X)
    assert exp.importances.shape == (len(X), X.shape[1])
    np.testing.assert_allclose(exp.importances.sum(axis=1), 1.0, rtol=1e-5)


def test_grouped_features_share_attention() -> None:
    X, y = mixed_frame()
    clf = TabNetClassifier(grouped_features=[["signal", "noise"]], **FAST).fit(X, y)
    masks = clf.explain(X).masks
    np.testing.assert_allclose(masks[..., 0], masks[..., 1])
    with pytest.raises(ValueError, match="'nope'"):
        TabNetClassifier(grouped_features=[["nope"]], **FAST).fit(X, y)


def test_same_seed_same_model_and_global_rng_untouched() -> None:
    X, y = mixed_frame()
    torch.manual_seed(123)
    np.random.seed(123)
    torch_state, np_state = torch.get_rng_state(), np.random.get_state()
    a = TabNetClassifier(**FAST).fit(X, y).predict_proba(X)
    b = TabNetClassifier(**FAST).fit(X, y).predict_proba(X)
    np.testing.assert_array_equal(a, b)
    assert torch.equal(torch.get_rng_state(), torch_state)
    assert np.random.get_state()[1].tolist() == np_state[1].tolist()  # type: ignore[index]


@pytest.mark.parametrize("n_rows", [1, 2, 3, 17])
def test_tiny_data_trains_without_crashing(n_rows: int) -> None:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n_rows, 3))
    y = rng.normal(size=n_rows)
    reg = TabNetRegressor(max_epochs=3, batch_size=1024, virtual_batch_size=2).fit(X, y)
    assert reg.n_iter_ == 3
    assert all(r["train_loss"] > 0 for r in reg.history_)  # it did train on batches
    assert np.isfinite(reg.predict(X)).all()


def test_history_and_early_stopping_with_validation_data() -> None:
    X, y = mixed_frame(600)
    Xv, yv = mixed_frame(200, seed=1)
    clf = TabNetClassifier(
        max_epochs=200, n_iter_no_change=5, scoring="roc_auc", random_state=0, device="cpu"
    ).fit(X, y, X_val=Xv, y_val=yv)
    assert clf.n_iter_ < 200
    keys = {"epoch", "train_loss", "val_loss", "val_score", "learning_rate", "seconds"}
    assert keys <= set(clf.history_[0])
    best = max(range(clf.n_iter_), key=lambda i: clf.history_[i]["val_score"])
    assert clf.best_iteration_ == best
    from sklearn.metrics import roc_auc_score

    auc = roc_auc_score(yv, clf.predict_proba(Xv)[:, 1])
    assert auc == pytest.approx(clf.history_[best]["val_score"], rel=1e-5)


def test_early_stopping_auto_splits_large_data() -> None:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(12_000, 4)).astype(np.float32)
    y = (X[:, 0] > 0).astype(int)
    clf = TabNetClassifier(max_epochs=2, random_state=0, batch_size=4096, device="cpu")
    clf.fit(X, y)
    assert "val_score" in clf.history_[0]
    clf2 = TabNetClassifier(max_epochs=2, early_stopping=False, random_state=0, device="cpu")
    clf2.fit(X[:500], y[:500])
    assert "val_score" not in clf2.history_[0]


def test_unseen_label_in_y_val_is_a_clear_error() -> None:
    X, y = mixed_frame()
    y_val = y.astype(object)
    y_val[0] = "maybe"
    with pytest.raises(ValueError, match=re.escape("['maybe']")):
        TabNetClassifier(**FAST).fit(X, y, X_val=X, y_val=y_val)


def test_sample_weight_changes_the_fit() -> None:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 3))
    y = (rng.random(400) > 0.5).astype(int)  # pure noise: the weights decide
    w = np.where(y == 1, 10.0, 0.1)
    clf = TabNetClassifier(**FAST).fit(X, y, sample_weight=w)
    assert clf.predict(X).mean() > 0.9
    with pytest.raises(ValueError, match="non-zero"):
        TabNetClassifier(**FAST).fit(X, y, sample_weight=np.zeros(400))
    with pytest.raises(ValueError, match=r"(?i)negative"):
        TabNetClassifier(**FAST).fit(X, y, sample_weight=-np.ones(400))


def test_class_weight_balanced() -> None:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(600, 3))
    y = (X[:, 0] > 1.3).astype(int)  # about 10% positives
    plain = TabNetClassifier(**FAST).fit(X, y)
    balanced = TabNetClassifier(class_weight="balanced", **FAST).fit(X, y)
    assert balanced.predict(X).mean() > plain.predict(X).mean()


@pytest.mark.parametrize(
    ("param", "value", "message"),
    [
        ("n_d", 0, "'n_d' parameter"),
        ("n_steps", 0, "'n_steps' parameter"),
        ("gamma", 0.5, "'gamma' parameter"),
        ("learning_rate", 0.0, "'learning_rate' parameter"),
        ("early_stopping", "sometimes", "'early_stopping' parameter"),
        ("validation_fraction", 1.5, "'validation_fraction' parameter"),
        ("batch_size", -1, "'batch_size' parameter"),
        ("class_weight", "unbalanced", "'class_weight' parameter"),
        ("device", "tpu", "device='tpu'"),
        ("device", "cuda:99", "device='cuda:99'"),
    ],
)
def test_invalid_parameters_name_the_parameter(param: str, value: object, message: str) -> None:
    X, y = mixed_frame(50)
    with pytest.raises(ValueError, match=re.escape(message)):
        TabNetClassifier(**{param: value}).fit(X, y)  # type: ignore[arg-type]


def test_pickle_and_joblib_round_trips(tmp_path) -> None:  # type: ignore[no-untyped-def]
    X, y = mixed_frame()
    clf = TabNetClassifier(**FAST).fit(X, y)
    expected = clf.predict_proba(X)
    again = pickle.loads(pickle.dumps(clf))
    np.testing.assert_array_equal(again.predict_proba(X), expected)
    joblib.dump(clf, tmp_path / "model.joblib")
    np.testing.assert_array_equal(joblib.load(tmp_path / "model.joblib").predict_proba(X), expected)
    np.testing.assert_array_equal(clf.explain(X).importances, again.explain(X).importances)


def test_clone_gridsearch_and_cross_val_roc_auc() -> None:
    X, y = mixed_frame(300)
    clf = TabNetClassifier(max_epochs=10, random_state=0, device="cpu")
    assert clone(clf).get_params() == clf.get_params()
    grid = GridSearchCV(clf, {"n_d": [4, 8], "learning_rate": [0.01, 0.05]}, cv=2)
    grid.fit(X, y)
    assert grid.best_params_["n_d"] in (4, 8)
    scores = cross_val_score(clf, X, y, cv=3, scoring="roc_auc")
    assert scores.shape == (3,) and np.all(scores > 0.5)


def test_pipeline_with_column_transformer() -> None:
    X, y = mixed_frame()
    pre = ColumnTransformer(
        [("scale", StandardScaler(), ["noise"])],
        remainder="passthrough",
        verbose_feature_names_out=False,
    ).set_output(transform="pandas")
    pipe = Pipeline([("pre", pre), ("tabnet", TabNetClassifier(**FAST))]).fit(X, y)
    assert pipe.predict_proba(X).shape == (len(X), 2)
    assert pipe.score(X, y) > 0.8


def test_validation_data_is_routed_through_a_pipeline() -> None:
    X, y = mixed_frame(300)
    Xv, yv = mixed_frame(100, seed=2)
    with config_context(enable_metadata_routing=True):
        pre = ColumnTransformer(
            [("scale", StandardScaler(), ["noise"])],
            remainder="passthrough",
            verbose_feature_names_out=False,
        ).set_output(transform="pandas")
        est = TabNetClassifier(max_epochs=5, random_state=0, device="cpu").set_fit_request(
            X_val=True, y_val=True
        )
        pipe = Pipeline([("pre", pre), ("tabnet", est)], transform_input=["X_val"])
        pipe.fit(X, y, X_val=Xv, y_val=yv)
    assert "val_score" in pipe[-1].history_[0]


def test_warm_start_continues_training() -> None:
    X, y = mixed_frame()
    clf = TabNetClassifier(max_epochs=3, warm_start=True, random_state=0, device="cpu")
    clf.fit(X, y)
    net = clf.network_
    clf.fit(X, y)
    assert clf.network_ is net
    assert clf.n_iter_ == 6
    assert [int(r["epoch"]) for r in clf.history_] == list(range(6))


def test_callbacks_and_verbose_logging(caplog: pytest.LogCaptureFixture) -> None:
    seen: list[int] = []

    class Record(Callback):
        def on_epoch_end(self, trainer, record):  # type: ignore[no-untyped-def]
            seen.append(int(record["epoch"]))

    X, y = mixed_frame(100)
    with caplog.at_level("INFO", logger="tabsparse"):
        TabNetClassifier(max_epochs=2, callbacks=[Record()], verbose=0).fit(X, y)
    assert seen == [0, 1]
    assert caplog.records == []
    with caplog.at_level("INFO", logger="tabsparse"):
        TabNetClassifier(max_epochs=2, verbose=1).fit(X, y)  # a progress bar, no log lines
    assert caplog.records == []
    with caplog.at_level("INFO", logger="tabsparse"):
        TabNetClassifier(max_epochs=2, verbose=2).fit(X, y)
    assert len(caplog.records) == 2 and "train_loss" in caplog.records[0].getMessage()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_fit_pickles_to_cpu() -> None:
    X, y = mixed_frame()
    clf = TabNetClassifier(max_epochs=3, device="cuda", random_state=0).fit(X, y)
    assert clf.device_.type == "cuda"
    again = pickle.loads(pickle.dumps(clf))
    np.testing.assert_allclose(again.predict_proba(X), clf.predict_proba(X), atol=1e-5)


def test_a_cuda_pickle_loads_on_a_cpu_only_machine() -> None:
    # The pickle stores the network on the CPU and the device by name; on a machine without
    # CUDA a model recorded as fitted on "cuda:0" comes back on the CPU.
    X, y = mixed_frame(100)
    clf = TabNetClassifier(max_epochs=2, random_state=0, device="cpu").fit(X, y)
    state = clf.__getstate__()
    assert next(state["network_"].parameters()).device.type == "cpu"
    state["device_"] = "cuda:0"
    restored = TabNetClassifier.__new__(TabNetClassifier)
    restored.__setstate__(state)
    if not torch.cuda.is_available():
        assert restored.device_ == torch.device("cpu")
    np.testing.assert_allclose(restored.predict_proba(X), clf.predict_proba(X), atol=1e-6)


def test_feature_name_warnings_follow_sklearn() -> None:
    X, _ = mixed_frame(100)
    numeric = X[["signal", "noise"]]
    clf = TabNetRegressor(max_epochs=2, random_state=0).fit(numeric, np.arange(100.0))
    with pytest.warns(UserWarning, match="does not have valid feature names"):
        clf.predict(numeric.to_numpy())
    arr = TabNetRegressor(max_epochs=2, random_state=0).fit(numeric.to_numpy(), np.arange(100.0))
    assert not hasattr(arr, "feature_names_in_")
    with pytest.warns(UserWarning, match="fitted without feature names"):
        arr.predict(numeric)
    with pytest.raises(ValueError, match="X has 3 features, but TabNetRegressor is expecting 2"):
        arr.predict(np.zeros((4, 3)))


class _Sabotage(Callback):
    """At the end of epoch ``at``, poison the weights or interrupt, as a fault would."""

    def __init__(self, at: int, action: str) -> None:
        self.at = at
        self.action = action

    def on_fit_begin(self, trainer):  # type: ignore[no-untyped-def]
        if self.action == "interrupt-early":
            raise KeyboardInterrupt

    def on_epoch_end(self, trainer, record):  # type: ignore[no-untyped-def]
        if int(record["epoch"]) != self.at:
            return
        if self.action == "nan":
            with torch.no_grad():
                next(trainer.network.parameters()).fill_(float("nan"))
        elif self.action == "interrupt":
            raise KeyboardInterrupt


def test_non_finite_loss_stops_with_the_epoch_and_keeps_the_best_weights() -> None:
    X, y = mixed_frame(100)
    clf = TabNetClassifier(max_epochs=6, random_state=0, callbacks=[_Sabotage(1, "nan")])
    with pytest.raises(FloatingPointError, match=r"non-finite .* in epoch 3 \(history index 2\)"):
        clf.fit(X, y)
    assert clf.n_iter_ == 2
    assert np.isfinite(clf.predict_proba(X)).all()


def test_keyboard_interrupt_leaves_a_usable_estimator_and_is_raised_again() -> None:
    X, y = mixed_frame(100)
    clf = TabNetClassifier(max_epochs=6, random_state=0, callbacks=[_Sabotage(1, "interrupt")])
    with (
        pytest.warns(RuntimeWarning, match="interrupted after 2 epochs"),
        pytest.raises(KeyboardInterrupt),
    ):
        clf.fit(X, y)
    assert clf.n_iter_ == 2
    assert clf.predict(X).shape == (100,)


def test_interrupt_before_the_first_epoch_leaves_it_unfitted() -> None:
    from sklearn.exceptions import NotFittedError

    X, y = mixed_frame(100)
    clf = TabNetClassifier(max_epochs=3, callbacks=[_Sabotage(0, "interrupt-early")])
    with pytest.raises(KeyboardInterrupt):
        clf.fit(X, y)
    with pytest.raises(NotFittedError):
        clf.predict(X)


def test_resuming_from_a_checkpoint_gives_the_uninterrupted_model(tmp_path) -> None:  # type: ignore[no-untyped-def]
    X, y = mixed_frame(300)
    Xv, yv = mixed_frame(100, seed=3)
    settings = {"max_epochs": 6, "random_state": 0, "device": "cpu", "n_iter_no_change": 3}
    full = TabNetClassifier(**settings).fit(X, y, X_val=Xv, y_val=yv)

    interrupted = TabNetClassifier(
        **settings, checkpoint_dir=tmp_path, callbacks=[_Sabotage(2, "interrupt")]
    )
    with pytest.warns(RuntimeWarning, match="interrupted"), pytest.raises(KeyboardInterrupt):
        interrupted.fit(X, y, X_val=Xv, y_val=yv)
    assert (tmp_path / "checkpoint.pt").exists()

    resumed = TabNetClassifier(**settings).fit(X, y, X_val=Xv, y_val=yv, resume_from=tmp_path)
    assert resumed.n_iter_ == full.n_iter_
    assert resumed.best_iteration_ == full.best_iteration_
    assert [r["train_loss"] for r in resumed.history_] == [r["train_loss"] for r in full.history_]
    np.testing.assert_array_equal(resumed.predict_proba(Xv), full.predict_proba(Xv))

    other = TabNetClassifier(**{**settings, "n_d": 4})
    with pytest.raises(ValueError, match="different fit"):
        other.fit(X, y, X_val=Xv, y_val=yv, resume_from=tmp_path)
    (tmp_path / "junk.pt").write_bytes(b"not a checkpoint")
    with pytest.raises(ValueError, match=r"junk\.pt"):
        other.fit(X, y, X_val=Xv, y_val=yv, resume_from=tmp_path / "junk.pt")


def test_ema_decay_changes_the_model_and_resumes_exactly(tmp_path) -> None:  # type: ignore[no-untyped-def]
    X, y = mixed_frame(300)
    Xv, yv = mixed_frame(100, seed=3)
    settings = {"max_epochs": 6, "random_state": 0, "device": "cpu", "n_iter_no_change": 3}
    plain = with_fixed(TabNetClassifier(**settings), ema_decay=None).fit(X, y, X_val=Xv, y_val=yv)
    averaged = with_fixed(TabNetClassifier(**settings), ema_decay=0.9).fit(X, y, X_val=Xv, y_val=yv)
    # same batches and updates, but validation and the kept weights use the average
    assert [r["train_loss"] for r in plain.history_][:1] == [
        r["train_loss"] for r in averaged.history_
    ][:1]
    assert [r["val_loss"] for r in plain.history_] != [r["val_loss"] for r in averaged.history_]
    assert not np.allclose(plain.predict_proba(Xv), averaged.predict_proba(Xv))

    interrupted = with_fixed(
        TabNetClassifier(
            **settings, checkpoint_dir=tmp_path, callbacks=[_Sabotage(2, "interrupt")]
        ),
        ema_decay=0.9,
    )
    with pytest.warns(RuntimeWarning, match="interrupted"), pytest.raises(KeyboardInterrupt):
        interrupted.fit(X, y, X_val=Xv, y_val=yv)
    resumed = with_fixed(TabNetClassifier(**settings), ema_decay=0.9).fit(
        X, y, X_val=Xv, y_val=yv, resume_from=tmp_path
    )
    assert [r["val_loss"] for r in resumed.history_] == [r["val_loss"] for r in averaged.history_]
    np.testing.assert_array_equal(resumed.predict_proba(Xv), averaged.predict_proba(Xv))


def test_threads_predicting_at_once_match_one_thread() -> None:
    from concurrent.futures import ThreadPoolExecutor

    X, y = mixed_frame(400)
    clf = TabNetClassifier(max_epochs=3, random_state=0, device="cpu").fit(X, y)
    expected = clf.predict_proba(X)
    chunks = [X.iloc[i : i + 50] for i in range(0, 400, 50)] * 4
    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(clf.predict_proba, chunks))
    for i, got in enumerate(results):
        start = (i % 8) * 50
        np.testing.assert_allclose(got, expected[start : start + 50], rtol=1e-6, atol=1e-7)


def test_export_method_writes_a_program_and_its_spec(tmp_path) -> None:  # type: ignore[no-untyped-def]
    X, y = mixed_frame(100)
    clf = TabNetClassifier(max_epochs=2, random_state=0, device="cpu").fit(X, y)
    path = clf.export(tmp_path / "model.pt2", format="torch")
    assert path.exists() and (tmp_path / "model.pt2.json").exists()


def test_auto_batch_size_is_resolved_on_the_training_rows() -> None:
    sizes: list[int] = []

    class Record(Callback):
        def on_fit_begin(self, trainer):  # type: ignore[no-untyped-def]
            sizes.append(trainer.config.batch_size)

    rng = np.random.default_rng(0)
    for n in (2_000, 20_000):  # 20,000 rows: 18,000 train after the early-stopping holdout
        X = rng.normal(size=(n, 3))
        reg = TabNetRegressor(batch_size="auto", max_epochs=1, callbacks=[Record()])
        reg.fit(X, X[:, 0])
        assert reg.get_params()["batch_size"] == "auto"  # the parameter is left as given
    assert sizes == [128, 1024]
