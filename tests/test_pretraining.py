"""Self-supervised pretraining: decoder, masking, loss, TabNetPretrainer and fine-tuning."""

from __future__ import annotations

import math
import pickle
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import torch
from conftest import TINY_FIT
from fixed_helpers import with_fixed
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils.estimator_checks import parametrize_with_checks

import tabsparse.estimators.pretrainer as pretrainer_module
from tabsparse import TabNetClassifier, TabNetPretrainer, TabNetRegressor, load, save
from tabsparse.data import CODE_MISSING, CODE_OFFSET, TableEncoder
from tabsparse.nn import TabularInput
from tabsparse.nn.decoder import PretrainingNetwork, TabNetDecoder
from tabsparse.nn.encoder import TabNetEncoder
from tabsparse.pretraining import CODE_MISSING as P_CODE_MISSING
from tabsparse.pretraining import CODE_OFFSET as P_CODE_OFFSET
from tabsparse.pretraining import (
    CellMasker,
    ReconstructionLoss,
    draw_mask,
    mask_cells,
)
from tabsparse.training import Callback, TensorData

TINY: dict[str, Any] = {**TINY_FIT, "device": "cpu"}


def make_frame(n: int = 300, seed: int = 0) -> pd.DataFrame:
    """Columns that are functions of each other, plus awkward ones."""
    rng = np.random.default_rng(seed)
    a = rng.normal(size=n)
    b = rng.normal(size=n)
    return pd.DataFrame(
        {
            "a": a,
            "b": b,
            "a_plus_b": a + b,
            "two_a": 2 * a + 0.01 * rng.normal(size=n),
            "sign_a": pd.Categorical(np.where(a > 0, "pos", "neg")),
            "with_nan": np.where(rng.random(n) < 0.3, np.nan, b),
        }
    )


@pytest.fixture(scope="module")
def X() -> pd.DataFrame:
    return make_frame()


@pytest.fixture(scope="module")
def y(X: pd.DataFrame) -> np.ndarray:
    return (X["a"] - X["b"] > 0).to_numpy().astype(int)


@pytest.fixture(scope="module")
def pre(X: pd.DataFrame) -> TabNetPretrainer:
    return TabNetPretrainer(**TINY).fit(X)


def tensors(table: Any) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.from_numpy(table.numeric), torch.from_numpy(table.codes)


# ---- decoder and network -------------------------------------------------------------------------


@pytest.mark.parametrize(("n_shared", "n_independent"), [(1, 1), (0, 2), (2, 0)])
def test_decoder_shapes(n_shared: int, n_independent: int) -> None:
    dec = TabNetDecoder(
        n_d=5, n_steps=3, output_dim=7, n_shared=n_shared, n_independent=n_independent
    )
    assert dec(torch.rand(3, 10, 5)).shape == (10, 7)
    with pytest.raises(ValueError, match="n_steps=3"):
        dec(torch.rand(2, 10, 5))
    with pytest.raises(ValueError, match="n_shared=0"):
        TabNetDecoder(n_d=5, n_steps=3, output_dim=7, n_shared=0, n_independent=0)


def test_encoder_keeps_decisions_that_sum_to_its_output() -> None:
    enc = TabNetEncoder(input_dim=4, group_index=[0, 1, 2, 3], n_d=3, n_a=3, n_steps=2).eval()
    x = torch.randn(6, 4)
    out = enc(x, keep_decisions=True)
    assert out.decisions is not None and out.decisions.shape == (2, 6, 3)
    torch.testing.assert_close(out.decisions.sum(dim=0), out.output)
    assert enc(x).decisions is None


def test_pretraining_network_layout_matches_tabnet() -> None:
    from tabsparse.nn import TabNet

    kwargs: dict[str, Any] = {
        "numeric_columns": [0, 2],
        "categorical_columns": [1, 3],
        "numeric_mean": [0.0, 1.0],
        "numeric_std": [1.0, 2.0],
        "cardinalities": [5, 2],  # 3 categories, and an empty vocabulary
        "n_d": 4,
        "n_a": 4,
        "n_steps": 2,
        "cat_emb_dim": 2,
    }
    net = PretrainingNetwork(**kwargs)
    out = net(torch.randn(8, 2), torch.randint(0, 5, (8, 2)).clamp(max=torch.tensor([4, 1])))
    assert out.logits.shape == (8, 2 + 3 + 0)
    assert net.encode(torch.randn(8, 2), torch.zeros(8, 2, dtype=torch.int64)).shape == (8, 4)
    tabnet = TabNet(**kwargs, n_outputs=3)
    for part in ("inputs", "encoder"):
        mine = getattr(net, part).state_dict()
        theirs = getattr(tabnet, part).state_dict()
        assert {k: v.shape for k, v in mine.items()} == {k: v.shape for k, v in theirs.items()}
    with pytest.raises(ValueError, match="nothing to reconstruct"):
        PretrainingNetwork(
            **{
                **kwargs,
                "numeric_columns": [],
                "categorical_columns": [0, 1],
                "numeric_mean": [],
                "numeric_std": [],
                "cardinalities": [2, 2],
            }
        )


# ---- masking and loss ---------------------------------------------------------------------------


def test_codes_agree_with_the_table_encoder() -> None:
    assert (P_CODE_MISSING, P_CODE_OFFSET) == (CODE_MISSING, CODE_OFFSET)


def test_mask_fraction_is_the_ratio() -> None:
    mask = draw_mask(200_000, 5, 0.2, torch.Generator().manual_seed(0))
    assert mask.dtype == torch.bool
    assert abs(float(mask.float().mean()) - 0.2) < 0.003
    assert float(mask.float().mean(dim=0).std()) < 0.005  # the same for every column
    with pytest.raises(ValueError, match="ratio"):
        draw_mask(3, 3, 1.0, torch.Generator())


def test_masked_cells_are_shown_as_missing_and_become_targets() -> None:
    inputs = TabularInput(numeric_mean=[1.0, 0.0], numeric_std=[2.0, 1.0], cardinalities=[5])
    numeric = torch.tensor([[3.0, float("nan")], [5.0, 7.0]])
    codes = torch.tensor([[4], [0]])
    mask = torch.tensor([[True, True, True], [False, True, True]])
    num_in, codes_in, target = mask_cells(numeric, codes, mask, inputs)
    assert torch.isnan(num_in[0]).all() and num_in[1, 0] == 5.0 and torch.isnan(num_in[1, 1])
    assert codes_in.tolist() == [[CODE_MISSING], [CODE_MISSING]]
    # row 0: (3 - 1) / 2 = 1; NaN stays no target; code 4 is vocabulary entry 2
    # row 1: unmasked cell -> no target; 7 standardised = 7 (clipped at 10 otherwise);
    #        a missing category is never a target
    expected = torch.tensor([[1.0, float("nan"), 2.0], [float("nan"), 7.0, float("nan")]])
    torch.testing.assert_close(target, expected, equal_nan=True)
    # the encoder sees the learned missing value, exactly as for a real NaN
    with torch.no_grad():
        inputs.missing_value.fill_(0.25)
    assert inputs(num_in, codes_in)[0, 0] == 0.25


def test_cell_masker_draws_from_the_generator() -> None:
    inputs = TabularInput(numeric_mean=[0.0] * 3, numeric_std=[1.0] * 3, cardinalities=[4])
    batch = TensorData(torch.randn(5000, 3), torch.randint(2, 4, (5000, 1)))
    masker = CellMasker(0.3, inputs)
    first = masker(batch, torch.Generator().manual_seed(5))
    again = masker(batch, torch.Generator().manual_seed(5))
    torch.testing.assert_close(first.target, again.target, equal_nan=True)
    hidden = torch.cat([torch.isnan(first.numeric), first.codes == CODE_MISSING], dim=1)
    assert abs(float(hidden.float().mean()) - 0.3) < 0.015
    assert torch.equal(hidden, ~torch.isnan(first.target))


def test_loss_equals_a_hand_computed_value() -> None:
    # two numeric columns, a categorical with 4 categories and one with 1 category
    loss = ReconstructionLoss(n_numeric=2, vocab_sizes=[4, 1])
    nan = float("nan")
    recon = torch.tensor(
        [
            [1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 3.0],
            [0.0, 2.0, math.log(3.0), 0.0, 0.0, 0.0, 0.0],
            [0.5, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
        ]
    )
    target = torch.tensor(
        [
            [0.0, nan, 1.0, 0.0],  # num0: (1-0)^2 = 1; cat0 class 1 of uniform: log4/log4 = 1
            [nan, 0.0, 0.0, nan],  # num1: (2-0)^2 = 4; cat0 class 0 with logit log3: log2/log4
            [1.5, nan, nan, nan],  # num0: (0.5-1.5)^2 = 1
        ]
    )
    # per feature: num0 (1 + 1) / 2 = 1, num1 4, cat0 (1 + 0.5) / 2 = 0.75, and cat1 has one
    # target (row 0) that costs 0: a single category is always predicted right
    expected = (1.0 + 4.0 + 0.75 + 0.0) / 4
    per_row = loss(recon, target)
    assert per_row.shape == (3,)
    assert float(per_row.mean()) == pytest.approx(expected, rel=1e-6)
    cells = loss.cell_losses(recon, target)
    assert float(cells[1, 2]) == pytest.approx(math.log(2) / math.log(4), rel=1e-6)
    empty = torch.full((3, 4), nan)
    assert float(loss(recon, empty).sum()) == 0.0  # no target cell: loss 0, not NaN


def test_loss_is_finite_on_awkward_columns() -> None:
    rng = np.random.default_rng(0)
    n = 400
    frame = pd.DataFrame(
        {
            "constant": np.full(n, 3.0),
            "near_constant": 1.0 + 1e-6 * rng.normal(size=n),  # variance 1e-12
            "all_nan": np.full(n, np.nan),
            "category": pd.Categorical(rng.choice(["u", "v", "w"], size=n)),
            "one_category": pd.Categorical(["only"] * n),
            "big": 1e12 * rng.normal(size=n),
        }
    )
    enc = TableEncoder()
    numeric, codes = tensors(enc.fit_transform(frame))
    inputs = TabularInput(
        numeric_mean=enc.numeric_mean.tolist(),
        numeric_std=enc.numeric_std.tolist(),
        cardinalities=enc.cardinalities,
    )
    mask = draw_mask(n, frame.shape[1], 0.5, torch.Generator().manual_seed(0))
    _, _, target = mask_cells(numeric, codes, mask, inputs)
    loss = ReconstructionLoss(n_numeric=numeric.shape[1], vocab_sizes=[3, 1])
    recon = torch.zeros(n, loss.output_dim, requires_grad=True)
    per_row = loss(recon, target)
    value = per_row.mean()
    value.backward()  # type: ignore[no-untyped-call]
    assert torch.isfinite(value) and recon.grad is not None and torch.isfinite(recon.grad).all()
    cells = loss.cell_losses(recon.detach(), target)
    assert torch.isfinite(cells).all()
    # predicting zero (the mean) costs ~1 on real columns, 0 on constant ones
    order = enc.numeric_columns
    col = {frame.columns[c]: i for i, c in enumerate(order)}
    counts = (~torch.isnan(target)).sum(dim=0)
    per_feature = cells.sum(dim=0) / counts.clamp_min(1)
    assert counts[col["all_nan"]] == 0
    assert float(per_feature[col["constant"]]) == 0.0
    assert 0.7 < float(per_feature[col["near_constant"]]) < 1.3
    assert 0.7 < float(per_feature[col["big"]]) < 1.3
    n_num = numeric.shape[1]
    assert float(per_feature[n_num]) == pytest.approx(1.0)  # uniform over 3 categories
    assert float(per_feature[n_num + 1]) == 0.0  # one category: nothing to learn


def test_fit_on_awkward_columns_has_finite_losses() -> None:
    rng = np.random.default_rng(1)
    n = 200
    frame = pd.DataFrame(
        {
            "constant": np.full(n, 3.0),
            "near_constant": 1.0 + 1e-6 * rng.normal(size=n),
            "all_nan": np.full(n, np.nan),
            "category": pd.Categorical(rng.choice(["u", "v", "w"], size=n)),
            "x": rng.normal(size=n),
        }
    )
    model = TabNetPretrainer(**{**TINY, "max_epochs": 2}, early_stopping=True).fit(frame)
    for record in model.history_:
        assert math.isfinite(record["train_loss"]) and math.isfinite(record["val_loss"])
    assert np.isfinite(model.transform(frame)).all()


# ---- TabNetPretrainer ---------------------------------------------------------------------------


def test_reconstruction_improves_and_beats_the_column_mean() -> None:
    frame = make_frame(n=1000, seed=3)
    val = make_frame(n=300, seed=4)
    model = TabNetPretrainer(
        n_d=8,
        n_a=8,
        n_steps=2,
        max_epochs=25,
        batch_size=256,
        random_state=0,
        device="cpu",
        lambda_sparse=0.0,
    ).fit(frame, X_val=val)
    losses = [r["val_loss"] for r in model.history_]
    assert losses[int(np.argmin(losses))] < 0.6 * losses[0]
    # the trivial reconstruction (column means, uniform categories) scores ~1 on the same cells
    enc = model.encoder_
    numeric, codes = tensors(enc.transform(val))
    rng = np.random.default_rng(0)
    mask = torch.from_numpy(rng.random((len(val), val.shape[1])) < 0.2)
    _, _, target = mask_cells(numeric, codes, mask, model.network_.inputs)
    loss = model._loss_fn()
    trivial = float(loss(torch.zeros(len(val), model._n_outputs()), target).mean())
    assert 0.8 < trivial < 1.2
    assert min(losses) < 0.5 * trivial


def test_validation_mask_is_drawn_once(X: pd.DataFrame, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    real = pretrainer_module.mask_cells

    def counting(*args: Any) -> Any:
        calls.append(args[2].clone())
        return real(*args)

    monkeypatch.setattr(pretrainer_module, "mask_cells", counting)
    model = TabNetPretrainer(**{**TINY, "max_epochs": 4}, early_stopping=True).fit(X)
    assert len(calls) == 1 and len(model.history_) == 4  # one mask for all epochs
    assert all("val_loss" in r for r in model.history_)
    TabNetPretrainer(**{**TINY, "max_epochs": 2}, early_stopping=True).fit(X)
    assert len(calls) == 2 and torch.equal(calls[0], calls[1])  # drawn from the seed
    assert abs(float(calls[0].float().mean()) - 0.2) < 0.05


def test_early_stopping_and_history(X: pd.DataFrame) -> None:
    model = TabNetPretrainer(**{**TINY, "max_epochs": 20}, n_iter_no_change=2)
    model = with_fixed(model, tol=100.0).fit(X, X_val=X.iloc[:60])
    assert len(model.history_) == 3 and model.n_iter_ == 3 and model.best_iteration_ == 0
    assert [r["epoch"] for r in model.history_] == [0.0, 1.0, 2.0]
    for record in model.history_:
        assert {"epoch", "train_loss", "val_loss", "learning_rate", "seconds"} <= set(record)
    no_val = TabNetPretrainer(**TINY, early_stopping=False).fit(X)
    assert len(no_val.history_) == 3 and "val_loss" not in no_val.history_[0]


class _StopAfter(Callback):
    def __init__(self, epochs: int) -> None:
        self.epochs = epochs

    def on_epoch_end(self, trainer: Any, record: dict[str, float]) -> None:
        trainer.stop = len(trainer.history) >= self.epochs


def test_seeded_fit_is_reproducible_and_resumes_exactly(X: pd.DataFrame, tmp_path: Path) -> None:
    settings = {**TINY, "max_epochs": 4, "early_stopping": True}
    full = TabNetPretrainer(**settings).fit(X)
    again = TabNetPretrainer(**settings).fit(X)

    def losses(model: TabNetPretrainer) -> list[tuple[float, float]]:
        return [(r["train_loss"], r["val_loss"]) for r in model.history_]

    assert losses(again) == losses(full)
    TabNetPretrainer(**settings, checkpoint_dir=tmp_path, callbacks=[_StopAfter(2)]).fit(X)
    resumed = TabNetPretrainer(**settings).fit(X, resume_from=tmp_path)
    assert losses(resumed) == losses(full)
    np.testing.assert_array_equal(resumed.transform(X), full.transform(X))


def test_parameters_are_validated(X: pd.DataFrame) -> None:
    with pytest.raises(ValueError, match="pretraining_ratio"):
        TabNetPretrainer(pretraining_ratio=1.0).fit(X)
    with pytest.raises(ValueError, match="n_shared_decoder=0 \\+ n_indep_decoder=0"):
        TabNetPretrainer(**TINY, n_shared_decoder=0, n_indep_decoder=0).fit(X)


def test_pretrainer_is_a_sibling_sharing_the_fit_template() -> None:
    from tabsparse.estimators._base import TabNetBase
    from tabsparse.estimators._supervised import TabNetSupervised

    assert issubclass(TabNetPretrainer, TabNetBase)
    assert not issubclass(TabNetPretrainer, TabNetSupervised)
    assert TabNetPretrainer._fit is TabNetClassifier._fit is TabNetRegressor._fit
    params = TabNetPretrainer().get_params()
    assert not {"scoring", "distributed", "pretrained"} & set(params)
    assert set(TabNetPretrainer._parameter_constraints) == set(params)


def test_transform(pre: TabNetPretrainer, X: pd.DataFrame) -> None:
    Z = pre.transform(X)
    assert Z.shape == (len(X), 4) and Z.dtype == np.float32
    assert (Z >= 0).all()  # a sum of ReLU'd decision outputs
    np.testing.assert_array_equal(Z, pre.transform(X))
    np.testing.assert_array_equal(Z[:7], pre.transform(X.iloc[:7]))
    np.testing.assert_array_equal(TabNetPretrainer(**TINY).fit_transform(X), Z)
    assert pre.get_feature_names_out().tolist() == ["tabnet0", "tabnet1", "tabnet2", "tabnet3"]
    explanation = pre.explain(X.iloc[:5])  # the encoder's attention, as for the estimators
    assert explanation.importances.shape == (5, X.shape[1])
    np.testing.assert_allclose(explanation.importances.sum(axis=1), 1.0, rtol=1e-5)
    assert pre.feature_importances_.shape == (X.shape[1],)
    with pytest.raises(NotFittedError):
        TabNetPretrainer().transform(X)
    with pytest.raises(TypeError, match="cannot be exported"):
        pre.export("model.onnx")


def test_in_a_pipeline(pre: TabNetPretrainer, X: pd.DataFrame, y: np.ndarray) -> None:
    pipe = Pipeline([("tabnet", TabNetPretrainer(**TINY)), ("lr", LogisticRegression())])
    pipe.fit(X, y)
    assert pipe.predict(X).shape == (len(X),)
    pipe.set_output(transform="pandas")
    out = pipe[:1].transform(X)
    assert list(out.columns) == ["tabnet0", "tabnet1", "tabnet2", "tabnet3"]


def test_pickle_and_model_file_round_trips(
    pre: TabNetPretrainer, X: pd.DataFrame, tmp_path: Path
) -> None:
    back = pickle.loads(pickle.dumps(pre))
    np.testing.assert_array_equal(back.transform(X), pre.transform(X))
    save(pre, tmp_path / "pre.tabsparse")
    loaded = load(tmp_path / "pre.tabsparse")
    assert isinstance(loaded, TabNetPretrainer)
    np.testing.assert_array_equal(loaded.transform(X), pre.transform(X))
    assert loaded.history_ == pre.history_ and loaded.get_params() == pre.get_params()


# ---- fine-tuning ---------------------------------------------------------------------------------


class _GrabStart(Callback):
    def on_fit_begin(self, trainer: Any) -> None:
        self.state = {k: v.clone() for k, v in trainer.network.state_dict().items()}


def _state(module: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.clone() for k, v in module.state_dict().items()}


@pytest.mark.parametrize("cls", [TabNetClassifier, TabNetRegressor])
def test_fine_tuning_starts_from_the_pretrained_weights(
    cls: type, pre: TabNetPretrainer, X: pd.DataFrame, y: np.ndarray
) -> None:
    before = _state(pre.network_)
    grab = _GrabStart()
    model = cls(**{**TINY, "max_epochs": 1}, pretrained=pre, callbacks=[grab]).fit(X, y)
    for part in ("inputs", "encoder"):
        for name, value in getattr(pre.network_, part).state_dict().items():
            assert torch.equal(grab.state[f"{part}.{name}"], value), name
    assert model.encoder_ is not pre.encoder_
    assert model.encoder_.to_dict() == pre.encoder_.to_dict()
    after = _state(pre.network_)
    assert all(torch.equal(before[k], after[k]) for k in before)  # pretrained is not changed
    trained = model.network_.encoder.state_dict()
    assert any(not torch.equal(trained[k], v) for k, v in pre.network_.encoder.state_dict().items())


def test_mismatched_architecture_is_named(
    pre: TabNetPretrainer, X: pd.DataFrame, y: np.ndarray
) -> None:
    with pytest.raises(ValueError, match="n_d=4 in the pretrainer but n_d=8 here") as info:
        TabNetClassifier(**{**TINY, "n_d": 8, "n_steps": 3}, pretrained=pre).fit(X, y)
    assert "n_steps=2 in the pretrainer but n_steps=3 here" in str(info.value)
    assert "n_a" not in str(info.value)
    pre.set_params(n_d=8)  # parameters changed after fit do not fool the check
    try:
        with pytest.raises(ValueError, match="n_d=4 in the pretrainer"):
            TabNetClassifier(**{**TINY, "n_d": 8}, pretrained=pre).fit(X, y)
    finally:
        pre.set_params(n_d=4)
    # gamma, the mask type and the training parameters may differ
    tuned = TabNetClassifier(**TINY, gamma=1.0, pretrained=pre)
    with_fixed(tuned, mask_type="entmax").fit(X, y)


def test_mismatched_columns_are_named(
    pre: TabNetPretrainer, X: pd.DataFrame, y: np.ndarray
) -> None:
    other = X.drop(columns=["two_a"]).assign(extra=1.0)
    with pytest.raises(ValueError, match=r"missing \['two_a'\], unexpected \['extra'\]"):
        TabNetClassifier(**TINY, pretrained=pre).fit(other, y)
    with pytest.raises(ValueError, match="X has 5 columns, but pretrained was fitted on 6"):
        TabNetClassifier(**TINY, pretrained=pre).fit(X.to_numpy()[:, :5], y)
    # the same columns in another order are fine (matched by name)
    TabNetClassifier(**TINY, pretrained=pre).fit(X[X.columns[::-1]], y)


def test_unfitted_or_wrong_pretrained_is_refused(X: pd.DataFrame, y: np.ndarray) -> None:
    with pytest.raises(ValueError, match="unfitted TabNetPretrainer"):
        TabNetClassifier(**TINY, pretrained=TabNetPretrainer(**TINY)).fit(X, y)
    with pytest.raises(TypeError, match="must be a fitted TabNetPretrainer, got StandardScaler"):
        TabNetClassifier(**TINY, pretrained=StandardScaler()).fit(X, y)
    with pytest.raises(ValueError, match="pretrained"):
        TabNetClassifier(**TINY, pretrained="weights.pt").fit(X, y)


def test_clone_and_grid_search_keep_the_fitted_pretrainer(
    pre: TabNetPretrainer, X: pd.DataFrame, y: np.ndarray
) -> None:
    clf = TabNetClassifier(**TINY, pretrained=pre)
    twin = clone(clf)
    assert twin.pretrained is pre and twin is not clf
    assert not hasattr(twin, "network_")
    twin.fit(X, y)
    assert twin.score(X, y) > 0.5
    search = GridSearchCV(clf, {"learning_rate": [0.01, 0.02]}, cv=2).fit(X, y)
    assert search.best_estimator_.pretrained is pre
    # the pretrainer itself still clones to an unfitted copy
    assert not hasattr(clone(pre), "network_")


def test_warm_start_ignores_pretrained(
    pre: TabNetPretrainer, X: pd.DataFrame, y: np.ndarray
) -> None:
    clf = TabNetClassifier(**{**TINY, "max_epochs": 1}, pretrained=pre, warm_start=True)
    clf.fit(X, y)
    head = clf.network_.head.weight.detach().clone()
    clf.fit(X, y)  # continues: the head is not reset, the encoder not re-copied
    assert len(clf.history_) == 2
    assert not torch.equal(head, clf.network_.head.weight)


def test_fine_tuned_model_saves_without_the_pretrainer(
    pre: TabNetPretrainer, X: pd.DataFrame, y: np.ndarray, tmp_path: Path
) -> None:
    clf = TabNetClassifier(**TINY, pretrained=pre).fit(X, y)
    save(clf, tmp_path / "clf.tabsparse")
    loaded = load(tmp_path / "clf.tabsparse")
    assert loaded.pretrained is None  # the weights are in the file; the pretrainer is not
    np.testing.assert_array_equal(loaded.predict_proba(X), clf.predict_proba(X))


# ---- scikit-learn's common checks ---------------------------------------------------------------

EXPECTED_FAILURES: dict[str, str] = {}  # every check applies and passes


@parametrize_with_checks(
    [TabNetPretrainer(n_d=4, n_a=4, n_steps=2, max_epochs=2, random_state=0, device="cpu")],
    expected_failed_checks=lambda est: EXPECTED_FAILURES,
)
def test_sklearn_common_checks(estimator: object, check: object) -> None:
    check(estimator)  # type: ignore[operator]
