"""Model files hold what was fitted: the network's architecture is a fitted attribute
(``architecture_``), written into the file, checked against its tensors and rebuilt on load, so
neither a ``set_params`` after the fit nor a warm start can make ``predict`` and the saved model
disagree. Saving into a folder that does not exist names that folder."""

from __future__ import annotations

import copy
import re
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from fixed_helpers import with_fixed
from model_file_helpers import edit_doc, read_members, write_members

from tabsparse import TabNetClassifier, TabNetPretrainer, TabNetRegressor, load, save

SMALL: dict[str, Any] = {
    "max_epochs": 2,
    "n_d": 4,
    "n_a": 4,
    "n_steps": 2,
    "random_state": 0,
    "device": "cpu",
}


def _frame(n: int = 150, seed: int = 0) -> tuple[pd.DataFrame, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = pd.DataFrame(
        {
            "a": rng.normal(size=n),
            "b": rng.normal(size=n),
            "c": rng.normal(size=n),
            "colour": pd.Categorical(rng.choice(["red", "green", "blue"], size=n)),
        }
    )
    y = 2.0 * X["a"].to_numpy() - X["b"].to_numpy() + rng.normal(scale=0.3, size=n)
    return X, y


@pytest.fixture(scope="module")
def data() -> tuple[pd.DataFrame, np.ndarray]:
    return _frame()


@pytest.fixture(scope="module")
def regressor(data: tuple[pd.DataFrame, np.ndarray]) -> TabNetRegressor:
    X, y = data
    return TabNetRegressor(**SMALL).fit(X, y)


# every parameter the network is built from, changed after the fit
CHANGES: dict[str, dict[str, Any]] = {
    "gamma": {"gamma": 2.0},
    "n_d": {"n_d": 8},
    "n_a": {"n_a": 8},
    "n_steps": {"n_steps": 3},
    "n_independent": {"n_independent": 1},
    "n_shared": {"n_shared": 1},
    "virtual_batch_size": {"virtual_batch_size": 16},
    "grouped_features": {"grouped_features": [["a", "b"]]},
    "numeric_embedding": {"numeric_embedding": None},
    "n_members": {"n_members": 2},
}


@pytest.mark.parametrize("name", list(CHANGES))
def test_set_params_after_a_fit_changes_neither_predict_nor_the_saved_model(
    name: str, regressor: TabNetRegressor, data: tuple[pd.DataFrame, np.ndarray], tmp_path: Path
) -> None:
    X, _ = data
    model = copy.deepcopy(regressor)
    before = model.predict(X)
    fitted = dict(model.architecture_)
    model.set_params(**CHANGES[name])
    np.testing.assert_array_equal(model.predict(X), before)
    assert model.architecture_ == fitted
    path = tmp_path / "m.tabsparse"
    save(model, path)
    back = load(path)
    # the parameters are saved as they are; the network as it was fitted
    assert back.get_params()[name] == CHANGES[name][name]
    assert back.architecture_ == fitted
    np.testing.assert_array_equal(back.predict(X), before)
    np.testing.assert_array_equal(back.explain(X).masks, model.explain(X).masks)


def test_other_fixed_choices_after_a_fit_change_neither_predict_nor_the_saved_model(
    regressor: TabNetRegressor, data: tuple[pd.DataFrame, np.ndarray], tmp_path: Path
) -> None:
    X, _ = data
    model = copy.deepcopy(regressor)
    before, fitted = model.predict(X), dict(model.architecture_)
    with_fixed(
        model,
        momentum=0.5,
        mask_type="entmax",
        first_mask="per_row",
        cat_emb_dim=3,
        numeric_embedding_dim=4,
    )
    np.testing.assert_array_equal(model.predict(X), before)
    assert model.architecture_ == fitted
    path = tmp_path / "m.tabsparse"
    save(model, path)
    back = load(path)
    assert back.architecture_ == fitted
    np.testing.assert_array_equal(back.predict(X), before)


def test_the_fitted_architecture_is_the_network_built(regressor: TabNetRegressor) -> None:
    arch = regressor.architecture_
    assert arch["n_steps"] == regressor.network_.encoder.n_steps == 2
    assert arch["gamma"] == 1.3 and arch["mask_type"] == "sparsemax"
    # "auto" parameters appear resolved, as the fit built them
    assert regressor.n_members == "auto" and arch["n_members"] == regressor.n_members_ == 4
    assert arch["numeric_embedding"] == regressor.numeric_embedding_ == "periodic"
    assert arch["cat_emb_dim"] == regressor.cat_emb_dim_ == 8
    grouped = TabNetRegressor(**SMALL, grouped_features=[["b", "c"]]).fit(*_frame(60))
    assert grouped.architecture_["grouped_features"] == [[1, 2]]  # positions, not names


def test_a_classifier_and_a_pretrainer_keep_their_fitted_network(
    data: tuple[pd.DataFrame, np.ndarray], tmp_path: Path
) -> None:
    X, y = data
    clf = with_fixed(TabNetClassifier(**SMALL), mask_type="entmax").fit(X, y > 0)
    proba = clf.predict_proba(X)
    clf.set_params(gamma=2.0, n_steps=4)
    clf._fixed = TabNetClassifier._fixed  # the fixed choices back: sparsemax
    save(clf, tmp_path / "clf.tabsparse")
    np.testing.assert_array_equal(load(tmp_path / "clf.tabsparse").predict_proba(X), proba)

    pre = TabNetPretrainer(**SMALL).fit(X)
    codes = pre.transform(X)
    pre.set_params(n_indep_decoder=3, n_shared_decoder=0, n_d=6)
    save(pre, tmp_path / "pre.tabsparse")
    back = load(tmp_path / "pre.tabsparse")
    assert back.architecture_["n_indep_decoder"] == 1 and back.n_indep_decoder == 3
    np.testing.assert_array_equal(back.transform(X), codes)


# ---- warm start ----------------------------------------------------------------------------------


WARM_REFUSAL = (
    "warm_start continues the fitted network, but the parameters now describe another one "
    "({}): set them back or fit without warm_start"
)


def test_warm_start_refuses_a_changed_architecture(
    data: tuple[pd.DataFrame, np.ndarray], tmp_path: Path
) -> None:
    X, y = data
    model = TabNetRegressor(**{**SMALL, "max_epochs": 1}, warm_start=True).fit(X, y)
    before = model.predict(X)
    model.set_params(n_steps=5)
    with pytest.raises(
        ValueError, match="^" + re.escape(WARM_REFUSAL.format("n_steps: 2 -> 5")) + "$"
    ):
        model.fit(X, y)
    model.set_params(gamma=2.0, grouped_features=[["a", "c"]])
    both = "n_steps: 2 -> 5; gamma: 1.3 -> 2.0; grouped_features: None -> [[0, 2]]"
    with pytest.raises(ValueError, match="^" + re.escape(WARM_REFUSAL.format(both)) + "$"):
        model.fit(X, y)
    # nothing was trained or changed by the refused fits
    assert model.n_iter_ == 1
    np.testing.assert_array_equal(model.predict(X), before)
    # the fitted values, "auto" (the fit's choice) and a change that builds nothing are accepted
    model.set_params(n_steps=2, gamma=1.3, grouped_features=None, n_members=4)
    model.fit(X, y)
    model.set_params(n_members="auto").fit(X, y)
    assert model.n_iter_ == 3 and model.network_.encoder.n_steps == 2
    save(model, tmp_path / "warm.tabsparse")
    np.testing.assert_array_equal(load(tmp_path / "warm.tabsparse").predict(X), model.predict(X))

    plain = TabNetRegressor(
        **{**SMALL, "max_epochs": 1}, numeric_embedding=None, warm_start=True
    ).fit(X, y)
    with_fixed(plain, numeric_embedding_dim=4).fit(X, y)  # no embedding: its width builds nothing
    assert plain.n_iter_ == 2
    plain.set_params(numeric_embedding="periodic")
    changed = (
        "cat_emb_dim: 1 -> 4; numeric_embedding: None -> 'periodic'; numeric_embedding_dim: 8 -> 4"
    )
    with pytest.raises(ValueError, match="^" + re.escape(WARM_REFUSAL.format(changed)) + "$"):
        with_fixed(plain, cat_emb_dim=4).fit(X, y)


def test_a_pretrainer_warm_start_refuses_another_decoder(
    data: tuple[pd.DataFrame, np.ndarray],
) -> None:
    X, _ = data
    pre = TabNetPretrainer(**{**SMALL, "max_epochs": 1}, warm_start=True).fit(X)
    pre.set_params(n_indep_decoder=2)
    message = WARM_REFUSAL.format("n_indep_decoder: 1 -> 2")
    with pytest.raises(ValueError, match="^" + re.escape(message) + "$"):
        pre.fit(X)


# ---- files from before the fitted architecture -----------------------------------------------


def test_a_file_without_the_fitted_architecture_builds_from_its_parameters(
    regressor: TabNetRegressor, data: tuple[pd.DataFrame, np.ndarray], tmp_path: Path
) -> None:
    X, _ = data
    path = tmp_path / "m.tabsparse"
    save(regressor, path)
    old = tmp_path / "old.tabsparse"
    write_members(old, edit_doc(read_members(path), lambda d: d["attributes"].pop("architecture_")))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        back = load(old)
    assert back.architecture_ == regressor.architecture_
    np.testing.assert_array_equal(back.predict(X), regressor.predict(X))


# ---- the destination folder ----------------------------------------------------------------------


def test_saving_into_a_missing_folder_names_the_folder(
    regressor: TabNetRegressor, tmp_path: Path
) -> None:
    folder = tmp_path / "no" / "such"
    target = folder / "m.tabsparse"
    message = (
        f"[Errno 2] cannot save to {str(target)!r}: the folder {str(folder)!r} does not exist "
        "(create it first)"
    )
    with pytest.raises(FileNotFoundError, match="^" + re.escape(message) + "$"):
        save(regressor, target)
    assert list(tmp_path.iterdir()) == []  # no folder was created
    a_file = tmp_path / "file"
    a_file.write_text("x")
    with pytest.raises(NotADirectoryError, match=re.escape(f"{str(a_file)!r} is not a folder")):
        save(regressor, a_file / "m.tabsparse")
    assert a_file.read_text() == "x"
