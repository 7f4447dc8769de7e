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
    Z_NEGLIGIBLE,
    global_importances,
    negligible,
)


def _rows(n: int = 40, p: int = 5, seed: int = 0) -> np.ndarray:
    """Per-row importances with exact zeros (as sparsemax gives), each row summing to one."""
    rng = np.random.default_rng(seed)
    x = rng.random((n, p)) * (rng.random((n, p)) < 0.6)
    x[:, 0] += 0.1  # no row is all zeros
    return x / x.sum(axis=1, keepdims=True)


# ---- the standard error of one model -------------------------------------------------------------


def _bootstrap_std(x: np.ndarray, n_resamples: int, seed: int) -> np.ndarray:
    """The reference: the standard deviation of the normalised mean over resamples of the rows."""
    idx = np.random.default_rng(seed).integers(0, len(x), size=(n_resamples, len(x)))
    boot = np.stack([x[i].mean(axis=0) for i in idx])
    boot /= boot.sum(axis=1, keepdims=True)
    return boot.std(axis=0, ddof=1)


def test_global_importances_of_one_model_is_the_standard_error_of_a_mean() -> None:
    x = _rows()
    mean, std = global_importances(x)
    np.testing.assert_allclose(mean, x.mean(axis=0), rtol=1e-12)  # rows sum to one
    np.testing.assert_allclose(std, x.std(axis=0, ddof=1) / np.sqrt(len(x)), rtol=1e-12)


def test_one_model_agrees_with_a_large_bootstrap() -> None:
    """4,000 resamples: the bootstrap's own noise is about 1/sqrt(2 * 4000) = 1.1% relative; the
    bootstrap's ddof=0 spread of the rows is sqrt(39/40) = 0.987 of the closed form's."""
    x = _rows()
    _, std = global_importances(x)
    np.testing.assert_allclose(std, _bootstrap_std(x, 4000, seed=11), rtol=0.06)


def test_rows_not_summing_to_one_take_the_delta_method() -> None:
    """Rows with sums between 0.5 and 3: the standard error of ``m_j / sum(m)`` by an explicit
    gradient and covariance matrix, and a large bootstrap of the ratio, agree with it."""
    rng = np.random.default_rng(2)
    x = _rows(n=60) * rng.uniform(0.5, 3.0, size=(60, 1))
    mean, std = global_importances(x)
    m = x.mean(axis=0)
    r = m / m.sum()
    np.testing.assert_allclose(mean, r, rtol=1e-12)
    grad = (np.eye(len(m)) - r[:, None]) / m.sum()  # row j: d r_j / d m
    cov = np.cov(x, rowvar=False) / len(x)
    np.testing.assert_allclose(std, np.sqrt(np.diag(grad @ cov @ grad.T)), rtol=1e-10)
    np.testing.assert_allclose(std, _bootstrap_std(x, 4000, seed=3), rtol=0.08)
    # not the plain standard error of a mean: the row sums add spread of their own
    assert not np.allclose(std, x.std(axis=0, ddof=1) / np.sqrt(len(x)) / m.sum(), rtol=0.05)


def test_rows_never_selected_have_no_spread_and_all_zero_rows_give_zeros() -> None:
    x = _rows()
    x[:, 3] = 0.0
    x /= x.sum(axis=1, keepdims=True)
    mean, std = global_importances(x)
    assert mean[3] == 0.0 and std[3] == 0.0 and np.all(std[[0, 1, 2, 4]] > 0)
    mean, std = global_importances(np.zeros((5, 3)))
    np.testing.assert_array_equal(mean, np.zeros(3))
    np.testing.assert_array_equal(std, np.zeros(3))


def test_members_give_the_spread_over_members() -> None:
    members = np.stack([_rows(seed=s) for s in range(4)])  # (4, 40, 5)
    mean, std = global_importances(members)
    per_member = members.mean(axis=1)
    per_member /= per_member.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(mean, per_member.mean(axis=0), rtol=1e-12)
    np.testing.assert_allclose(std, np.std(per_member, axis=0, ddof=1) / 2.0, rtol=1e-12)


def test_one_member_falls_back_to_the_standard_error_over_its_rows() -> None:
    x = _rows()
    got, want = global_importances(x[None]), global_importances(x)
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
    mean, std = exp.global_importances()
    np.testing.assert_allclose(mean, [0.65, 0.175, 0.175, 0.0])
    np.testing.assert_array_equal(std, global_importances(x)[1])
    flat = exp.negligible()
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
