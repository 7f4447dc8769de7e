"""Shapley attributions of ``est.explain(X, attributions=True)``: do they add up, are the
sampled ones and their standard errors right, how do they compare with shap's
``PermutationExplainer``, do they find a linear model's truth, and what do they cost.

Every model is ``TabNetClassifier`` / ``TabNetRegressor(random_state=0, device="cpu")`` with the
library's defaults, fitted on at most 10,000 training rows; every ``explain`` call passes
``random_state=0``. Five parts (``--parts``), each a table of the README section:

1. ``additivity``: four real tables of ``../shared/datasets`` (``$TABSPARSE_DATASETS``; loaded,
   split and capped as ``bench_quality.py`` does): adult (binary), letter (26 classes),
   california_housing and diamonds (log price; regression). For 200 test rows and
   ``n_permutations="auto"`` (exact up to 5 columns, else 64 orders): the largest error of
   ``base_values + attributions.sum(axis=1)`` against the raw output computed apart from
   ``explain`` (binary: ``log(p1 / p0)`` of ``predict_proba``; multi-class: ``log p`` minus its
   mean over the classes; regression: ``predict``), absolute and relative (``|error| /
   max(|output|, sd of the outputs)``). Goal: relative <= 1e-4.
2. ``sampled``: california_housing's model (8 columns), 200 test rows, the default background
   (``background_``): ``n_permutations="exact"`` against 16, 64 and 256 orders: the largest and
   mean ``|sampled - exact|``, the mean reported standard error and the share of values within 3
   of their standard errors of the exact value (goal: about 99%).
3. ``shap``: the same model and 50 of those rows, one background for both, 64 raw training rows
   (seed 0): ``est.explain(X, attributions=True, background=bg)`` against
   ``shap.PermutationExplainer(f, shap.maskers.Independent(bg, max_samples=64), seed=0)`` with
   ``f`` = ``est.predict`` of a DataFrame of the raw rows. Reference: tabsparse's exact values.
   tabsparse runs 2 .. 256 orders; shap runs ``max_evals = k (2p + 1)``, i.e. ``k``
   forward-and-backward orders (``2k`` orders, each coalition averaged over all 64 background
   rows, where tabsparse takes one background row per pair of orders). For each budget: the
   largest and mean absolute difference from the reference and the CPU seconds; then the
   seconds each needs to reach the mean error tabsparse has at 64 orders (log-log interpolation
   between budgets; beyond the largest, error ~ time**-0.5) and their ratio. Goal: tabsparse
   faster.
4. ``linear``: ``y = X @ w + 0.01 noise``, ``X`` 8 independent standard-normal columns, 10,000
   training rows, ``TabNetRegressor`` defaults. For 200 test rows and a background of 64
   training rows: exact and 64-order attributions against ``w_i (x_i - mean_bg x_i)``, overall
   ``||a - a_true|| / ||a_true||`` and per column ``rms(a_i - a_true_i) / rms(a_true)`` (a share
   of the whole attribution scale); also against the model's own least-squares slopes, the
   model's test R2 and the R2 of a linear fit to its predictions (how linear it is). Goal: 2%.
5. ``cost``: a 50-column table (Syn4 of ``explain_metrics.make_syn`` and 39 standard-normal noise
   columns), ``TabNetClassifier`` defaults on 10,000 rows; CPU seconds of the attributions of
   1,000 rows with ``"auto"`` (64 orders), 32 and 16 orders, and their mean standard error.
   Goal: <= 30 s at ``"auto"``.

One thread (``OMP_NUM_THREADS=1``, ``torch.set_num_threads(1)``); times are process CPU seconds
(``time.process_time()``), which other jobs on a shared machine disturb less than wall time.
Results go to ``results/attributions.json`` (a run of some ``--parts`` keeps the others), the
tables to the ``## Attributions`` section of ``benchmarks/README.md``::

    python benchmarks/bench_attributions.py                  # everything (~16 CPU minutes)
    python benchmarks/bench_attributions.py --parts shap     # one part
    python benchmarks/bench_attributions.py --quick          # smoke run, stores nothing
    python benchmarks/bench_attributions.py --render         # the README from the JSON only
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import argparse
import datetime as _dt
import json
import math
import platform
import subprocess
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
from _readme import cpu_model, load_average, write_section
from bench_quality import DATASETS, TASK_BY_NAME, load_split
from explain_metrics import make_syn

import tabsparse
from tabsparse import TabNetClassifier, TabNetRegressor

HERE = Path(__file__).resolve().parent
README = HERE / "README.md"
RESULTS = HERE / "results" / "attributions.json"
SECTION = "## Attributions"
PARTS = ("additivity", "sampled", "shap", "linear", "cost")
TABLES = ("adult", "letter", "california_housing", "diamonds")
SMALL_TABLE = "california_housing"  # 8 numeric columns: exact values cost 2**8 * 64 per row
TS_ORDERS = (2, 4, 8, 16, 32, 64, 128, 256)
SHAP_PERMUTATIONS = (1, 2, 4, 8, 16, 32)  # shap's forward-and-backward orders per row
SAMPLED_ORDERS = (16, 64, 256)
COST_ORDERS = ("auto", 32, 16)
LIBS = ("tabsparse", "shap")
LINEAR_W = (3.0, -2.0, 1.5, -1.0, 0.75, -0.5, 0.25, 0.1)
GOALS = {"additivity": 1e-4, "within3": 0.99, "linear": 0.02, "cost_s": 30.0}

SIZES = {  # full run / --quick
    False: {"train": 10_000, "rows": 200, "shap_rows": 50, "cost_rows": 1_000, "epochs": None},
    True: {"train": 800, "rows": 12, "shap_rows": 3, "cost_rows": 20, "epochs": 2},
}


def git_commit() -> str:
    """The checkout's commit, ``+dirty`` where ``tabsparse/`` has uncommitted changes."""

    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=HERE, capture_output=True, text=True).stdout

    head = git("rev-parse", "--short", "HEAD").strip() or "?"
    return head + ("+dirty" if git("status", "--porcelain", "--", "../tabsparse") else "")


def cpu_time(fn: Callable[[], Any]) -> tuple[float, Any]:
    """Process CPU seconds of one call of ``fn``, and its result."""
    t0 = time.process_time()
    out = fn()
    return time.process_time() - t0, out


def fit(kind: str, X: pd.DataFrame, y: Any, epochs: int | None) -> tuple[Any, dict]:
    """The default estimator of ``kind`` fitted on ``X, y``, with its CPU seconds and epochs."""
    extra = {} if epochs is None else {"max_epochs": epochs}
    cls = TabNetRegressor if kind == "regression" else TabNetClassifier
    seconds, est = cpu_time(lambda: cls(random_state=0, device="cpu", **extra).fit(X, y))
    return est, {"fit_cpu_s": round(seconds, 1), "epochs": int(est.n_iter_)}


def raw_output(est: Any, kind: str, X: pd.DataFrame) -> np.ndarray:
    """The output the attributions explain, computed from the public predictions."""
    if kind == "regression":
        return np.asarray(est.predict(X), dtype=np.float64)
    with np.errstate(divide="ignore"):
        logp = np.log(np.asarray(est.predict_proba(X), dtype=np.float64))
    if kind == "binary":
        return logp[:, 1] - logp[:, 0]
    return logp - logp.mean(axis=1, keepdims=True)


def explain(est: Any, X: Any, n: int | str, bg: Any = None) -> tuple[float, Any]:
    """CPU seconds and result of ``est.explain(X, attributions=True, ...)``."""
    kw = {"attributions": True, "background": bg, "n_permutations": n, "random_state": 0}
    return cpu_time(lambda: est.explain(X, **kw))


class Models:
    """The real tables' splits and fitted models, fitted once per run."""

    def __init__(self, size: dict) -> None:
        self.size, self.fits = size, {}

    def get(self, name: str) -> tuple[Any, Any, dict]:
        if name not in self.fits:
            task = TASK_BY_NAME[name]
            s = load_split(name, self.size["train"], 2_000)
            est, info = fit(task.kind, s.X_train, s.y_train, self.size["epochs"])
            info |= {"table": name, "kind": task.kind, "train_rows": len(s.X_train)}
            info["columns"] = s.X_train.shape[1]
            print(json.dumps(info), flush=True)
            self.fits[name] = (est, s, info)
        return self.fits[name]


# ---- the parts ---------------------------------------------------------------------------
def part_additivity(models: Models) -> dict:
    rows = []
    for name in TABLES:
        est, s, info = models.get(name)
        X = s.X_test.iloc[: models.size["rows"]]
        seconds, e = explain(est, X, "auto")
        raw = raw_output(est, info["kind"], X)
        recon = e.base_values + e.attributions.sum(axis=1)
        err = np.abs(recon - raw)
        finite = np.isfinite(raw)
        scale = np.maximum(np.abs(raw), raw[finite].std())
        p = info["columns"]
        rows.append(
            info
            | {
                "rows": len(X),
                "outputs": 1 if raw.ndim == 1 else raw.shape[1],
                "method": "exact" if 2**p * 64 <= 2048 else "64 orders",
                "max_abs_error": float(err[finite].max()),
                "max_rel_error": float((err[finite] / scale[finite]).max()),
                "non_finite_outputs": int((~finite).sum()),
                "output_sd": float(raw[finite].std()),
                "explain_cpu_s": round(seconds, 2),
            }
        )
        print(json.dumps(rows[-1]), flush=True)
    return {"rows": rows}


def part_sampled(models: Models) -> dict:
    from scipy.stats import t as student_t

    est, s, info = models.get(SMALL_TABLE)
    X = s.X_test.iloc[: models.size["rows"]]
    exact_s, exact = explain(est, X, "exact")
    ref = exact.attributions
    out = {"table": SMALL_TABLE, "columns": info["columns"], "rows": len(X)}
    out |= {"exact_cpu_s": round(exact_s, 2), "mean_abs_exact": float(np.abs(ref).mean())}
    out["results"] = []
    for n in SAMPLED_ORDERS:
        seconds, e = explain(est, X, n)
        diff = np.abs(e.attributions - ref)
        tol = 1e-9 * np.abs(ref).max()
        out["results"].append(
            {
                "n_permutations": n,
                "cpu_s": round(seconds, 3),
                "max_abs_diff": float(diff.max()),
                "mean_abs_diff": float(diff.mean()),
                "mean_std": float(e.attributions_std.mean()),
                "within_3_std": float((diff <= 3 * e.attributions_std + tol).mean()),
                "within_2_std": float((diff <= 2 * e.attributions_std + tol).mean()),
                "within_3_std_if_normal": float(1 - 2 * student_t.sf(3, n // 2 - 1)),
            }
        )
        print(json.dumps(out["results"][-1]), flush=True)
    return out


def time_to(points: list[tuple[float, float]], target: float) -> tuple[float, str]:
    """CPU seconds at which a (seconds, error) curve, by growing budget, reaches ``target``."""
    for i, (sec, err) in enumerate(points):
        if err <= target:
            if i == 0:
                return sec, "at most"
            (s0, e0), (s1, e1) = points[i - 1], (sec, err)
            if e1 <= 0 or e0 <= e1:
                return s1, "measured"
            slope = (math.log(s1) - math.log(s0)) / (math.log(e1) - math.log(e0))
            return math.exp(math.log(s0) + slope * (math.log(target) - math.log(e0))), "interp."
    sec, err = points[-1]
    return sec * (err / target) ** 2, "extrap."


def part_shap(models: Models, quick: bool) -> dict:
    import shap

    est, s, _ = models.get(SMALL_TABLE)
    X = s.X_test.iloc[: models.size["shap_rows"]]
    pick = np.sort(np.random.default_rng(0).choice(len(s.X_train), 64, replace=False))
    bg = s.X_train.iloc[pick].reset_index(drop=True)
    cols = list(X.columns)
    p = len(cols)

    def f(A: np.ndarray) -> np.ndarray:
        return np.asarray(est.predict(pd.DataFrame(A, columns=cols)), dtype=np.float64)

    exact_s, exact = explain(est, X, "exact", bg)
    ref = exact.attributions
    out = {"table": SMALL_TABLE, "columns": p, "rows": len(X), "background_rows": len(bg)}
    out |= {"exact_cpu_s": round(exact_s, 2), "mean_abs_exact": float(np.abs(ref).mean())}
    out |= {"shap_version": shap.__version__, "tabsparse": [], "shap": []}
    for n in TS_ORDERS[:3] if quick else TS_ORDERS:
        seconds, e = explain(est, X, n, bg)
        diff = np.abs(e.attributions - ref)
        row = {"orders": n, "cpu_s": seconds, "max_abs_diff": float(diff.max())}
        out["tabsparse"].append(row | {"mean_abs_diff": float(diff.mean())})
        print(json.dumps(out["tabsparse"][-1]), flush=True)
    warm = shap.PermutationExplainer(f, shap.maskers.Independent(bg, max_samples=64), seed=0)
    warm(X.iloc[:1], max_evals=2 * p + 1, silent=True)  # shap's one-time compiling, untimed
    for k in SHAP_PERMUTATIONS[:2] if quick else SHAP_PERMUTATIONS:
        explainer = shap.PermutationExplainer(
            f, shap.maskers.Independent(bg, max_samples=64), seed=0
        )
        max_evals = k * (2 * p + 1)
        seconds, got = cpu_time(lambda ex=explainer, m=max_evals: ex(X, max_evals=m, silent=True))
        diff = np.abs(np.asarray(got.values) - ref)
        row = {"orders": 2 * k, "max_evals": max_evals, "cpu_s": seconds}
        row |= {"max_abs_diff": float(diff.max()), "mean_abs_diff": float(diff.mean())}
        row["base_diff"] = float(np.abs(np.asarray(got.base_values) - exact.base_values).max())
        out["shap"].append(row)
        print(json.dumps(row), flush=True)
    curves = {lib: [(r["cpu_s"], r["mean_abs_diff"]) for r in out[lib]] for lib in LIBS}
    out["time_to"] = []
    for lib in LIBS:  # targets: each library's error at its smallest and 64 orders
        for r in [out[lib][0], *[r for r in out[lib] if r["orders"] == 64]]:
            row = {"target": f"{lib}, {r['orders']} orders", "error": r["mean_abs_diff"]}
            for other in LIBS:
                row[other] = time_to(curves[other], r["mean_abs_diff"])
            out["time_to"].append(row)
    return out


def part_linear(size: dict) -> dict:
    n, w = size["train"], np.asarray(LINEAR_W)
    rng = np.random.default_rng(0)
    X = rng.standard_normal((n + size["rows"], len(w)))
    y = X @ w + 0.01 * rng.standard_normal(len(X))
    frame = pd.DataFrame(X, columns=[f"x{j + 1}" for j in range(len(w))])
    Xtr, Xte, ytr, yte = frame.iloc[:n], frame.iloc[n:], y[:n], y[n:]
    est, info = fit("regression", Xtr, ytr, size["epochs"])
    bg = Xtr.iloc[np.sort(rng.choice(n, 64, replace=False))]
    pred = est.predict(Xte)
    design = np.hstack([Xte.to_numpy(), np.ones((len(Xte), 1))])
    slopes, *_ = np.linalg.lstsq(design, pred, rcond=None)
    linear_r2 = 1 - np.sum((design @ slopes - pred) ** 2) / np.sum((pred - pred.mean()) ** 2)
    out = info | {"train_rows": n, "rows": len(Xte), "w": list(w), "model_slopes": []}
    out |= {"test_r2": float(est.score(Xte, yte)), "linear_fit_r2": float(linear_r2)}
    out["model_slopes"] = [float(v) for v in slopes[:-1]]
    centred = Xte.to_numpy() - bg.to_numpy().mean(axis=0)
    truth, own = centred * w, centred * slopes[:-1]
    for label, n_perm in (("exact", "exact"), ("sampled", "auto")):
        seconds, e = explain(est, Xte, n_perm, bg)
        a = e.attributions
        rms = np.sqrt(np.mean(truth**2))
        out[label] = {
            "cpu_s": round(seconds, 2),
            "overall": float(np.linalg.norm(a - truth) / np.linalg.norm(truth)),
            "overall_vs_model_slopes": float(np.linalg.norm(a - own) / np.linalg.norm(own)),
            "per_column": [float(v) for v in np.sqrt(np.mean((a - truth) ** 2, axis=0)) / rms],
        }
    print(json.dumps(out), flush=True)
    return out


def part_cost(size: dict) -> dict:
    n, rows = size["train"], size["cost_rows"]
    X, y, _ = make_syn("Syn4", n + rows, seed=0)
    noise = np.random.default_rng([0, 50]).standard_normal((len(X), 39))
    cols = [f"x{j + 1}" for j in range(X.shape[1])] + [f"n{j + 1}" for j in range(39)]
    frame = pd.DataFrame(np.hstack([X, noise]), columns=cols)
    est, info = fit("binary", frame.iloc[:n], y[:n], size["epochs"])
    out = info | {"train_rows": n, "rows": rows, "columns": frame.shape[1], "results": []}
    Xe = frame.iloc[n:]
    for n_perm in COST_ORDERS:
        seconds, e = explain(est, Xe, n_perm)
        out["results"].append(
            {
                "n_permutations": n_perm,
                "orders": 64 if n_perm == "auto" else n_perm,
                "cpu_s": round(seconds, 2),
                "mean_std": float(e.attributions_std.mean()),
                "mean_abs_attribution": float(np.abs(e.attributions).mean()),
            }
        )
        print(json.dumps(out["results"][-1]), flush=True)
    return out


# ---- the README section ------------------------------------------------------------------
def _goal(ok: bool, by: str) -> str:
    return "**met**" if ok else f"**missed** ({by})"


def _cmd(part: str) -> str:
    return f"`python benchmarks/bench_attributions.py --parts {part}`"


def render(stored: dict) -> str:
    meta = stored["meta"]
    lines = [
        f"Machine: {meta['machine']}. tabsparse commit {meta['commit']}. Generated by "
        f"`{meta['command']}` (`benchmarks/bench_attributions.py`, whose docstring says exactly "
        "what is measured).",
        "",
        "`est.explain(X, attributions=True, random_state=0)`: interventional Shapley values in "
        "the model's raw output. Models: `TabNetClassifier` / `TabNetRegressor(random_state=0)` "
        "with the defaults, at most 10,000 training rows. CPU s: process CPU seconds on one "
        "thread (the machine was shared with other jobs).",
    ]
    other = sorted({d["part_commit"] for k, d in stored.items() if k != "meta"} - {meta["commit"]})
    if other:
        lines += ["", f"Some parts ran at other commits ({', '.join(other)}); see the JSON."]
    renderers = (_render_additivity, _render_sampled, _render_shap, _render_linear, _render_cost)
    for part, fn in zip(PARTS, renderers, strict=True):
        lines += fn(stored[part]) if part in stored else []
    return "\n".join(lines) + "\n"


def _render_additivity(d: dict) -> list[str]:
    rows = d["rows"]
    worst = max(r["max_rel_error"] for r in rows)
    out = [
        "",
        f"**Additivity** ({_cmd('additivity')}): `base_values + attributions.sum(axis=1)` "
        f"against the raw output computed from `predict_proba` / `predict`, {rows[0]['rows']} "
        'test rows per table, `n_permutations="auto"`. Binary: `log(p1 / p0)`; multi-class: '
        "`log p` minus its mean over the classes; regression: `predict`. Relative: "
        "`|error| / max(|output|, sd of the outputs)`.",
        "",
        "| table | task | columns | outputs | train rows | epochs | fit CPU s | attributions "
        "| explain CPU s | output sd | max abs error | max relative error |",
        "|---|---|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|",
    ]
    for r in rows:
        out.append(
            f"| {r['table']} | {r['kind']} | {r['columns']} | {r['outputs']} "
            f"| {r['train_rows']:,} | {r['epochs']} | {r['fit_cpu_s']:.0f} | {r['method']} "
            f"| {r['explain_cpu_s']:.2f} | {r['output_sd']:.3g} | {r['max_abs_error']:.2e} "
            f"| {r['max_rel_error']:.2e} |"
        )
    bad = sum(r["non_finite_outputs"] for r in rows)
    if bad:
        out += ["", f"{bad} outputs were not finite (a probability of 0) and are left out."]
    goal = GOALS["additivity"]
    out += ["", f"Goal (relative <= {goal:g}): {_goal(worst <= goal, f'{worst / goal:.1f}x')}."]
    return out


def _render_sampled(d: dict) -> list[str]:
    out = [
        "",
        f"**Exact against sampled** ({_cmd('sampled')}): {d['table']} ({d['columns']} "
        f"columns), {d['rows']} test rows, the default background (64 training rows kept at "
        f"fit); exact values took {d['exact_cpu_s']:.1f} CPU s; mean |exact value| "
        f"{d['mean_abs_exact']:.4g}. *within k se*: share of the values whose distance to the "
        "exact value is at most k reported standard errors (`attributions_std`); *if normal*: "
        "what a t distribution with (orders / 2 - 1) degrees of freedom gives, the share "
        "expected of a standard error from orders / 2 antithetic pairs of normal contributions.",
        "",
        "| orders | CPU s | max abs diff | mean abs diff | mean se | within 2 se | within 3 se "
        "| within 3 se if normal |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in d["results"]:
        out.append(
            f"| {r['n_permutations']} | {r['cpu_s']:.2f} | {r['max_abs_diff']:.4g} "
            f"| {r['mean_abs_diff']:.4g} | {r['mean_std']:.4g} | {100 * r['within_2_std']:.1f}% "
            f"| {100 * r['within_3_std']:.1f}% | {100 * r['within_3_std_if_normal']:.1f}% |"
        )
    worst = min(r["within_3_std"] for r in d["results"])
    goal = GOALS["within3"]
    gap = f"lowest {100 * worst:.1f}%, {100 * (goal - worst):.1f} points short"
    out += ["", f"Goal (about {100 * goal:.0f}% within 3 se): {_goal(worst >= goal - 5e-3, gap)}."]
    return out


def _render_shap(d: dict) -> list[str]:
    out = [
        "",
        f"**Against shap** ({_cmd('shap')}): shap {d['shap_version']} "
        f"`PermutationExplainer(f, maskers.Independent(bg, max_samples=64), seed=0)` with "
        "`f` = `est.predict` of the raw rows, against `est.explain(X, attributions=True, "
        f"background=bg, n_permutations=k)`; {d['table']} ({d['columns']} columns), "
        f"{d['rows']} test rows, `bg` = {d['background_rows']} raw training rows (seed 0) for "
        f"both. Reference: tabsparse's exact values ({d['exact_cpu_s']:.1f} CPU s; mean |value| "
        f"{d['mean_abs_exact']:.4g}). *orders*: walks through the columns per row (shap: "
        "`max_evals = orders / 2 * (2p + 1)`, each coalition averaged over all background rows; "
        "tabsparse: one background row per antithetic pair).",
        "",
        "| library | orders | max_evals | CPU s | max abs diff | mean abs diff |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for lib in ("tabsparse", "shap"):
        for r in d[lib]:
            out.append(
                f"| {lib} | {r['orders']} | {r.get('max_evals', '')} | {r['cpu_s']:.2f} "
                f"| {r['max_abs_diff']:.4g} | {r['mean_abs_diff']:.4g} |"
            )
    base = max(r["base_diff"] for r in d["shap"])
    out += [
        "",
        f"shap's base values differ from tabsparse's by at most {base:.3g}. CPU seconds each "
        "needs to reach a mean abs diff (*interp.*: log-log between its budgets; *extrap.*: "
        "beyond its largest, error ~ time^-1/2; *at most*: its smallest budget does better):",
        "",
        "| mean abs diff of | value | tabsparse CPU s | shap CPU s | shap / tabsparse |",
        "|---|---:|---:|---:|---:|",
    ]
    for r in d["time_to"]:
        (ts, how_ts), (sh, how_sh) = r["tabsparse"], r["shap"]
        out.append(
            f"| {r['target']} | {r['error']:.4g} | {ts:.3g} ({how_ts}) | {sh:.3g} ({how_sh}) "
            f"| {sh / ts:.1f}x |"
        )
    main = [r for r in d["time_to"] if r["target"] == "tabsparse, 64 orders"] or d["time_to"]
    ts, sh = main[0]["tabsparse"][0], main[0]["shap"][0]
    out += [
        "",
        f"Goal (tabsparse faster to the error it reaches at 64 orders): "
        f"{_goal(ts < sh, f'{ts / sh:.1f}x slower')}.",
    ]
    return out


def _render_linear(d: dict) -> list[str]:
    out = [
        "",
        f"**Linear truth** ({_cmd('linear')}): `y = X @ w + 0.01 * noise`, {len(d['w'])} "
        f"independent standard-normal columns, {d['train_rows']:,} training rows "
        f"(`TabNetRegressor` defaults: {d['epochs']} epochs, {d['fit_cpu_s']:.0f} CPU s); "
        f"test R2 {d['test_r2']:.5f}, R2 of a linear fit to the model's predictions "
        f"{d['linear_fit_r2']:.5f}. {d['rows']} test rows, a background of 64 training rows; truth "
        "`w_i (x_i - mean_bg x_i)`. Per column: `rms(a_i - truth_i) / rms(truth)` (a share of "
        "the whole attribution scale); overall: `||a - truth|| / ||truth||`; *vs slopes*: the "
        "same against the model's own least-squares slopes instead of `w`.",
        "",
        "| column | w | model slope | error exact | error 64 orders |",
        "|---|---:|---:|---:|---:|",
    ]
    for j, w in enumerate(d["w"]):
        out.append(
            f"| x{j + 1} | {w:g} | {d['model_slopes'][j]:.4f} "
            f"| {100 * d['exact']['per_column'][j]:.2f}% "
            f"| {100 * d['sampled']['per_column'][j]:.2f}% |"
        )
    ex, sa = d["exact"], d["sampled"]
    out += [
        f"| overall | | | {100 * ex['overall']:.2f}% | {100 * sa['overall']:.2f}% |",
        f"| overall vs slopes | | | {100 * ex['overall_vs_model_slopes']:.2f}% "
        f"| {100 * sa['overall_vs_model_slopes']:.2f}% |",
        f"| CPU s | | | {ex['cpu_s']:.1f} | {sa['cpu_s']:.1f} |",
    ]
    goal, worst = GOALS["linear"], ex["overall"]
    by = f"{100 * worst:.2f}% against {100 * goal:.0f}%"
    out += ["", f"Goal (exact, overall within {100 * goal:.0f}%): {_goal(worst <= goal, by)}."]
    return out


def _render_cost(d: dict) -> list[str]:
    out = [
        "",
        f"**Cost** ({_cmd('cost')}): {d['rows']:,} rows x {d['columns']} columns (Syn4 and 39 "
        f"noise columns), `TabNetClassifier` defaults on {d['train_rows']:,} rows "
        f"({d['epochs']} epochs, {d['fit_cpu_s']:.0f} CPU s), the default background; "
        "`n_permutations` orders cost `orders * (p - 1)` forward passes per row.",
        "",
        "| n_permutations | orders | CPU s | ms / row | mean se | mean abs attribution |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for r in d["results"]:
        out.append(
            f"| {r['n_permutations']} | {r['orders']} | {r['cpu_s']:.1f} "
            f"| {1e3 * r['cpu_s'] / d['rows']:.1f} | {r['mean_std']:.4g} "
            f"| {r['mean_abs_attribution']:.4g} |"
        )
    auto = d["results"][0]
    goal = GOALS["cost_s"] * d["rows"] / 1000
    fits = int(auto["orders"] * goal / auto["cpu_s"]) // 2 * 2
    by = (
        f"{auto['cpu_s'] - goal:.1f} s over, {auto['cpu_s'] / goal:.2f}x; the time grows with "
        f"the orders, so about {fits} orders would fit"
    )
    out += ["", f'Goal (`"auto"` <= {goal:g} s): {_goal(auto["cpu_s"] <= goal, by)}.']
    return out


# ---- main --------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parts", nargs="+", choices=PARTS, default=list(PARTS))
    parser.add_argument("--quick", action="store_true", help="small sizes; stores nothing")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--readme", type=Path, default=README)
    parser.add_argument("--render", action="store_true", help="the README from --out only")
    args = parser.parse_args(argv)
    if args.render:
        write_section(args.readme, SECTION, render(json.loads(args.out.read_text())))
        return
    torch.set_num_threads(1)
    warnings.filterwarnings("ignore", category=UserWarning)
    load = load_average()
    meta = {
        "commit": git_commit(),
        "torch": torch.__version__,
        "cpu": cpu_model(),
        "date": _dt.date.today().isoformat(),
        "command": " ".join(["python", "benchmarks/bench_attributions.py", *sys.argv[1:]]),
        "machine": f"CPU: {cpu_model()}, 1 thread (torch and OpenMP); torch "
        f"{torch.__version__}, Python {platform.python_version()}; {_dt.date.today()}"
        + (f"; load average {load:.2f} at start" if load is not None else ""),
    }
    print(f"tabsparse from {Path(tabsparse.__file__).parent}; {meta['machine']}", flush=True)
    parts = list(args.parts)
    if not DATASETS.is_dir():
        print(f"no datasets at {DATASETS}: skipping the parts on real tables", flush=True)
        parts = [p for p in parts if p in ("linear", "cost")]
    size = SIZES[args.quick]
    models = Models(size)
    store = args.out.exists() and not args.quick
    stored = json.loads(args.out.read_text()) if store else {}
    stored["meta"] = meta
    runs = {
        "additivity": lambda: part_additivity(models),
        "sampled": lambda: part_sampled(models),
        "shap": lambda: part_shap(models, args.quick),
        "linear": lambda: part_linear(size),
        "cost": lambda: part_cost(size),
    }
    for part in parts:
        seconds, stored[part] = cpu_time(runs[part])
        stored[part] |= {"part_cpu_s": round(seconds, 1), "part_commit": meta["commit"]}
        print(f"{part}: {seconds:.0f} CPU s", flush=True)
        if not args.quick:  # after each part, so a cut-off run keeps what it made
            args.out.parent.mkdir(exist_ok=True)
            args.out.write_text(json.dumps(stored, indent=1) + "\n")
    body = render(stored)
    print(body)
    if not args.quick:
        write_section(args.readme, SECTION, body)
        print(f"wrote {args.out} and section {SECTION!r} of {args.readme}")


if __name__ == "__main__":
    main()
