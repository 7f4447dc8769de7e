"""The spread of global importances and the rule for an importance indistinguishable from zero
(tabsparse.importance), and the Explanation methods built on them; checked against direct numpy
computations and arrays with known answers."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from tabsparse.explain import Explanation
from tabsparse.importance import (
    MIN_SELECTION_RATE,
    N_RESAMPLES,
    Z_NEGLIGIBLE,
    bootstrap_means,
    global_importances,
    negligible,
)


def _rows(n: int = 40, p: int = 5, seed: int = 0) -> np.ndarray:
    """Per-row importances with exact zeros (as sparsemax gives), each row summing to one."""
    rng = np.random.default_rng(seed)
    x = rng.random((n, p)) * (rng.random((n, p)) < 0.6)
    x[:, 0] += 0.1  # no row is all zeros
    return x / x.sum(axis=1, keepdims=True)


# ---- the bootstrap -------------------------------------------------------------------------------


def test_bootstrap_means_are_the_resamples_drawn_as_documented() -> None:
    x = _rows()
    got = bootstrap_means(x, n_resamples=50, seed=7)
    idx = np.random.default_rng(7).integers(0, len(x), size=(50, len(x)))
    direct = np.stack([x[i].mean(axis=0) for i in idx])
    direct /= direct.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(got, direct, rtol=1e-12, atol=1e-15)


def test_bootstrap_in_chunks_draws_the_same_resamples(monkeypatch: pytest.MonkeyPatch) -> None:
    import tabsparse.importance as importance

    x = _rows(n=30)
    whole = bootstrap_means(x, n_resamples=20, seed=3)
    monkeypatch.setattr(importance, "_CHUNK_CELLS", 7 * 30)  # 7 resamples at a time
    np.testing.assert_allclose(bootstrap_means(x, n_resamples=20, seed=3), whole, rtol=1e-12)


def test_global_importances_of_one_model() -> None:
    x = _rows()
    mean, std = global_importances(x, n_resamples=N_RESAMPLES, seed=11)
    np.testing.assert_allclose(mean, x.mean(axis=0) / x.mean(axis=0).sum(), rtol=1e-12)
    idx = np.random.default_rng(11).integers(0, len(x), size=(N_RESAMPLES, len(x)))
    boot = np.stack([x[i].mean(axis=0) for i in idx])
    boot /= boot.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(std, boot.std(axis=0, ddof=1), rtol=1e-10)
    # a standard error of a mean: about the per-row spread over sqrt(n)
    np.testing.assert_allclose(std, x.std(axis=0, ddof=1) / np.sqrt(len(x)), rtol=0.3)


def test_the_same_seed_gives_the_same_spread_and_rows_never_selected_have_none() -> None:
    x = _rows()
    x[:, 3] = 0.0
    x /= x.sum(axis=1, keepdims=True)
    a = global_importances(x, seed=1)
    np.testing.assert_array_equal(a[1], global_importances(x, seed=1)[1])
    assert not np.array_equal(a[1], global_importances(x, seed=2)[1])
    assert a[0][3] == 0.0 and a[1][3] == 0.0


def test_members_give_the_spread_over_members() -> None:
    members = np.stack([_rows(seed=s) for s in range(4)])  # (4, 40, 5)
    mean, std = global_importances(members)
    per_member = members.mean(axis=1)
    per_member /= per_member.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(mean, per_member.mean(axis=0), rtol=1e-12)
    np.testing.assert_allclose(std, np.std(per_member, axis=0, ddof=1) / 2.0, rtol=1e-12)


def test_one_member_falls_back_to_the_bootstrap_over_its_rows() -> None:
    x = _rows()
    got, want = global_importances(x[None], seed=5), global_importances(x, seed=5)
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])


def test_one_row_has_no_spread_and_bad_shapes_are_refused() -> None:
    mean, std = global_importances(np.array([[0.25, 0.75]]))
    np.testing.assert_array_equal(mean, [0.25, 0.75])
    np.testing.assert_array_equal(std, [0.0, 0.0])
    with pytest.raises(ValueError, match=r"must be 2-d \(n_rows, n_features\), got \(3,\)"):
        global_importances(np.ones(3))
    with pytest.raises(ValueError, match="importances has no rows"):
        global_importances(np.ones((0, 3)))
    with pytest.raises(ValueError, match="n_resamples=1 must be >= 2"):
        bootstrap_means(np.ones((4, 2)), n_resamples=1)


# ---- the rule ----------------------------------------------------------------------------------


def test_rule_on_known_answers() -> None:
    mean = np.array([0.50, 0.30, 0.10, 0.06, 0.04, 0.0])
    std = np.array([0.01, 0.20, 0.05, 0.02, 0.01, 0.0])
    # 0.30 <= 2 * 0.20; 0.10 == 2 * 0.05 (the bound counts as zero); exact zero always
    np.testing.assert_array_equal(negligible(mean, std), [False, True, True, False, False, True])
    np.testing.assert_array_equal(
        negligible(mean, std, z=1.0), [False, False, False, False, False, True]
    )
    rate = np.array([0.9, 0.9, 0.9, 0.9, 0.005, 0.0])
    np.testing.assert_array_equal(
        negligible(mean, std, rate), [False, True, True, False, True, True]
    )
    np.testing.assert_array_equal(negligible(mean, std, rate, min_rate=0.0), negligible(mean, std))
    assert Z_NEGLIGIBLE == 2.0 and MIN_SELECTION_RATE == 0.01


def test_rule_over_members_flags_the_noise_and_keeps_the_informative_features() -> None:
    """Three members that agree on two informative features and put small weight on three
    noise features, each on other noise: the spread over members flags every noise feature."""
    members = np.array(
        [
            [0.50, 0.38, 0.12, 0.00, 0.00],
            [0.46, 0.44, 0.00, 0.10, 0.00],
            [0.52, 0.40, 0.00, 0.00, 0.08],
        ]
    )[:, None, :].repeat(10, axis=1)  # (3 members, 10 identical rows, 5 features)
    mean, std = global_importances(members)
    np.testing.assert_array_equal(negligible(mean, std), [False, False, True, True, True])


def test_rule_refuses_mismatched_shapes() -> None:
    with pytest.raises(ValueError, match=r"mean \(3,\) and std \(2,\) must be the same 1-d"):
        negligible(np.ones(3), np.ones(2))
    with pytest.raises(ValueError, match=r"selection_rate \(2,\) must have the shape \(3,\)"):
        negligible(np.ones(3), np.ones(3), np.ones(2))


# ---- Explanation -------------------------------------------------------------------------------


def _explanation(importances: np.ndarray) -> Explanation:
    p = importances.shape[1]
    return Explanation(importances, importances[None], [f"f{j}" for j in range(p)])


def test_explanation_selection_and_global_importances() -> None:
    x = np.array(
        [
            [0.7, 0.3, 0.0, 0.0],
            [0.5, 0.0, 0.5, 0.0],
            [1.0, 0.0, 0.0, 0.0],
            [0.4, 0.4, 0.2, 0.0],
        ]
    )
    exp = _explanation(x)
    np.testing.assert_array_equal(exp.selected, x > 0)
    np.testing.assert_array_equal(exp.selection_rate(), [1.0, 0.5, 0.5, 0.0])
    mean, std = exp.global_importances(n_resamples=30, seed=4)
    np.testing.assert_allclose(mean, [0.65, 0.175, 0.175, 0.0])
    np.testing.assert_array_equal(std, global_importances(x, n_resamples=30, seed=4)[1])
    flat = exp.negligible(n_resamples=30, seed=4)
    want = negligible(mean, std, exp.selection_rate())
    np.testing.assert_array_equal(flat, want)
    assert flat[3] and not flat[0]


def test_explanation_negligible_uses_the_selection_rate() -> None:
    """A feature selected in 9 of 1,000 rows (0.9% < 1%) with all the weight there is negligible
    by the rate, though its mean (0.009) stands about 3 standard errors clear of zero."""
    x = np.tile([0.5, 0.5, 0.0], (1000, 1))
    x[:9] = [0.0, 0.0, 1.0]
    exp = _explanation(x)
    assert exp.selection_rate()[2] == pytest.approx(0.009)
    mean, std = exp.global_importances()
    assert mean[2] > 2.5 * std[2]
    np.testing.assert_array_equal(exp.negligible(), [False, False, True])
    np.testing.assert_array_equal(exp.negligible(min_rate=0.0), [False, False, False])


def test_importance_module_is_core() -> None:
    code = "import sys, tabsparse.importance, tabsparse.explain; print('sklearn' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
