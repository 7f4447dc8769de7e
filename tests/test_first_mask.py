"""``first_mask="shared"``: the first step's mask is one learned selection for every row, so a
feature that no mask of a row selects cannot change that row's prediction (with the paper's
``"per_row"`` first mask it can), and the setting reaches estimators, model files and
pretraining."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import torch
from fixed_helpers import with_fixed
from model_file_helpers import edit_doc, read_members, write_members

from tabsparse import TabNetClassifier, TabNetPretrainer, load, save
from tabsparse.nn import TabNet, TabNetEncoder
from tabsparse.sparsemax import sparsemax

SMALL = dict(max_epochs=2, n_d=8, n_a=8, n_steps=2, random_state=0, device="cpu")


def _network(first_mask: str) -> TabNet:
    """Five numeric columns and one categorical, two members, periodic embeddings; every
    step's attention is biased against columns 3 and 5, so no mask ever selects them."""
    torch.manual_seed(0)
    net = TabNet(
        numeric_columns=[0, 1, 2, 3, 4],
        categorical_columns=[5],
        numeric_mean=[0.0] * 5,
        numeric_std=[1.0] * 5,
        cardinalities=[4],
        cat_emb_dim=2,
        n_outputs=2,
        n_steps=3,
        n_members=2,
        numeric_embedding="periodic",
        first_mask=first_mask,
    )
    with torch.no_grad():
        for attentive in net.encoder.attention:
            attentive.bn.weight.uniform_(0.5, 1.5)
            attentive.bn.bias.normal_(0.0, 1.0)
            attentive.bn.bias[[3, 5]] = -50.0
        for p in net.parameters():
            if p.dim() == 2:
                p.normal_(0.0, 0.5)
    return net.eval()


@pytest.mark.parametrize("first_mask", ["shared", "per_row"])
def test_unselected_columns_reach_the_prediction_only_through_a_per_row_first_mask(
    first_mask: str,
) -> None:
    net = _network(first_mask)
    g = torch.Generator().manual_seed(1)
    numeric = torch.randn(64, 5, generator=g)
    codes = torch.randint(0, 4, (64, 1), generator=g)
    with torch.no_grad():
        out = net(numeric, codes)
        assert torch.all(out.masks[..., [3, 5]] == 0)  # never selected, in any step or member
        assert torch.all(out.masks[..., [0, 1, 2, 4]].amax(dim=(0, 1)) > 0)  # the others are
        moved = numeric.clone()
        moved[:, 3] += 5.0
        other = net(moved, (codes + 1) % 4)
    change = (other.logits - out.logits).abs().max().item()
    if first_mask == "shared":
        assert change == 0.0
        torch.testing.assert_close(other.masks, out.masks, rtol=0, atol=0)
    else:  # the initial transformer reads the whole row: the masks and the logits move
        assert change > 1e-3


@pytest.mark.parametrize("training", [True, False])
def test_the_shared_first_mask_is_the_mask_of_the_attention_bias(training: bool) -> None:
    torch.manual_seed(2)
    enc = TabNetEncoder(input_dim=6, group_index=[0, 0, 1, 2, 3, 4], n_steps=2, first_mask="shared")
    assert enc.initial is None
    with torch.no_grad():
        enc.attention[0].bn.bias.copy_(torch.tensor([1.0, 0.2, -0.5, 0.9, 0.0]))
    enc.train(training)
    out = enc(torch.randn(256, 6))
    expected = sparsemax(torch.tensor([1.0, 0.2, -0.5, 0.9, 0.0]), dim=-1)
    assert expected.min() == 0  # a sparse selection
    torch.testing.assert_close(out.masks[0], expected.expand(256, -1), rtol=0, atol=1e-6)
    assert out.masks[1].std(0).max() > 0  # the second step's mask depends on the row


def test_the_shared_first_mask_builds_no_initial_transformer() -> None:
    def size(first_mask: str) -> int:
        enc = TabNetEncoder(input_dim=6, group_index=list(range(6)), first_mask=first_mask)
        return sum(p.numel() for p in enc.parameters())

    # n_d + n_a = 16: two independent 16 -> 32 GLU layers with their batch norms, and the
    # transformer's own batch norms of the two shared layers (their weights are shared)
    initial = 2 * (16 * 32 + 2 * 32) + 2 * (2 * 32)
    assert size("per_row") - size("shared") == initial
    with pytest.raises(ValueError, match=r"first_mask='first' must be one of"):
        TabNetEncoder(input_dim=2, group_index=[0, 1], first_mask="first")


def _frame(n: int = 200) -> tuple[pd.DataFrame, np.ndarray]:
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(2, n))
    colour = pd.Categorical(rng.choice(["red", "green"], size=n))
    return pd.DataFrame({"a": a, "colour": colour, "b": b}), (a + b > 0).astype(int)


def test_estimators_take_save_and_check_the_first_mask(tmp_path: Path) -> None:
    X, y = _frame()
    est = with_fixed(TabNetClassifier(**SMALL), first_mask="shared").fit(X, y)
    assert est.first_mask_ == "shared" and est.network_.encoder.initial is None
    imp = est.explain(X).importances
    path = tmp_path / "model.tabsparse"
    save(est, path)
    back = load(path)
    assert back.first_mask_ == "shared" and back.network_.encoder.initial is None
    np.testing.assert_array_equal(back.predict_proba(X), est.predict_proba(X))
    np.testing.assert_array_equal(back.explain(X).importances, imp)
    with pytest.raises(TypeError, match="unexpected keyword argument 'first_mask'"):
        TabNetClassifier(first_mask="shared")  # a fixed choice, not a parameter
    pre = with_fixed(TabNetPretrainer(**SMALL), first_mask="shared").fit(X)
    tuned = TabNetClassifier(pretrained=pre, **SMALL).fit(X, y)  # the rule takes the pretrainer's
    assert tuned.first_mask_ == "shared" and tuned.network_.encoder.initial is None
    with pytest.raises(ValueError, match=r"architecture of pretrained: first_mask"):
        with_fixed(TabNetClassifier(pretrained=pre, **SMALL), first_mask="per_row").fit(X, y)


def _without_architecture(doc: dict[str, Any], first_mask: str | None) -> None:
    """A file from before the fitted architecture: the network's settings only in its
    parameters (``first_mask`` among them, or not even that)."""
    doc["attributes"].pop("architecture_")
    doc["attributes"].pop("first_mask_")
    if first_mask is not None:
        doc["params"]["first_mask"] = first_mask


@pytest.mark.parametrize(("named", "built"), [(None, "per_row"), ("shared", "shared")])
def test_model_files_from_before_the_fitted_architecture_load_with_the_first_mask_they_name(
    tmp_path: Path, named: str | None, built: str
) -> None:
    """A file written before the fitted architecture builds its network from its parameters:
    without ``first_mask`` among them it was fitted with the paper's per-row first mask, with
    it, with that one; it loads as that, whatever the fixed choice's rule says today."""
    X, y = _frame()
    est = with_fixed(TabNetClassifier(**SMALL), first_mask=built).fit(X, y)
    path = tmp_path / "model.tabsparse"
    save(est, path)
    members = edit_doc(read_members(path), lambda doc: _without_architecture(doc, named))
    old = tmp_path / "old.tabsparse"
    write_members(old, members)
    back = load(old)
    assert back.architecture_["first_mask"] == built
    assert (back.network_.encoder.initial is None) == (built == "shared")
    np.testing.assert_array_equal(back.predict_proba(X), est.predict_proba(X))
