"""Syn1-Syn6 and the measures of explanations that ``bench_explain.py`` reports (and
``tests/test_bench_explain.py`` checks): small numpy functions, no models.

A variant with pure-noise columns (:func:`make_syn_noise`) appends standard-normal columns that
no label depends on; the first 11 columns and the labels are those of :func:`make_syn`.

Syn1-Syn6 (Yoon, Jordon & van der Schaar, INVASE, ICLR 2019; Table 1 of the TabNet paper): 11
features ``X ~ N(0, I)``, a label ``y ~ Bernoulli(1 / (1 + exp(s)))`` whose score ``s`` depends on
a known subset (features numbered 1..11 as in the papers, 0-based in code):

- Syn1 ``s = x1 x2`` (relevant {1, 2});
- Syn2 ``s = x3^2 + x4^2 + x5^2 + x6^2 - 4`` (relevant {3, 4, 5, 6});
- Syn3 ``s = -10 sin(0.2 x7) + |x8| + x9 + exp(-x10) - 2.4`` (relevant {7, 8, 9, 10});
- Syn4 / Syn5 / Syn6: ``x11 < 0`` -> Syn1 / Syn1 / Syn2, else Syn2 / Syn3 / Syn3; a row's
  relevant set is its branch's features plus the switch ``x11``.

Syn3's constants are those of INVASE's published generator. The INVASE paper's text writes
``-10 sin(2 x7) + 2|x8| + x9 + exp(-x10)``: its Bayes AUC is 0.99, which the TabNet paper's
reported AUC on Syn3 (.897) does not fit, while the generator's (Bayes AUC 0.906) does.
``PAPER_AUC`` holds the TabNet paper's test AUCs (its Table 1).
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import combinations

import numpy as np

# ---- Syn1-Syn6 -----------------------------------------------------------------------------
SYN = ("Syn1", "Syn2", "Syn3", "Syn4", "Syn5", "Syn6")
N_SYN_FEATURES = 11
SWITCH = 10  # x11, 0-based
BRANCHES = {
    "Syn4": ("Syn1", "Syn2"),
    "Syn5": ("Syn1", "Syn3"),
    "Syn6": ("Syn2", "Syn3"),
}
BASE_RELEVANT = {"Syn1": (0, 1), "Syn2": (2, 3, 4, 5), "Syn3": (6, 7, 8, 9)}
PAPER_AUC = {
    "Syn1": 0.682,
    "Syn2": 0.892,
    "Syn3": 0.897,
    "Syn4": 0.776,
    "Syn5": 0.789,
    "Syn6": 0.878,
}
SYN_TRAIN = SYN_TEST = 10_000


def _base_score(X: np.ndarray, name: str) -> np.ndarray:
    if name == "Syn1":
        return X[:, 0] * X[:, 1]
    if name == "Syn2":
        return (X[:, 2:6] ** 2).sum(axis=1) - 4.0
    if name == "Syn3":
        return -10.0 * np.sin(0.2 * X[:, 6]) + np.abs(X[:, 7]) + X[:, 8] + np.exp(-X[:, 9]) - 2.4
    raise ValueError(f"{name=} is not Syn1, Syn2 or Syn3")


def syn_score(X: np.ndarray, name: str) -> np.ndarray:
    """The score ``s`` of each row: ``P(y = 1) = 1 / (1 + exp(s))``."""
    if name in BRANCHES:
        low, high = BRANCHES[name]
        return np.where(X[:, SWITCH] < 0, _base_score(X, low), _base_score(X, high))
    return _base_score(X, name)


def syn_relevant(X: np.ndarray, name: str) -> np.ndarray:
    """Boolean ``(n, 11)``: the features each row's label depends on."""
    rel = np.zeros((len(X), N_SYN_FEATURES), dtype=bool)
    if name in BRANCHES:
        low, high = BRANCHES[name]
        first = X[:, SWITCH] < 0
        rel[np.ix_(first, BASE_RELEVANT[low])] = True
        rel[np.ix_(~first, BASE_RELEVANT[high])] = True
        rel[:, SWITCH] = True
    else:
        rel[:, BASE_RELEVANT[name]] = True
    return rel


def make_syn(name: str, n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``X`` (n, 11) standard normal, ``y`` in {0, 1} and the relevance mask of each row."""
    from scipy.special import expit

    rng = np.random.default_rng([seed, SYN.index(name)])
    X = rng.standard_normal((n, N_SYN_FEATURES))
    y = (rng.random(n) < expit(-syn_score(X, name))).astype(np.int64)
    return X, y, syn_relevant(X, name)


def make_syn_noise(
    name: str, n: int, n_noise: int, seed: int = 0
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`make_syn` with ``n_noise`` standard-normal columns appended (x12, x13, ...),
    irrelevant in every row; the noise has its own stream, so the first 11 columns and ``y``
    equal :func:`make_syn`'s."""
    X, y, rel = make_syn(name, n, seed)
    noise = np.random.default_rng([seed, SYN.index(name), 1]).standard_normal((n, n_noise))
    return (
        np.hstack([X, noise]),
        y,
        np.hstack([rel, np.zeros((n, n_noise), dtype=bool)]),
    )


# ---- metrics -------------------------------------------------------------------------------
def tpr_fdr(importances: np.ndarray, relevant: np.ndarray) -> tuple[float, float]:
    """Mean per-row TPR and FDR in % of the selected sets (importance > 0; a boolean selection
    works as is); a row that selects nothing has FDR 0."""
    sel = importances > 0
    tpr = (sel & relevant).sum(1) / np.maximum(relevant.sum(1), 1)
    fdr = (sel & ~relevant).sum(1) / np.maximum(sel.sum(1), 1)
    return 100.0 * float(tpr.mean()), 100.0 * float(fdr.mean())


def mask_auc(importances: np.ndarray, relevant: np.ndarray) -> float:
    """ROC AUC of every (row, feature) importance as a score for relevant vs irrelevant."""
    from sklearn.metrics import roc_auc_score

    return float(roc_auc_score(relevant.ravel(), importances.ravel()))


def selection_rate(importances: np.ndarray, column: int) -> float:
    """% of rows whose selected set contains ``column``."""
    return 100.0 * float((importances[:, column] > 0).mean())


def top_k(values: Sequence[float], k: int = 5) -> set[int]:
    """Indices of the ``k`` largest values (ties: the earlier index)."""
    return {int(i) for i in np.argsort(-np.asarray(values, float), kind="stable")[:k]}


def mean_pairwise(vectors: Sequence[Sequence[float]], k: int = 5) -> tuple[float, float]:
    """Over all pairs of importance vectors: the mean top-``k`` overlap (0..k) and the mean
    Spearman correlation (NaN pairs, e.g. a constant vector, left out)."""
    from scipy.stats import spearmanr

    pairs = list(combinations(vectors, 2))
    if not pairs:
        return float("nan"), float("nan")
    overlap = [len(top_k(a, k) & top_k(b, k)) for a, b in pairs]
    rho = [float(spearmanr(a, b)[0]) for a, b in pairs]
    rho = [r for r in rho if not np.isnan(r)]
    return float(np.mean(overlap)), float(np.mean(rho)) if rho else float("nan")


def min_pairwise_overlap(vectors: Sequence[Sequence[float]], k: int = 5) -> int | None:
    """The smallest top-``k`` overlap (0..k) over all pairs of importance vectors (None for
    fewer than two vectors)."""
    pairs = list(combinations(vectors, 2))
    if not pairs:
        return None
    return min(len(top_k(a, k) & top_k(b, k)) for a, b in pairs)


def bayes_auc(name: str, n: int = SYN_TEST) -> float:
    """The test AUC of the true probabilities (the best any model can expect)."""
    from sklearn.metrics import roc_auc_score

    X, y, _ = make_syn(name, SYN_TRAIN + n)
    return float(roc_auc_score(y[SYN_TRAIN:], -syn_score(X[SYN_TRAIN:], name)))
