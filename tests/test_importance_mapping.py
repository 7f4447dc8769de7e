"""Masks and importances land on the right original columns.

Checked independently of ``explain`` itself: the channel -> column map against the input layout
(perturb one column, see which channels move), a network whose attention is set by hand to select
one column group (only that group's channels may then reach the output, and the importances must
be all on it), and a small fit where only a categorical column among numeric ones decides ``y``.
Covers categorical columns of several embedding widths among numeric ones, grouped features, a
pretrained (then fine-tuned) model and the export with ``masks=True``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest
import torch
from fixed_helpers import build, with_fixed

from tabsparse import TabNetClassifier, TabNetPretrainer
from tabsparse.export import serving_module
from tabsparse.nn.network import TabNet

NUMERIC = [0, 2, 4]  # categorical columns 1 and 3 sit among the numeric ones
CATEGORICAL = [1, 3]
CARDS = [6, 5]
SMALL: dict[str, Any] = dict(
    n_d=8, n_a=8, n_steps=3, n_independent=1, n_shared=1, random_state=0, device="cpu"
)
# The classifiers' fits keep the numeric columns as plain values and the paper's per-row first
# mask: these tests are about how embedding channels and groups map to columns. (With the
# defaults, periodic embeddings of the three numeric noise columns and a shared first mask, the
# deciding column still led, with 45-55% of the mass, but by 1.9-2.0x rather than over 2x.)
# Their fits run a fixed few epochs, at the rate those were chosen for (learning_rate="auto"
# halves it for these validated small-batch fits).
CLASSIFIER: dict[str, Any] = {
    **SMALL,
    "numeric_embedding": None,
    "learning_rate": 0.02,
}


def classifier(**params: Any) -> TabNetClassifier:
    """A classifier with :data:`CLASSIFIER`'s settings (and ``params``) and the per-row first
    mask; ``cat_emb_dim`` among ``params`` sets that fixed choice."""
    return build(TabNetClassifier, **{**CLASSIFIER, "first_mask": "per_row", **params})


def _network(cat_emb_dim: int, grouped: list[list[int]] | None) -> TabNet:
    torch.manual_seed(0)
    return TabNet(
        numeric_columns=NUMERIC,
        categorical_columns=CATEGORICAL,
        numeric_mean=[0.0] * 3,
        numeric_std=[1.0] * 3,
        cardinalities=CARDS,
        n_outputs=2,
        cat_emb_dim=cat_emb_dim,
        grouped_features=grouped,
        n_d=4,
        n_a=4,
        n_steps=2,
    ).eval()


def _inputs(n: int = 16) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    numeric = torch.randn(n, len(NUMERIC), generator=g)
    codes = torch.stack([torch.randint(2, c, (n,), generator=g) for c in CARDS], dim=1)
    return numeric, codes


def _perturbed(col: int, numeric: torch.Tensor, codes: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Change original column ``col`` only (a new value in every row)."""
    numeric, codes = numeric.clone(), codes.clone()
    if col in NUMERIC:
        numeric[:, NUMERIC.index(col)] += 1.5
    else:
        j = CATEGORICAL.index(col)
        codes[:, j] = (codes[:, j] - 1) % (CARDS[j] - 2) + 2  # another vocabulary entry
    return numeric, codes


def _select_group(network: torch.nn.Module, group: int) -> None:
    """Make every step's attention a constant one-hot mask on ``group``: zero attention weights,
    and an eval-mode batch norm that outputs logit 5 for ``group`` and -5 for the others."""
    state = network.state_dict()
    for key, value in state.items():
        if ".attention." not in key:
            continue
        if key.endswith("fc.weight"):
            value.zero_()
        elif key.endswith("bn.running_mean"):
            value.zero_()
        elif key.endswith("bn.running_var") or key.endswith("bn.weight"):
            value.fill_(1.0)
        elif key.endswith("bn.bias"):
            value.fill_(-5.0)
            value[group] = 5.0
    network.load_state_dict(state)


# --------------------------------------------------------------------------------------------
# Exact: the channel -> column map against the input layout
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("cat_emb_dim", [1, 2, 3])
@pytest.mark.parametrize("grouped", [None, [[4, 1]], [[0, 3], [2, 4]]])
def test_every_channel_is_mapped_to_the_column_it_encodes(
    cat_emb_dim: int, grouped: list[list[int]] | None
) -> None:
    net = _network(cat_emb_dim, grouped)
    numeric, codes = _inputs()
    with torch.no_grad():
        base = net.inputs(numeric, codes)
        owner = torch.full((base.shape[1],), -1)
        for col in range(5):
            moved = (net.inputs(*_perturbed(col, numeric, codes)) != base).any(dim=0)
            assert int(moved.sum()) == (1 if col in NUMERIC else cat_emb_dim)
            assert bool((owner[moved] == -1).all())  # each channel encodes one column
            owner[moved] = col
    assert bool((owner >= 0).all())
    # the encoder's group of each channel is the group of the column that channel encodes
    assert net.encoder.group_index.tolist() == net.column_group[owner].tolist()


@pytest.mark.parametrize("cat_emb_dim", [1, 3])
@pytest.mark.parametrize("grouped", [None, [[4, 1]]])
@pytest.mark.parametrize("column", [1, 2, 3])
def test_a_hand_set_mask_lets_only_the_selected_columns_through(
    cat_emb_dim: int, grouped: list[list[int]] | None, column: int
) -> None:
    net = _network(cat_emb_dim, grouped)
    group = int(net.column_group[column])
    selected = set(np.flatnonzero(net.column_group.numpy() == group).tolist())
    _select_group(net, group)
    numeric, codes = _inputs()
    with torch.no_grad():
        out = net(numeric, codes)
        want = torch.zeros(5)
        want[list(selected)] = 1.0 / len(selected)
        torch.testing.assert_close(net.column_masks(out.masks), want.expand(2, 16, 5))
        torch.testing.assert_close(
            net.importances(out.masks, out.step_importance), want.expand(16, 5)
        )
        for col in range(5):
            logits = net(*_perturbed(col, numeric, codes)).logits
            if col in selected:
                assert not torch.allclose(logits, out.logits), col
            else:  # attention gives it nothing: the output cannot depend on it
                torch.testing.assert_close(logits, out.logits, rtol=0, atol=0)


# --------------------------------------------------------------------------------------------
# Estimators: a categorical column among numeric ones decides y
# --------------------------------------------------------------------------------------------


def _color_table(n: int = 1200, seed: int = 0) -> tuple[pd.DataFrame, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = pd.DataFrame(
        {
            "a": rng.normal(size=n),
            "color": pd.Categorical(rng.choice(["red", "green", "blue", "black", "white"], n)),
            "b": rng.normal(size=n),
            "size": rng.choice(["s", "m", "l"], n),
            "c": rng.normal(size=n),
        }
    )
    y = X["color"].isin(["red", "blue"]).to_numpy().astype(int)
    return X, y


@pytest.fixture(scope="module")
def color() -> tuple[pd.DataFrame, np.ndarray]:
    return _color_table()


@pytest.mark.parametrize("cat_emb_dim", [1, 3])
def test_hand_set_attention_on_color_through_the_estimator_and_the_export(
    color: tuple[pd.DataFrame, np.ndarray], cat_emb_dim: int
) -> None:
    X, y = color
    clf = classifier(max_epochs=1, cat_emb_dim=cat_emb_dim).fit(X, y)
    _select_group(clf.network_, 1)  # "color" is column 1; no groups: group 1
    rows = X.head(40)
    explanation = clf.explain(rows)
    want = np.zeros((40, 5))
    want[:, 1] = 1.0
    np.testing.assert_allclose(explanation.importances, want, atol=1e-6)
    np.testing.assert_allclose(explanation.masks, np.broadcast_to(want, (3, 40, 5)), atol=1e-6)
    proba = clf.predict_proba(rows)
    for name in ["a", "b", "size", "c"]:
        other = rows.copy()
        other[name] = X[name].iloc[40:80].to_numpy()
        np.testing.assert_allclose(clf.predict_proba(other), proba, rtol=0, atol=1e-6)
    other = rows.copy()
    other["color"] = X["color"].iloc[40:80].to_numpy()
    assert np.abs(clf.predict_proba(other) - proba).max() > 1e-4

    module = serving_module(clf, masks=True)
    enc = clf.encoder_.transform(rows)
    with torch.no_grad():
        probabilities, masks, importances = module(
            torch.from_numpy(enc.numeric), torch.from_numpy(enc.codes)
        )
    np.testing.assert_allclose(probabilities.numpy(), proba, atol=1e-5)
    np.testing.assert_allclose(masks.numpy(), explanation.masks, atol=1e-5)
    np.testing.assert_allclose(importances.numpy(), want, atol=1e-5)


def _assert_leads(importances: np.ndarray, column: int) -> None:
    """``column`` holds over 35% of the mass and over twice any other column's (noise columns
    do get some: attention is not attribution)."""
    share = importances / importances.sum()
    others = np.delete(share, column)
    assert share[column] > 0.35 and share[column] > 2 * others.max(), share


@pytest.mark.parametrize("cat_emb_dim", [1, 3])
def test_a_fit_puts_most_importance_on_the_deciding_categorical_column(
    color: tuple[pd.DataFrame, np.ndarray], cat_emb_dim: int
) -> None:
    X, y = color
    clf = classifier(max_epochs=15, cat_emb_dim=cat_emb_dim).fit(X, y)
    assert clf.score(X, y) > 0.95
    _assert_leads(clf.feature_importances_, 1)
    rows = clf.explain(X.head(200)).importances
    _assert_leads(rows.mean(axis=0), 1)
    enc = clf.encoder_.transform(X.head(200))
    with torch.no_grad():
        served = serving_module(clf, masks=True)(
            torch.from_numpy(enc.numeric), torch.from_numpy(enc.codes)
        )
    np.testing.assert_allclose(served[2].numpy(), rows, atol=1e-5)


def test_grouped_features_share_the_group_importance(
    color: tuple[pd.DataFrame, np.ndarray],
) -> None:
    X, y = color
    # "color" (1) grouped with the noise column "c" (4): the group's mass is split equally
    clf = classifier(max_epochs=15, grouped_features=[[1, 4]]).fit(X, y)
    importances = clf.feature_importances_
    assert importances[1] == pytest.approx(importances[4], rel=1e-5)
    _assert_leads(np.array([importances[1] + importances[4], *importances[[0, 2, 3]]]), 0)
    assert clf.score(X, y) > 0.95


def test_a_pretrained_and_fine_tuned_model_finds_the_deciding_column(
    color: tuple[pd.DataFrame, np.ndarray],
) -> None:
    X, y = color
    pre = with_fixed(TabNetPretrainer(**{**SMALL, "max_epochs": 5}), cat_emb_dim=2).fit(X)
    clf = classifier(max_epochs=15, pretrained=pre, cat_emb_dim=2)
    clf.fit(X, y)
    assert clf.score(X, y) > 0.95
    _assert_leads(clf.feature_importances_, 1)
