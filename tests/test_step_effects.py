"""Each step's weight in the importances: the size of its share of the outputs through the
linear head (tabsparse.nn.functional.step_effects), centred within groups of outputs whose
common shift changes no prediction; checked by hand, by invariance and through the estimators."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch
from conftest import numeric_tabnet

from tabsparse import TabNetClassifier, TabNetRegressor
from tabsparse.nn import functional as F


def test_step_effects_by_hand() -> None:
    # 2 steps, 1 member, 2 rows, n_d = 2; a head of 3 outputs
    decisions = torch.tensor([[[[1.0, 0.0], [0.0, 2.0]]], [[[0.5, 0.5], [0.0, 0.0]]]])
    weight = torch.tensor([[[1.0, 2.0], [0.0, -1.0], [3.0, 0.0]]])
    got = F.step_effects(decisions, weight, None)
    # step 0, row 0: W d = (1, 0, 3) -> 4; row 1: (4, -2, 0) -> 6
    # step 1, row 0: (1.5, -0.5, 1.5) -> 3.5; row 1: 0
    torch.testing.assert_close(got, torch.tensor([[[4.0, 6.0]], [[3.5, 0.0]]]))
    centre = F.centring([[0, 1, 2]], 3)
    got = F.step_effects(decisions, weight, centre)
    # centred: (1, 0, 3) - 4/3 -> 1/3 + 4/3 + 5/3 = 10/3; (4, -2, 0) - 2/3 -> 20/3
    # (1.5, -0.5, 1.5) - 5/6 -> 2/3 + 4/3 + 2/3 = 8/3
    torch.testing.assert_close(got, torch.tensor([[[10 / 3, 20 / 3]], [[8 / 3, 0.0]]]))


def test_centring_groups() -> None:
    centre = F.centring([[0, 1], [3, 4, 5]], 6)
    assert centre is not None
    y = torch.tensor([[1.0, 3.0, 7.0, 1.0, 2.0, 6.0]])
    torch.testing.assert_close(y @ centre, torch.tensor([[-1.0, 1.0, 7.0, -2.0, -1.0, 3.0]]))
    assert F.centring([], 4) is None


def _net(**kwargs: object) -> torch.nn.Module:
    torch.manual_seed(0)
    return numeric_tabnet(4, 3, n_steps=3, virtual_batch_size=16, **kwargs).eval()


@pytest.mark.parametrize("n_members", [1, 3])
def test_network_weights_steps_by_their_centred_effect(n_members: int) -> None:
    net = _net(output_groups=[[0, 1, 2]], n_members=n_members)
    x = torch.randn(20, 4)
    codes = torch.zeros(20, 0, dtype=torch.int64)
    with torch.no_grad():
        out = net(x, codes)
        # by hand: member m's rows through its block of the head, centred over the 3 outputs
        k = n_members
        inp = net.inputs(x, codes)
        rows = inp if k == 1 else (inp.unsqueeze(0) * net.member_scale).reshape(k * 20, -1)
        dec = net.encoder(rows, keep_decisions=True).decisions
        for m in range(k):
            w = net.head.weight[3 * m : 3 * m + 3]
            share = torch.einsum("sni,oi->sno", dec[:, 20 * m : 20 * (m + 1)], w)
            want = (share - share.mean(dim=-1, keepdim=True)).abs().sum(dim=-1)
            torch.testing.assert_close(
                out.step_importance[3 * m : 3 * m + 3], want, rtol=1e-5, atol=1e-6
            )


def test_a_shift_common_to_a_group_changes_neither_predictions_nor_importances() -> None:
    net = _net(output_groups=[[0, 1, 2]])
    x = torch.randn(30, 4)
    codes = torch.zeros(30, 0, dtype=torch.int64)
    with torch.no_grad():
        before = net(x, codes)
        imp = net.importances(before.masks, before.step_importance)
        net.head.weight += torch.randn(1, net.head.weight.shape[1])  # every output alike
        after = net(x, codes)
        torch.testing.assert_close(
            torch.softmax(after.logits, dim=1), torch.softmax(before.logits, dim=1)
        )
        torch.testing.assert_close(after.step_importance, before.step_importance)
        torch.testing.assert_close(net.importances(after.masks, after.step_importance), imp)
    # without the group the shift would count
    plain = _net()
    with torch.no_grad():
        first = plain(x, codes).step_importance
        plain.head.weight += torch.randn(1, plain.head.weight.shape[1])
        assert not torch.allclose(plain(x, codes).step_importance, first)


@pytest.mark.parametrize(
    ("groups", "message"),
    [
        ([[0, 1], [1, 2]], "output_groups must be disjoint non-empty groups"),
        ([[]], "output_groups must be disjoint non-empty groups"),
        ([[0, 3]], r"name an output outside 0 \.\. 2"),
    ],
)
def test_bad_output_groups_are_refused(groups: list[list[int]], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        _net(output_groups=groups)


def test_networks_pickled_before_keep_the_papers_weights() -> None:
    net = _net(output_groups=[[0, 1, 2]])
    del net.output_groups  # as a network pickled by an earlier version
    x = torch.randn(20, 4)
    codes = torch.zeros(20, 0, dtype=torch.int64)
    with torch.no_grad():
        out = net(x, codes)
        paper = net.encoder(net.inputs(x, codes)).step_importance
    torch.testing.assert_close(out.step_importance, paper)


def _frame(n: int = 300) -> tuple[pd.DataFrame, np.ndarray]:
    rng = np.random.default_rng(0)
    X = pd.DataFrame(rng.normal(size=(n, 4)), columns=["a", "b", "c", "d"])
    return X, X["a"].to_numpy() + 0.5 * X["b"].to_numpy()


TINY = {"n_d": 4, "n_a": 4, "n_steps": 2, "max_epochs": 3, "random_state": 0}


@pytest.mark.parametrize(
    ("make", "groups"),
    [
        (lambda X, s: TabNetClassifier(**TINY).fit(X, s > 0), [[0, 1]]),
        (lambda X, s: TabNetClassifier(**TINY).fit(X, np.digitize(s, [-1, 0, 1])), [[0, 1, 2, 3]]),
        (lambda X, s: TabNetRegressor(**TINY).fit(X, s), []),
        (
            lambda X, s: TabNetClassifier(**TINY).fit(
                X, np.column_stack([s > 0, np.digitize(s, [-0.5, 0.5])])
            ),
            [[0, 1], [2, 3, 4]],
        ),
        (
            lambda X, s: TabNetClassifier(**TINY).fit(
                X, np.column_stack([s > 0, X["c"] > 0]).astype(int)
            ),
            [[0, 1, 2]],
        ),
        (
            lambda X, s: TabNetClassifier(**TINY, multilabel_loss="bce").fit(
                X, np.column_stack([s > 0, X["c"] > 0]).astype(int)
            ),
            [],
        ),
    ],
    ids=["binary", "multiclass", "regression", "multitask", "multilabel", "multilabel-bce"],
)
def test_each_target_centres_its_shift_invariant_outputs(make, groups) -> None:  # type: ignore[no-untyped-def]
    X, s = _frame()
    est = make(X, s)
    assert est.network_.output_groups == groups
    exp = est.explain(X[:50])
    np.testing.assert_allclose(exp.importances.sum(axis=1), 1.0, rtol=1e-5)


def test_model_files_rebuild_the_groups(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from tabsparse import load, save

    X, s = _frame()
    est = TabNetClassifier(**TINY).fit(X, np.digitize(s, [-1, 0, 1]))
    save(est, tmp_path / "m.tabsparse")
    back = load(tmp_path / "m.tabsparse")
    assert back.network_.output_groups == [[0, 1, 2, 3]]
    np.testing.assert_array_equal(back.explain(X[:40]).importances, est.explain(X[:40]).importances)
