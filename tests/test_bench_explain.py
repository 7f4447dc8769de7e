"""The explanation benchmark's data and measures (benchmarks/explain_metrics.py) and the parts of
benchmarks/bench_explain.py that need no model: Syn1-Syn6 have the relevant sets of their
definition and labels that depend on them; TPR, FDR, mask AUC, top-k overlap, Spearman and the
marginal replacement give the values worked out by hand."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import explain_metrics as em


# ---- Syn1-Syn6 -----------------------------------------------------------------------------
@pytest.mark.parametrize("name", em.SYN)
def test_syn_shapes_labels_and_seed(name: str) -> None:
    X, y, rel = em.make_syn(name, 300)
    assert X.shape == (300, 11) and rel.shape == (300, 11) and y.shape == (300,)
    assert set(np.unique(y)) == {0, 1}
    X2, y2, _ = em.make_syn(name, 300)
    np.testing.assert_array_equal(X, X2)
    np.testing.assert_array_equal(y, y2)
    assert not np.array_equal(X, em.make_syn(name, 300, seed=1)[0])


def test_syn_relevant_sets() -> None:
    X, _, rel = em.make_syn("Syn1", 50)
    assert (rel == np.isin(np.arange(11), [0, 1])).all()
    X, _, rel = em.make_syn("Syn3", 50)
    assert (rel == np.isin(np.arange(11), [6, 7, 8, 9])).all()
    X, _, rel = em.make_syn("Syn4", 400)
    low = X[:, 10] < 0
    assert 100 < low.sum() < 300
    assert (rel[low] == np.isin(np.arange(11), [0, 1, 10])).all()
    assert (rel[~low] == np.isin(np.arange(11), [2, 3, 4, 5, 10])).all()
    X, _, rel = em.make_syn("Syn6", 400)
    low = X[:, 10] < 0
    assert (rel[low] == np.isin(np.arange(11), [2, 3, 4, 5, 10])).all()
    assert (rel[~low] == np.isin(np.arange(11), [6, 7, 8, 9, 10])).all()


def test_syn_scores_follow_the_definitions() -> None:
    X = np.zeros((2, 11))
    X[:, 0], X[:, 1], X[:, 2:6], X[:, 6:10] = 2.0, 3.0, 1.0, 0.5
    X[0, 10], X[1, 10] = -1.0, 1.0
    s3 = -10 * np.sin(0.1) + 0.5 + 0.5 + np.exp(-0.5) - 2.4
    np.testing.assert_allclose(em.syn_score(X, "Syn1"), [6.0, 6.0])
    np.testing.assert_allclose(em.syn_score(X, "Syn2"), [0.0, 0.0])
    np.testing.assert_allclose(em.syn_score(X, "Syn3"), [s3, s3])
    np.testing.assert_allclose(em.syn_score(X, "Syn5"), [6.0, s3])  # x11 < 0 -> Syn1


@pytest.mark.parametrize(
    ("name", "bayes"), [("Syn1", 0.70), ("Syn2", 0.90), ("Syn3", 0.905), ("Syn4", 0.82)]
)
def test_labels_depend_on_the_relevant_features_only(name: str, bayes: float) -> None:
    X, y, rel = em.make_syn(name, 20_000)
    s = em.syn_score(X, name)
    truth = roc_auc_score(y, -s)  # P(y = 1) falls with s: the Bayes AUC
    assert abs(truth - bayes) < 0.015
    fit = LogisticRegression().fit(s[:10_000, None], y[:10_000])
    assert fit.coef_[0, 0] == pytest.approx(-1.0, abs=0.1)  # the label's own logistic link
    learned = roc_auc_score(y[10_000:], fit.decision_function(s[10_000:, None]))
    assert learned == pytest.approx(roc_auc_score(y[10_000:], -s[10_000:]), abs=1e-9)
    noise = ~rel.any(axis=0)  # columns never relevant
    lin = LogisticRegression().fit(X[:10_000][:, noise], y[:10_000])
    assert abs(roc_auc_score(y[10_000:], lin.decision_function(X[10_000:][:, noise])) - 0.5) < 0.02


def test_bayes_auc_is_the_tabnet_papers_ceiling() -> None:
    for name in em.SYN:
        assert em.bayes_auc(name) > em.PAPER_AUC[name]


# ---- selection measures --------------------------------------------------------------------
def test_tpr_fdr_on_hand_made_masks() -> None:
    relevant = np.array([[1, 1, 0, 0], [1, 0, 0, 0], [0, 1, 1, 0]], dtype=bool)
    importances = np.array([[0.5, 0, 0.5, 0], [0.3, 0.7, 0, 0], [0, 0, 0, 0]])
    # rows: TPR 1/2, 1, 0; FDR 1/2, 1/2, 0 (nothing selected)
    tpr, fdr = em.tpr_fdr(importances, relevant)
    assert tpr == pytest.approx(50.0)
    assert fdr == pytest.approx(100.0 / 3)
    assert em.tpr_fdr(relevant * 0.5, relevant) == (100.0, 0.0)


def test_mask_auc_counts_ties_as_half() -> None:
    relevant = np.array([[True, False], [True, False]])
    importances = np.array([[0.9, 0.1], [0.5, 0.5]])
    # relevant scores 0.9, 0.5 vs irrelevant 0.1, 0.5: pairs 1 + 1 + 1 + 1/2 of 4
    assert em.mask_auc(importances, relevant) == pytest.approx(0.875)
    assert em.mask_auc(relevant * 1.0, relevant) == 1.0


def test_selection_rate() -> None:
    importances = np.array([[0.2, 0.8], [1.0, 0.0], [0.0, 1.0], [0.5, 0.5]])
    assert em.selection_rate(importances, 1) == 75.0
    assert em.selection_rate(importances, 0) == 75.0


def test_top_k_and_pairwise_overlap_and_spearman() -> None:
    a = [5, 4, 3, 2, 1, 0]
    b = [5, 4, 3, 2, 0, 1]
    assert em.top_k(a, 2) == {0, 1}
    assert em.top_k([1, 1, 0], 1) == {0}  # ties: the earlier column
    overlap, rho = em.mean_pairwise([a, b])
    assert overlap == 4.0
    assert rho == pytest.approx(1 - 6 * 2 / (6 * 35))  # two ranks swapped
    overlap, rho = em.mean_pairwise([a, a, b])  # pairs: (a, a) 5 and 1.0, twice (a, b)
    assert overlap == pytest.approx((5 + 4 + 4) / 3)
    assert rho == pytest.approx((1 + 2 * (1 - 12 / 210)) / 3)
    assert np.isnan(em.mean_pairwise([a])[0])


# ---- faithfulness --------------------------------------------------------------------------
def test_top_k_columns_and_random_columns() -> None:
    rng = np.random.default_rng(0)
    imp = np.array([[0.1, 0.6, 0.3, 0.0], [0.0, 0.0, 0.0, 1.0]])
    got = em.top_k_columns(imp, 2, rng)
    assert got[0].tolist() == [False, True, True, False]
    assert got[1, 3] and got[1].sum() == 2  # the second: one of the three zeros
    rand = em.random_columns(500, 4, 3, rng)
    assert (rand.sum(1) == 3).all()
    assert np.allclose(rand.mean(0), 0.75, atol=0.06)


def test_replace_with_marginals_draws_from_the_same_column() -> None:
    rng = np.random.default_rng(0)
    X = np.arange(40.0).reshape(10, 4)  # column j holds 4 i + j
    cols = np.zeros((10, 4), dtype=bool)
    cols[:, 1] = True
    out = em.replace_with_marginals(X, cols, rng)
    np.testing.assert_array_equal(out[:, [0, 2, 3]], X[:, [0, 2, 3]])
    assert set(out[:, 1]) <= set(X[:, 1]) and not np.array_equal(out[:, 1], X[:, 1])
    frame = pd.DataFrame({"c": pd.Categorical(list("abcab") * 2), "x": np.arange(10.0)})
    out = em.replace_with_marginals(
        frame, np.column_stack([np.ones(10, bool), np.zeros(10, bool)]), rng
    )
    assert isinstance(out["c"].dtype, pd.CategoricalDtype)
    assert list(out["c"].cat.categories) == ["a", "b", "c"]
    np.testing.assert_array_equal(out["x"], frame["x"])


def test_faithfulness_finds_the_column_the_score_reads() -> None:
    X = np.random.default_rng(1).normal(size=(2000, 4))

    def score(Z: np.ndarray) -> float:  # share of rows whose column 0 is untouched
        return float(np.mean(Z[:, 0] == X[:, 0]))

    imp = np.tile([0.7, 0.2, 0.1, 0.0], (2000, 1))
    f = em.faithfulness(score, X, imp, seed=0)
    assert f["base"] == 1.0
    assert f["top1"] < 0.01 and f["top3"] < 0.01  # column 0 replaced in every row
    assert f["rand1"] == pytest.approx(0.75, abs=0.03)  # column 0 hit in 1 row of 4
    assert f["rand2"] == pytest.approx(0.5, abs=0.03)
    assert em.score_drop(f, "top1", "binary") == pytest.approx(100 * (1 - f["top1"]))
    assert em.score_drop({"base": 2.0, "top1": 2.5}, "top1", "regression") == pytest.approx(25.0)


# ---- the benchmark script's bookkeeping ----------------------------------------------------
def test_find_row_matches_seed_config_and_parameters() -> None:
    be = pytest.importorskip("bench_explain")
    bq = pytest.importorskip("bench_quality")
    key = {"part": "syn", "table": "Syn1", "model": "tabsparse", "seed": 0, "config": "c"}
    averaging = bq.resolved_tabsparse_params("binary", {}, 0)
    assert averaging["ema_decay"] == "0.99"  # the classifier's default since quality round 20
    today = {**averaging, "ema_decay": "None"}  # the defaults before it
    old = {k: v for k, v in today.items() if k not in bq.ADDED_PARAMS}  # before they existed
    one = {**today, "n_members": "1"}
    four = {**today, "n_members": "4"}
    written_out = {**four, "numeric_embedding": "'periodic'", "first_mask": "'shared'"}
    # rows from before the fit learned its column selector (no selected_by_fit): refitted
    eff = {"selector_mask_auc": 0.9, "selected_by_fit": True}
    rows = [
        {**key, "tabsparse_params": {**old, "gamma": "1.5"}, "auc": 0.1, **eff},
        {**key, "tabsparse_params": old, "auc": 0.2, **eff},
        {**key, "seed": 1, "tabsparse_params": old, "auc": 0.3, **eff},
        {**key, "config": "d", "tabsparse_params": four, "auc": 0.4, **eff},
        {**key, "config": "e", "tabsparse_params": written_out, "auc": 0.5, **eff},
        {**key, "config": "h", "tabsparse_params": written_out, "auc": 0.7},
        {**key, "config": "i", "tabsparse_params": written_out, "auc": 0.8, "effects_mask_auc": 1},
        {**key, "config": "j", "tabsparse_params": written_out, "auc": 0.8}
        | {"effects_mask_auc": 1, "effects_sampling": "stratified"},
        {**key, "config": "k", "tabsparse_params": written_out, "auc": 0.8}
        | {"selector_mask_auc": 0.9},
    ]
    for config in "hijk":
        got = be.find_row(rows, {**key, "config": config}, today, n_rows=100, kind="binary")
        assert got is None
    assert today["n_members"] == today["numeric_embedding"] == today["first_mask"] == "'auto'"
    multi = "multiclass"  # "auto": no embedding; the first mask shared only with members
    # a row from before the architecture parameters existed is one member, no embedding and the
    # per-row first mask: "auto" on a multi-class table too large for members
    assert be.find_row(rows, key, today, n_rows=50_000, kind=multi)["auc"] == 0.2
    assert be.find_row(rows, key, averaging, n_rows=50_000, kind=multi) is None  # no average
    assert be.find_row(rows, key, today, n_rows=50_000, kind="binary") is None  # embedded
    assert be.find_row(rows, key, one, n_rows=100, kind=multi)["auc"] == 0.2
    assert be.find_row(rows, key, today, n_rows=100, kind=multi) is None  # 4 members there
    assert be.find_row(rows, {**key, "config": "d"}, today, n_rows=100, kind=multi)["auc"] == 0.4
    # the values "auto" resolves to, written out, match "auto" (binary: periodic and shared)
    got = be.find_row(rows, {**key, "config": "e"}, today, n_rows=100, kind="binary")
    assert got["auc"] == 0.5
    assert be.find_row(rows, {**key, "config": "e"}, today, n_rows=100, kind=multi) is None
    assert be.find_row(rows, key, {**one, "gamma": "1.5"}, n_rows=100, kind=multi)["auc"] == 0.1
    assert be.find_row(rows, key, {**one, "gamma": "2.0"}, n_rows=100, kind=multi) is None
    assert be.find_row(rows, key, None)["auc"] == 0.2  # the latest row, any parameters
    assert be.find_row(rows, {**key, "config": "f"}, today, n_rows=100, kind=multi) is None
    # the column edits matter only with a shared first mask: without revival, a binary table's
    # row (periodic, shared) is another fit; a large multi-class one's (per-row) is the same
    g = {**key, "config": "g"}
    rows.append(
        {**g, "tabsparse_params": {**written_out, "column_revival": "0"}, "auc": 0.6, **eff}
    )
    assert be.find_row(rows, g, today, n_rows=100, kind="binary") is None
    unrevived = {**today, "column_revival": "0"}
    assert be.find_row(rows, g, unrevived, n_rows=100, kind="binary")["auc"] == 0.6
    assert be.find_row(rows, key, unrevived, n_rows=50_000, kind=multi)["auc"] == 0.2


def test_stability_table_cells() -> None:
    be = pytest.importorskip("bench_explain")
    a, b = [5, 4, 3, 2, 1, 0], [5, 4, 3, 2, 0, 1]
    got = {
        ("t", "tabsparse"): [
            {"train_rows": a, "held_out": a, "permutation": a, "effects_held_out": b}
            | {"selector_held_out": a},
            {"train_rows": b, "held_out": a, "permutation": a, "effects_held_out": a}
            | {"selector_held_out": b},
        ],
        ("t", "hgb"): [{"permutation": b}],
        ("t", "tabsparse-refits"): [
            {"train_rows": a, "selector_held_out": b},
            {"train_rows": a, "selector_held_out": b},
            {"train_rows": b},  # a row from before the refits' selectors
        ],
    }
    table = be.render_real(got, ["t"])
    row = table.splitlines()[-1]
    # the refit means: pairs share 5, 4, 4 of the top five; their selectors' 5 (two rows)
    assert row.startswith(
        "| t | 6 | 4.0 / 0.94 (2) | 5.0 / 1.00 (2) | 4.0 / 0.94 (2) | 4.0 / 0.94 (2) "
        "| 5.0 / 1.00 (2) | 4.3 / 0.96 (3) | 5.0 / 1.00 (2) |"
    )
    assert row.endswith("| 4.0 |")  # held-out a vs HGB's b: 4 of 5


def test_top_k_table_cells() -> None:
    be = pytest.importorskip("bench_explain")
    a, b = [5, 4, 3, 2, 1, 0], [4, 5, 3, 2, 0, 1]
    got = {
        ("t", "tabsparse"): [
            {"train_rows": a, "held_out": a, "permutation": b},
            {"train_rows": b, "held_out": a, "permutation": b},
        ],
        ("t", "tabsparse-refits"): [{"selector_held_out": a}, {"selector_held_out": b}],
    }
    row = be.render_topk(got, ["t"]).splitlines()[-1]
    # 1st swapped; no effects or selector stored (rows from before them): empty cells
    assert row == (
        "| t | 0.0 / 3.0 / 4.0 | 1.0 / 3.0 / 5.0 |  |  | 1.0 / 3.0 / 5.0 |  "
        "| 0.0 / 3.0 / 4.0 |  |  |"
    )


def test_rows_match_the_learning_rate_auto_resolves_to() -> None:
    """A row stored with the rate written out (or from before ``learning_rate="auto"``, at
    0.02) matches "auto" where a fit on that many rows resolves it to that rate."""
    bq = pytest.importorskip("bench_quality")
    today = bq.resolved_tabsparse_params("binary", {}, 0)
    assert today["learning_rate"] == "'auto'"

    def rate(n_rows: int, kind: str = "binary", **params: str) -> str:
        return bq.with_auto_resolved({**today, **params}, n_rows, kind=kind)["learning_rate"]

    assert rate(50_000) == "0.02"  # validated, batches of 1024 rows
    assert rate(5_000) == "0.01"  # validated, batches of 256
    assert rate(500) == "0.02"  # 50 held-out rows: no validation, all epochs
    assert rate(800, "binary") == "0.02" and rate(1_000, "binary") == "0.01"  # from 100 rows
    assert rate(4_000, "regression") == "0.02" and rate(5_000, "regression") == "0.01"
    assert rate(5_000, early_stopping="False") == "0.02"
    assert rate(5_000, batch_size="2048") == "0.02"
    assert rate(50_000, batch_size="512") == "0.01"
    assert rate(5_000, learning_rate="0.05") == "0.05"  # a number is kept
    for n in (500, 5_000, 50_000):  # as the estimators resolve it
        validating = n * 0.1 >= 100
        n_train = n - round(n * 0.1) if validating else n
        from tabsparse.estimators._auto import auto_learning_rate
        from tabsparse.training import auto_batch_size

        assert rate(n) == repr(auto_learning_rate(auto_batch_size(n_train, 128), validating))


def test_rows_match_the_cat_emb_dim_auto_resolves_to() -> None:
    """``cat_emb_dim="auto"`` matches a row stored with the width the estimators resolve it to
    for the task: 8 for regression (with the periodic embedding of "auto"), 1 otherwise, so the
    classification rows from before the parameter (at 1) still match."""
    bq = pytest.importorskip("bench_quality")
    for kind, width in (("regression", 8), ("binary", 1), ("multiclass", 1)):
        today = bq.resolved_tabsparse_params(kind, {}, 0)
        assert today["cat_emb_dim"] == "'auto'"
        resolved = bq.with_auto_resolved(today, 50_000, kind=kind)
        assert resolved["cat_emb_dim"] == repr(width)
    regressor = bq.resolved_tabsparse_params("regression", {}, 0)
    plain = bq.with_auto_resolved(
        {**regressor, "numeric_embedding": "None"}, 50_000, kind="regression"
    )
    assert plain["cat_emb_dim"] == "1"  # no numeric embedding: no wider categories
    narrow = bq.with_auto_resolved(
        {**regressor, "numeric_embedding_dim": "4"}, 50_000, kind="regression"
    )
    assert narrow["cat_emb_dim"] == "4"


def test_effect_rows_take_the_places_of_the_masks_figures() -> None:
    be = pytest.importorskip("bench_explain")
    faith = {"base": 0.8, "top1": 0.6, "rand1": 0.78}
    row = {
        "auc": 0.81,
        "tpr": 100.0,
        "fdr": 55.0,
        "mask_auc": 0.94,
        "switch_rate": 100.0,
        "n_selected": 9.0,
        "faithfulness": faith,
        "effects_tpr": 93.0,
        "effects_fdr": 6.5,
        "effects_mask_auc": 0.987,
        "effects_switch_rate": 97.0,
        "effects_n_selected": 4.0,
        "effects_faithfulness": {**faith, "top1": 0.5},
    }
    old = {k: v for k, v in row.items() if not k.startswith("effects_")}
    got = be.effect_rows([row, old])  # a row from before explain_effects is left out
    assert len(got) == 1
    assert (got[0]["tpr"], got[0]["fdr"], got[0]["mask_auc"]) == (93.0, 6.5, 0.987)
    assert got[0]["faithfulness"]["top1"] == 0.5 and got[0]["auc"] == 0.81
    # a real table's row carries the effects' faithfulness only
    real = {"score": 0.9, "faithfulness": faith, "effects_faithfulness": {**faith, "top1": 0.4}}
    (mapped,) = be.effect_rows([real, {"score": 0.9, "faithfulness": faith}])
    assert mapped["faithfulness"]["top1"] == 0.4 and mapped["score"] == 0.9
    table = be.render_syn({("Syn4", be.EFFECTS): got}, [be.EFFECTS])
    line = next(ln for ln in table.splitlines() if ln.startswith("| Syn4 |"))
    assert "| 93 / 6 | 0.987 | 97 | 4.0 |" in line
    # the selector's figures of the same fit, by their prefix
    sel = {f"selector_{k[len('effects_') :]}": v for k, v in row.items() if k.startswith("eff")}
    (mapped,) = be.effect_rows([{**old, **sel, "selector_tpr": 99.0}], "selector_")
    assert (mapped["tpr"], mapped["fdr"], mapped["n_selected"]) == (99.0, 6.5, 4.0)
    assert be.effect_rows([{**old, **sel}]) == []  # no effects_ figures in it


def test_selection_figures_by_hand() -> None:
    """Two rows of 11 columns: row 0 selects its two relevant columns and one irrelevant one,
    row 1 one of its two relevant columns and the switch (relevant there)."""
    from bench_explain import _Selection

    p = np.full((2, 11), 0.1)
    p[0, [0, 1, 5]] = 0.9
    p[1, [2, 10]] = 0.8
    relevant = np.zeros((2, 11), dtype=bool)
    relevant[0, [0, 1]] = True
    relevant[1, [2, 3, 10]] = True
    sel = _Selection(p)
    sel.residual = np.array([0.1, 0.3])
    got = em.selection_figures(sel, relevant)
    assert got["tpr"] == pytest.approx(100 * (1 + 2 / 3) / 2)
    assert got["fdr"] == pytest.approx(100 * (1 / 3 + 0) / 2)
    assert got["switch_rate"] == 50.0 and got["n_selected"] == 2.5
    assert got["residual"] == pytest.approx(0.2)
    assert got["mask_auc"] == pytest.approx(roc_auc_score(relevant.ravel(), p.ravel()))


def test_syn_refit_rows_are_matched_averaged_and_rendered() -> None:
    """A Syn ``tabsparse-refits`` row (a group of refits explained by their selectors) is
    reused only with fit_selector's default number of selectors and the group's first seed's
    parameters; the refits' mean classifier averages their probabilities; the table shows the
    group's figures and the spread line their mean."""
    be = pytest.importorskip("bench_explain")
    bq = pytest.importorskip("bench_quality")
    key = {"part": "syn", "table": "Syn4", "model": "tabsparse-refits", "seed": 1, "config": "c"}
    want = bq.resolved_tabsparse_params("binary", {}, 3)  # group 1: seeds 3, 4, 5
    stored = {**key, "tabsparse_params": want, "selected_by_fit": True, "mask_auc": 0.99}
    assert be.find_row([stored], key, want, n_rows=100, kind="binary") is stored
    stale = {k: v for k, v in stored.items() if k != "selected_by_fit"}
    assert be.find_row([stale], key, want, n_rows=100, kind="binary") is None
    # a real table's refits row from before the refits' selectors is measured again
    real = {**key, "part": "real", "config": "r"}
    old = {**real, "tabsparse_params": want, "train_rows": [0.5, 0.5]}
    assert be.find_row([old], real, want, n_rows=100, kind="binary") is None
    new = {**old, "selector_held_out": [0.4, 0.6], "selected_by_fit": True}
    assert be.find_row([old, new], real, want, n_rows=100, kind="binary") is new
    other = bq.resolved_tabsparse_params("binary", {}, 1)  # the seed of one fit, not the group
    assert be.find_row([stored], key, other, n_rows=100, kind="binary") is None

    class Fixed:
        classes_ = np.array(["a", "b"])

        def __init__(self, p: float) -> None:
            self.p = p

        def predict_proba(self, X: np.ndarray) -> np.ndarray:
            return np.tile([1 - self.p, self.p], (len(X), 1))

    mean = be._MeanOfFits([Fixed(0.2), Fixed(0.6)])
    np.testing.assert_allclose(mean.predict_proba(np.zeros((3, 2))), [[0.6, 0.4]] * 3)
    assert list(mean.classes_) == ["a", "b"]

    figures = {"tpr": 96.0, "fdr": 1.4, "mask_auc": 0.999, "switch_rate": 100.0}
    rows = [
        {"auc": 0.81, "n_selected": 4.0, "spread": 0.02, **figures},
        {"auc": 0.80, "n_selected": 4.2, "spread": 0.06, **figures, "tpr": 98.0},
    ]
    got = {("Syn4", be.REFIT_SELECTOR): rows}
    line = next(
        ln
        for ln in be.render_syn(got, [be.REFIT_SELECTOR]).splitlines()
        if ln.startswith("| Syn4 |")
    )
    assert "| 0.805 (0.800-0.810, 2) | 97 / 1 | 0.999 | 100 | 4.1 |" in line
    assert be.spread(got).endswith("Syn4 0.040.")
