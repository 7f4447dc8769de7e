"""``n_members="auto"``, ``numeric_embedding="auto"``, and the rules of the first mask and the
categorical embedding's width (fixed choices): what a fit resolves them to, that the network is
model files carry them; and ``learning_rate="auto"``, resolved by each fit."""

from __future__ import annotations

from pathlib import Path
from typing import TypeVar

import numpy as np
import pandas as pd
import pytest
from fixed_helpers import with_fixed

from tabsparse import TabNetClassifier, TabNetPretrainer, TabNetRegressor, load, save
from tabsparse.estimators import _auto
from tabsparse.estimators._fitted_checks import check_common as _check_common

SMALL = dict(max_epochs=2, n_d=8, n_a=8, n_steps=2, random_state=0, device="cpu")
AUTO = dict(n_members="auto", numeric_embedding="auto")
E = TypeVar("E")


def frame(n: int = 200, seed: int = 0) -> tuple[pd.DataFrame, np.ndarray]:
    rng = np.random.default_rng(seed)
    a, b = rng.normal(size=(2, n))
    colour = pd.Categorical(rng.choice(["red", "green"], size=n))
    return pd.DataFrame({"a": a, "colour": colour, "b": b}), a + b**2


def test_auto_members_follow_the_row_count(monkeypatch: pytest.MonkeyPatch) -> None:
    X, score = frame(200)
    y = score > 0.5
    small = TabNetClassifier(**AUTO, **SMALL).fit(X, y)
    assert small.n_members_ == _auto.AUTO_MEMBERS == 4
    assert small.network_.n_members == 4
    assert small.network_.member_scale.shape[0] == 4
    monkeypatch.setattr(_auto, "AUTO_MEMBERS_MAX_ROWS", 200)  # 200 rows: no longer "small"
    large = TabNetClassifier(**AUTO, **SMALL).fit(X, y)
    assert large.n_members_ == 1 and large.network_.n_members == 1
    assert not hasattr(large.network_, "member_scale")
    fixed = TabNetClassifier(n_members=2, **SMALL).fit(X, y)  # an integer is taken as it is
    assert fixed.n_members_ == 2 and fixed.network_.n_members == 2


def test_auto_members_only_for_one_target() -> None:
    X, score = frame()
    labels = np.column_stack([score > 0, score > 1]).astype(int)  # multi-label
    tasks = pd.DataFrame({"a": np.where(score > 0, "p", "n"), "b": np.where(score > 1, "x", "y")})
    both = np.column_stack([score, -score])
    assert TabNetClassifier(**SMALL).fit(X, labels).n_members_ == 1
    assert TabNetClassifier(**SMALL).fit(X, tasks).n_members_ == 1
    assert TabNetRegressor(**SMALL).fit(X, both).n_members_ == 1
    assert TabNetClassifier(**SMALL).fit(X, score > 0).n_members_ == 4
    assert TabNetClassifier(**SMALL).fit(X, np.digitize(score, [0.0, 1.0])).n_members_ == 4
    assert TabNetClassifier(n_members=3, **SMALL).fit(X, labels).n_members_ == 3  # as asked


def test_auto_numeric_embedding_follows_the_target() -> None:
    X, score = frame()
    binary = TabNetClassifier(**AUTO, **SMALL).fit(X, score > 0.5)
    multiclass = TabNetClassifier(**AUTO, **SMALL).fit(X, np.digitize(score, [0.0, 1.0]))
    regression = TabNetRegressor(**AUTO, **SMALL).fit(X, score)
    assert binary.numeric_embedding_ == "periodic"
    assert multiclass.numeric_embedding_ is None
    assert regression.numeric_embedding_ == "periodic"
    # the network is built from the resolved value: 8 channels per numeric column or 1
    assert binary.network_.inputs.numeric_channels == 8
    assert multiclass.network_.inputs.numeric_channels == 1
    default = TabNetRegressor(**SMALL).fit(X, score)  # the defaults: both "auto"
    assert default.numeric_embedding_ == "periodic" and default.n_members_ == 4
    assert TabNetRegressor(numeric_embedding=None, **SMALL).fit(X, score).numeric_embedding_ is None
    one = TabNetRegressor(n_members=1, **SMALL).fit(X, score)
    assert one.n_members_ == 1 and not hasattr(one.network_, "member_scale")


def test_auto_embedding_is_off_when_starting_from_a_pretrainer() -> None:
    X, score = frame()
    pre = TabNetPretrainer(max_epochs=1, n_d=8, n_a=8, n_steps=2, random_state=0).fit(X)
    reg = TabNetRegressor(pretrained=pre, **AUTO, **SMALL).fit(X, score)
    assert reg.numeric_embedding_ is None
    assert reg.n_members_ == 4


def test_auto_first_mask_follows_the_embedding_and_the_members(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Shared with a numeric embedding or with members, the paper's per-row first mask for one
    network without an embedding, and the pretrainer's when starting from one."""
    X, score = frame()
    labels = np.digitize(score, [0.0, 1.0])  # multi-class: no embedding under "auto"
    binary = TabNetClassifier(n_members=1, **SMALL).fit(X, score > 0.5)  # periodic
    members = TabNetClassifier(**SMALL).fit(X, labels)  # 4 members, no embedding
    plain = TabNetClassifier(n_members=1, **SMALL).fit(X, labels)
    assert (binary.numeric_embedding_, binary.first_mask_) == ("periodic", "shared")
    assert (members.n_members_, members.first_mask_) == (4, "shared")
    assert (plain.n_members_, plain.numeric_embedding_, plain.first_mask_) == (1, None, "per_row")
    # the network is built from the resolved value: no initial transformer with "shared"
    assert binary.network_.encoder.initial is None and members.network_.encoder.initial is None
    assert plain.network_.encoder.initial is not None
    monkeypatch.setattr(_auto, "AUTO_MEMBERS_MAX_ROWS", 200)  # 200 rows: one network
    assert TabNetClassifier(**SMALL).fit(X, labels).first_mask_ == "per_row"
    asked = with_fixed(TabNetClassifier(n_members=1, **SMALL), first_mask="shared").fit(X, labels)
    assert asked.first_mask_ == "shared"  # a value is taken as it is
    for first in ("per_row", "shared"):
        pre = with_fixed(TabNetPretrainer(**SMALL), first_mask=first).fit(X)
        tuned = TabNetRegressor(pretrained=pre, **SMALL).fit(X, score)
        assert tuned.first_mask_ == first


def test_warm_start_keeps_the_resolved_architecture(monkeypatch: pytest.MonkeyPatch) -> None:
    X, score = frame()
    reg = TabNetRegressor(warm_start=True, **AUTO, **SMALL).fit(X, score)
    network = reg.network_
    monkeypatch.setattr(_auto, "AUTO_MEMBERS_MAX_ROWS", 10)  # would now resolve to 1 member
    reg.fit(X, score)
    assert reg.network_ is network and reg.n_members_ == 4


def test_model_file_carries_the_resolved_architecture(tmp_path: Path) -> None:
    X, score = frame()
    clf = TabNetClassifier(**AUTO, **SMALL).fit(X, score > 0.5)
    path = tmp_path / "auto.tabsparse"
    save(clf, path)
    back = load(path)
    assert back.n_members == "auto" and back.n_members_ == 4
    assert back.numeric_embedding_ == "periodic"
    assert back.first_mask_ == "shared"
    assert back.network_.encoder.initial is None
    np.testing.assert_array_equal(back.predict_proba(X), clf.predict_proba(X))


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("n_members_", 0, "n_members_=0 must be an integer >= 1"),
        ("n_members_", "4", "n_members_='4' must be an integer >= 1"),
        ("numeric_embedding_", "pwl", "numeric_embedding_='pwl' must be None or one of"),
        ("first_mask_", "auto", "first_mask_='auto' must be one of"),
        ("cat_emb_dim_", 0, "cat_emb_dim_=0 must be an integer >= 1"),
        ("cat_emb_dim_", "auto", "cat_emb_dim_='auto' must be an integer >= 1"),
    ],
)
def test_model_file_check_refuses_a_bad_architecture(
    name: str, value: object, message: str
) -> None:
    X, score = frame()
    reg = TabNetRegressor(**SMALL).fit(X, score)
    _check_common(reg)  # as fitted: accepted
    setattr(reg, name, value)
    with pytest.raises(ValueError, match=message):
        _check_common(reg)


# ---- the categorical embedding's width ------------------------------------------------------


def test_auto_cat_emb_dim_rule() -> None:
    assert _auto.auto_cat_emb_dim(True, "periodic", 8) == 8
    assert _auto.auto_cat_emb_dim(True, "periodic", 4) == 4  # follows numeric_embedding_dim
    assert _auto.auto_cat_emb_dim(True, None, 8) == 1  # no numeric embedding: 1
    assert _auto.auto_cat_emb_dim(False, "periodic", 8) == 1  # classification: 1


def test_auto_cat_emb_dim_follows_the_target_and_the_embedding() -> None:
    """A regressor with a numeric embedding gives "colour" as many channels as a numeric
    column; a classifier, or a regressor without the embedding, one; a number is taken as it
    is. The network is built from the resolved width."""
    X, score = frame()
    reg = TabNetRegressor(**SMALL).fit(X, score)
    assert "cat_emb_dim" not in reg.get_params() and reg.cat_emb_dim_ == 8
    assert reg.network_.inputs.cat_emb_dim == 8
    # 2 numeric columns x 8 channels + 1 categorical column x 8
    assert reg.network_.inputs.output_dim == 24
    narrow = with_fixed(TabNetRegressor(**SMALL), numeric_embedding_dim=4)
    assert narrow.fit(X, score).cat_emb_dim_ == 4
    plain = TabNetRegressor(numeric_embedding=None, **SMALL).fit(X, score)
    assert plain.cat_emb_dim_ == 1 and plain.network_.inputs.cat_emb_dim == 1
    binary = TabNetClassifier(**SMALL).fit(X, score > 0.5)
    assert binary.numeric_embedding_ == "periodic" and binary.cat_emb_dim_ == 1
    wide = with_fixed(TabNetClassifier(**SMALL), cat_emb_dim=3).fit(X, score > 0.5)
    assert wide.cat_emb_dim_ == 3 and wide.network_.inputs.cat_emb_dim == 3


def test_auto_cat_emb_dim_takes_the_pretrainers_width() -> None:
    X, score = frame()
    pre = with_fixed(TabNetPretrainer(**SMALL), cat_emb_dim=3).fit(X)
    tuned = TabNetRegressor(pretrained=pre, **SMALL).fit(X, score)
    assert tuned.cat_emb_dim_ == 3 and tuned.network_.inputs.cat_emb_dim == 3
    with pytest.raises(ValueError, match="cat_emb_dim=3 in the pretrainer but cat_emb_dim=8"):
        with_fixed(TabNetRegressor(pretrained=pre, **SMALL), cat_emb_dim=8).fit(X, score)


def test_cat_emb_dim_auto_is_validated_and_saved(tmp_path: Path) -> None:
    X, score = frame()
    with pytest.raises(TypeError, match="unexpected keyword argument 'cat_emb_dim'"):
        TabNetRegressor(cat_emb_dim=8)  # a fixed choice, not a parameter
    reg = TabNetRegressor(**SMALL).fit(X, score)
    path = tmp_path / "wide.tabsparse"
    save(reg, path)
    back = load(path)
    assert back.cat_emb_dim_ == 8
    assert back.network_.inputs.cat_emb_dim == 8
    np.testing.assert_array_equal(back.predict(X), reg.predict(X))


# ---- learning_rate="auto" ------------------------------------------------------------------
def test_auto_learning_rate_rule() -> None:
    rule = _auto.auto_learning_rate
    assert rule(1024, True) == rule(4096, True) == _auto.LEARNING_RATE == 0.02
    assert rule(1023, True) == rule(256, True) == rule(128, True) == 0.01
    assert rule(256, False) == rule(1024, False) == 0.02  # no validation: all epochs, last weights


def _first_rate(est: TabNetClassifier | TabNetRegressor | TabNetPretrainer) -> float:
    return est.history_[0]["learning_rate"]


def test_estimators_resolve_learning_rate_auto_per_fit() -> None:
    """With a constant schedule the recorded rate is the resolved one: 0.01 for a validated fit
    in batches under 1,024 rows, 0.02 without validation or in full batches; a number is kept."""
    X, score = frame(2_000)
    y = score > 0.5
    fixed = dict(SMALL, n_members=1, numeric_embedding=None)

    def constant(est: E) -> E:
        return with_fixed(est, lr_schedule="constant")

    # binary: 200 held-out rows, batch 128
    validated = constant(TabNetClassifier(**fixed)).fit(X, y)
    assert validated.get_params()["learning_rate"] == "auto"
    assert _first_rate(validated) == pytest.approx(0.01)
    unvalidated = constant(TabNetClassifier(**fixed, early_stopping=False)).fit(X, y)
    assert _first_rate(unvalidated) == pytest.approx(0.02)
    full_batch = constant(TabNetClassifier(**fixed, batch_size=1024)).fit(X, y)
    assert _first_rate(full_batch) == pytest.approx(0.02)
    given = constant(TabNetClassifier(**fixed, learning_rate=0.05)).fit(X, y)
    assert _first_rate(given) == pytest.approx(0.05)
    # the regressor validates from 5,000 rows: on 2,000 it trains all epochs at 0.02
    regressor = constant(TabNetRegressor(**fixed)).fit(X, score)
    assert _first_rate(regressor) == pytest.approx(0.02)
    assert _first_rate(constant(TabNetRegressor(**fixed, early_stopping=True)).fit(X, score)) == (
        pytest.approx(0.01)
    )
    # the pretrainer keeps 0.02 unless asked for the rule
    pre_params = dict(SMALL, batch_size="auto", early_stopping=True)
    pre = constant(TabNetPretrainer(**pre_params, learning_rate="auto")).fit(X)
    assert _first_rate(pre) == pytest.approx(0.01)  # validated, batches of 128
    assert _first_rate(constant(TabNetPretrainer(**pre_params)).fit(X)) == pytest.approx(0.02)
    assert TabNetPretrainer().get_params()["learning_rate"] == 0.02


def test_learning_rate_auto_is_validated_and_saved(tmp_path: Path) -> None:
    X, score = frame(200)
    with pytest.raises(ValueError, match="learning_rate"):
        TabNetClassifier(learning_rate="fast").fit(X, score > 0.5)
    with pytest.raises(ValueError, match="learning_rate"):
        TabNetClassifier(learning_rate=0.0).fit(X, score > 0.5)
    est = TabNetClassifier(**SMALL).fit(X, score > 0.5)
    save(est, tmp_path / "lr.tabsparse")
    loaded = load(tmp_path / "lr.tabsparse")
    assert loaded.get_params()["learning_rate"] == "auto"
    np.testing.assert_array_equal(loaded.predict_proba(X), est.predict_proba(X))
