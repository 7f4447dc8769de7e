"""Paired comparison of two models on the quality benchmark's test rows.

The quality table (``bench_quality.py``) compares means over seeds. This script asks a different
question: on one seed's models, is the difference between the two libraries larger than the test
set's sampling noise? Both libraries are fitted exactly as ``bench_quality.py`` fits them (same
split, caps, defaults and ``random_state``), and their predictions on the same test rows are
paired:

* classification: ``b`` = rows only tabsparse gets right, ``c`` = rows only pytorch-tabnet gets
  right. Accuracy difference ``(b - c) / n``, its paired standard error
  ``sqrt(b + c - (b - c)^2 / n) / n``, and McNemar's exact two-sided p-value (a binomial test of
  ``min(b, c)`` out of ``b + c`` at 1/2);
* regression: the per-row difference of squared errors ``d``; the mean of ``d`` (the MSE
  difference), its standard error ``sd(d) / sqrt(n)`` and a two-sided normal p-value.

A verdict names the better library where p < 0.05, else "no significant difference". Rows go
to ``results/paired.jsonl`` (statistics only, no predictions) and the table to the
"Paired test" section of ``benchmarks/README.md``.

``--a M --b M`` pairs ANY two models from the test predictions ``bench_quality.py`` stored
(``results/predictions/``, no refit): ``M`` is a model name (``tabsparse`` = the variant of its
current defaults) or a stored file's ``<model>-<variant>`` stem without ``-seed<k>``. Binary
tables are compared by ROC AUC with DeLong's test for two correlated AUCs (DeLong, DeLong and
Clarke-Pearson 1988: the structural components of each AUC, their covariance over the positives
and over the negatives, a two-sided normal p), multi-class tables by accuracy (McNemar, as
above), regression by the per-row squared errors (as above), reported as the RMSE difference and
ratio. Rows go to ``results/paired_models.jsonl``.

Usage::

    python benchmarks/bench_paired.py                  # every dataset, seed 0, 2 workers
    python benchmarks/bench_paired.py --datasets credit_card_default_taiwan --no-write
    # this checkout's tabsparse against the one checked out at DIR (before/after a change)
    python benchmarks/bench_paired.py --baseline DIR --no-write
    # any two models from stored predictions (bench_quality.py --predictions), seed 0
    python benchmarks/bench_paired.py --a tabsparse --b catboost
    python benchmarks/bench_paired.py --a tabsparse-1a2b3c4d --b realmlp --datasets adult
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import datetime as _dt
import json
import math
import multiprocessing as mp
import platform
import sys
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _readme import cpu_model, load_average, write_section  # noqa: E402
from quality_fits import run_model  # noqa: E402
from quality_refs import load_predictions, prediction_path  # noqa: E402
from quality_refs import variant as variant_tag  # noqa: E402
from quality_store import git_commit, resolved_tabsparse_params  # noqa: E402
from quality_tasks import DATASETS, SEED, TASK_BY_NAME, TASKS, TEST_CAP, TRAIN_CAP  # noqa: E402

RESULTS = HERE / "results" / "paired.jsonl"
SECTION = "## Paired test against pytorch-tabnet"
MODELS = ("tabsparse", "pytorch-tabnet")
#: tabsparse as checked out at ``--baseline DIR``, fitted in workers that import it from there
BASELINE = "tabsparse@baseline"
ALPHA = 0.05


def mcnemar_p(b: int, c: int) -> float:
    """Exact two-sided McNemar p-value: ``min(b, c)`` successes of ``b + c`` at 1/2."""
    n = b + c
    if n == 0:
        return 1.0
    k = min(b, c)
    # P(X <= k) for X ~ Binomial(n, 1/2), doubled (the distribution is symmetric); exact
    # integers, since 2.0 ** n overflows a float from n = 1024 on
    tail = sum(math.comb(n, i) for i in range(k + 1)) / 2**n
    return min(1.0, 2.0 * tail)


def paired_classification(y: np.ndarray, ours: np.ndarray, theirs: np.ndarray) -> dict[str, Any]:
    """Accuracy difference (ours - theirs), its paired standard error and McNemar's p."""
    right_ours = ours.astype(str) == y
    right_theirs = theirs.astype(str) == y
    n = len(y)
    b = int(np.sum(right_ours & ~right_theirs))
    c = int(np.sum(~right_ours & right_theirs))
    diff = (b - c) / n
    se = math.sqrt(max(b + c - (b - c) ** 2 / n, 0.0)) / n
    return {
        "n": n,
        "metric": "accuracy",
        "ours": float(right_ours.mean()),
        "theirs": float(right_theirs.mean()),
        "only_ours": b,
        "only_theirs": c,
        "diff": diff,
        "se": se,
        "p": mcnemar_p(b, c),
    }


def paired_regression(y: np.ndarray, ours: np.ndarray, theirs: np.ndarray) -> dict[str, Any]:
    """MSE difference (ours - theirs) from per-row squared errors, its standard error and a
    two-sided normal p-value."""
    e_ours = (y - ours.astype(float)) ** 2
    e_theirs = (y - theirs.astype(float)) ** 2
    d = e_ours - e_theirs
    n = len(y)
    se = float(d.std(ddof=1) / math.sqrt(n)) if n > 1 else math.inf
    diff = float(d.mean())
    z = diff / se if se > 0 else (0.0 if diff == 0 else math.copysign(math.inf, diff))
    rmse_ours, rmse_theirs = float(math.sqrt(e_ours.mean())), float(math.sqrt(e_theirs.mean()))
    return {
        "n": n,
        "metric": "rmse",
        "ours": rmse_ours,
        "theirs": rmse_theirs,
        "rmse_diff": rmse_ours - rmse_theirs,
        "rmse_ratio": rmse_ours / rmse_theirs if rmse_theirs > 0 else math.inf,
        "diff": diff,
        "se": se,
        "p": math.erfc(abs(z) / math.sqrt(2.0)),
    }


def verdict(stats: dict[str, Any], models: tuple[str, str] = MODELS) -> str:
    """Which model is better at the 5% level (accuracy, AUC: higher; MSE: lower)."""
    if stats["p"] >= ALPHA:
        return "no significant difference"
    higher = stats["metric"] in ("accuracy", "auc")
    better_ours = stats["diff"] > 0 if higher else stats["diff"] < 0
    return f"{models[0] if better_ours else models[1]} better"


def _midranks(x: np.ndarray) -> np.ndarray:
    """1-based ranks of ``x`` with ties given the mean of their ranks."""
    order = np.argsort(x, kind="mergesort")
    xs = x[order]
    ranks = np.empty(len(x))
    i = 0
    while i < len(xs):
        j = i
        while j + 1 < len(xs) and xs[j + 1] == xs[i]:
            j += 1
        ranks[order[i : j + 1]] = (i + j) / 2 + 1
        i = j + 1
    return ranks


def delong_components(positive: np.ndarray, score: np.ndarray) -> tuple[float, Any, Any]:
    """DeLong et al. (1988): the AUC of ``score`` and its structural components.

    ``V10[i]`` = the fraction of negatives that positive ``i`` outscores (ties count 1/2),
    ``V01[j]`` = the fraction of positives that outscore negative ``j``; the AUC is the mean of
    either. Computed from midranks (rank among all rows minus rank among its own class)."""
    pos = positive.astype(bool)
    m, n = int(pos.sum()), int((~pos).sum())
    if m == 0 or n == 0:
        raise ValueError("the AUC needs both classes in the test rows")
    r_all = _midranks(score)
    v10 = (r_all[pos] - _midranks(score[pos])) / n
    v01 = 1.0 - (r_all[~pos] - _midranks(score[~pos])) / m
    return float(v10.mean()), v10, v01


def delong_test(positive: np.ndarray, ours: np.ndarray, theirs: np.ndarray) -> dict[str, Any]:
    """DeLong's test of two correlated ROC AUCs on the same rows: the AUC difference (ours -
    theirs), its standard error ``sqrt(var)`` with ``var = (S10_aa + S10_bb - 2 S10_ab) / m +
    (S01_aa + S01_bb - 2 S01_ab) / n`` (``S10``, ``S01``: the sample covariances of the
    structural components over the m positives and n negatives) and a two-sided normal p."""
    auc_a, v10_a, v01_a = delong_components(positive, ours)
    auc_b, v10_b, v01_b = delong_components(positive, theirs)
    m, n = len(v10_a), len(v01_a)
    s10 = np.cov(np.vstack([v10_a, v10_b])) if m > 1 else np.zeros((2, 2))
    s01 = np.cov(np.vstack([v01_a, v01_b])) if n > 1 else np.zeros((2, 2))
    var = (s10[0, 0] + s10[1, 1] - 2 * s10[0, 1]) / m + (s01[0, 0] + s01[1, 1] - 2 * s01[0, 1]) / n
    diff = auc_a - auc_b
    se = math.sqrt(max(float(var), 0.0))
    if se > 0:
        p = math.erfc(abs(diff / se) / math.sqrt(2.0))
    else:
        p = 1.0 if diff == 0 else 0.0
    return {
        "n": m + n,
        "metric": "auc",
        "ours": auc_a,
        "theirs": auc_b,
        "diff": diff,
        "se": se,
        "p": p,
    }


def pair_stored(ours: dict[str, Any], theirs: dict[str, Any]) -> dict[str, Any]:
    """Paired statistics of two stored prediction sets of one dataset
    (``quality_refs.load_predictions``): binary by ROC AUC (DeLong), multi-class by accuracy
    (McNemar), regression by the squared errors (RMSE difference and ratio)."""
    if ours["y_sha"] != theirs["y_sha"]:
        raise ValueError("the two prediction files were scored on different test rows")
    kind, y = ours["kind"], ours["y"]
    if kind == "binary":
        positive = y == ours["positive"]
        return delong_test(positive, ours["score"], theirs["score"])
    if kind == "regression":
        return paired_regression(y, ours["pred"], theirs["pred"])
    return paired_classification(y, ours["pred"], theirs["pred"])


def resolve_file(dataset: str, spec: str, seed: int) -> Path:
    """The prediction file of ``spec`` on ``dataset``: ``"tabsparse"`` = its current defaults
    (the variant of the resolved parameters), any other name or ``name-<variant>`` literally."""
    if spec == "tabsparse":
        kind = TASK_BY_NAME[dataset].kind
        tag = variant_tag(resolved_tabsparse_params(kind, {}))
        return prediction_path(dataset, spec, seed, tag)
    return prediction_path(dataset, spec, seed)


def compare_stored(a: str, b: str, names: list[str], seed: int) -> list[dict[str, Any]]:
    """Pair the stored predictions of ``a`` and ``b`` on every dataset that has both."""
    rows = []
    for name in names:
        fa, fb = resolve_file(name, a, seed), resolve_file(name, b, seed)
        if not (fa.exists() and fb.exists()):
            print(f"{name:28s} no stored predictions of {a if not fa.exists() else b}")
            continue
        stats = pair_stored(load_predictions(fa), load_predictions(fb))
        row = {"dataset": name, "a": fa.stem, "b": fb.stem, **stats}
        row["verdict"] = verdict(row, (a, b))
        rows.append(row)
    return rows


def describe(r: dict[str, Any]) -> str:
    """One line of a stored-predictions comparison."""
    if r["metric"] == "rmse":
        d = f"RMSE {r['rmse_diff']:+.4g} (ratio {r['rmse_ratio']:.3f})"
    else:
        d = f"{r['metric']} {100 * r['diff']:+.2f} ± {100 * r['se']:.2f} points"
    head = f"{r['dataset']:28s} {r['ours']:.4g} vs {r['theirs']:.4g}"
    return f"{head}  {d}  p {r['p']:.3g}  {r['verdict']}"


def pair(
    name: str,
    y_test: Any,
    ours: np.ndarray,
    theirs: np.ndarray,
    models: tuple[str, str] = MODELS,
) -> dict[str, Any]:
    """The paired statistics of one dataset's two sets of test predictions."""
    if TASK_BY_NAME[name].kind == "regression":
        stats = paired_regression(y_test.to_numpy(dtype=float), ours, theirs)
    else:
        stats = paired_classification(y_test.astype(str).to_numpy(), ours, theirs)
    row = {"dataset": name, **stats}
    row["verdict"] = verdict(row, models)
    return row


def _fit(name: str, model: str, seed: int) -> dict[str, Any]:
    model = "tabsparse" if model == BASELINE else model
    return run_model(name, model, {}, TRAIN_CAP, TEST_CAP, seed=seed, predictions=True)


def _import_from(folder: str) -> None:
    """Worker initialiser: ``import tabsparse`` finds the checkout at ``folder`` first."""
    sys.path.insert(0, folder)


def machine_line(load: float | None) -> str:
    """This machine, as a stored row's ``machine``."""
    return (
        f"{cpu_model()}, each model on 1 thread; Python {platform.python_version()}; one-minute "
        f"load average {load} at the start"
    )


def render(
    rows: list[dict[str, Any]], seed: int, commit: str, load: float | None, header: str = ""
) -> str:
    when = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        header
        or f"`python benchmarks/bench_paired.py` — {when}; {machine_line(load)}; tabsparse at "
        f"commit {commit}.",
        "",
        f"Both libraries fitted once (`random_state` {seed}) exactly as in *Quality against "
        "gradient boosting and pytorch-tabnet* (same split, caps and defaults), their "
        "predictions paired on the same test rows. "
        "Classification: accuracy difference (tabsparse − pytorch-tabnet) in points, its paired "
        "standard error, the rows only one of them gets right, and McNemar's exact p. "
        "Regression: RMSE of each, and the paired test of the per-row squared errors (normal "
        "p). This measures the test set's sampling noise for one seed; the seed-to-seed spread "
        "is in the quality table's brackets.",
        "",
        "| dataset | n test | tabsparse | pytorch-tabnet | difference ± SE | only tabsparse / "
        "only pytorch-tabnet right | p | verdict |",
        "|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        if r["metric"] == "accuracy":
            cells = (
                f"{r['ours']:.4f}",
                f"{r['theirs']:.4f}",
                f"{100 * r['diff']:+.2f} ± {100 * r['se']:.2f} points",
                f"{r['only_ours']} / {r['only_theirs']}",
            )
        else:
            rel = r["ours"] / r["theirs"] - 1 if r["theirs"] > 0 else math.nan
            cells = (
                f"{r['ours']:.4g}",
                f"{r['theirs']:.4g}",
                f"RMSE {100 * rel:+.1f}% (MSE {r['diff']:+.3g} ± {r['se']:.2g})",
                "—",
            )
        p = f"{r['p']:.2g}" if r["p"] > 0 else "< 1e-300"  # below the float range
        row = " | ".join((r["dataset"], f"{r['n']:,}", *cells, p, r["verdict"]))
        lines.append(f"| {row} |")
    counts = {v: sum(r["verdict"] == v for r in rows) for v in {r["verdict"] for r in rows}}
    summary = ", ".join(f"{k}: {counts[k]}" for k in sorted(counts))
    lines += ["", f"**Summary** ({len(rows)} datasets, p < {ALPHA}): {summary}."]
    return "\n".join(lines)


def readme_section(path: Path = RESULTS) -> str:
    """The section body from the rows of the latest run stored in ``path`` (no fits): the
    latest row of every dataset at the commit of the file's last row."""
    stored = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    commit = stored[-1]["commit"]
    latest = {r["dataset"]: r for r in stored if r["commit"] == commit}
    rows = [latest[n] for n in sorted(latest)]
    machine = rows[-1].get("machine", "machine not recorded in `results/paired.jsonl`")
    when = f" — {rows[-1]['time']}" if "time" in rows[-1] else ""
    header = (
        f"`python benchmarks/bench_paired.py`{when}; {machine}; tabsparse at commit {commit} "
        "(rows in `benchmarks/results/paired.jsonl`)."
    )
    return render(rows, rows[-1]["seed"], commit, None, header)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", nargs="*", help="names (default: all found)")
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--no-write", action="store_true", help="do not touch the README")
    parser.add_argument(
        "--baseline",
        type=Path,
        help="pair this checkout's tabsparse with the one checked out at this folder "
        "instead of pytorch-tabnet (rows go to results/paired_baseline.jsonl, not the README)",
    )
    parser.add_argument("--a", help="pair stored predictions: this model ...")
    parser.add_argument("--b", help="... against this one (see the module docstring)")
    parser.add_argument(
        "--tabsparse-from",
        type=Path,
        help="with --a/--b: resolve `tabsparse` to the defaults of the checkout at this folder",
    )
    args = parser.parse_args(argv)
    if (args.a is None) != (args.b is None):
        parser.error("--a and --b go together")
    if args.a is not None:
        if args.tabsparse_from is not None:
            sys.path.insert(0, str(args.tabsparse_from.resolve()))
        names = [t.dataset for t in TASKS if not t.skip]
        names = [n for n in names if not args.datasets or n in args.datasets]
        rows = compare_stored(args.a, args.b, names, args.seed)
        for r in rows:
            print(describe(r))
        counts = {v: sum(r["verdict"] == v for r in rows) for v in {r["verdict"] for r in rows}}
        print(f"summary ({len(rows)} datasets, p < {ALPHA}): {counts}")
        with RESULTS.with_name("paired_models.jsonl").open("a") as f:
            for r in rows:
                f.write(json.dumps({**r, "seed": args.seed}) + "\n")
        return
    models: tuple[str, str] = MODELS if args.baseline is None else ("tabsparse", BASELINE)
    names = [
        t.dataset
        for t in TASKS
        if not t.skip
        and (not args.datasets or t.dataset in args.datasets)
        and (DATASETS / t.dataset / f"{t.dataset}.csv.gz").exists()
    ]
    if not names:
        print(f"no datasets found under {DATASETS}")
        return
    load = load_average()
    commit = git_commit()
    size = {n: (DATASETS / n / f"{n}.csv.gz").stat().st_size for n in names}
    jobs = sorted(((n, m) for n in names for m in models), key=lambda j: -size[j[0]])
    preds: dict[tuple[str, str], np.ndarray] = {}
    paired: dict[str, dict[str, Any]] = {}
    ctx = mp.get_context("spawn")
    # the baseline's workers import tabsparse from its folder: a pool of their own
    pools = {m: cf.ProcessPoolExecutor(args.workers, mp_context=ctx) for m in models}
    if args.baseline is not None:
        pools[BASELINE].shutdown()
        pools[BASELINE] = cf.ProcessPoolExecutor(
            args.workers,
            mp_context=ctx,
            initializer=_import_from,
            initargs=(str(args.baseline.resolve()),),
        )
    try:
        futures = {pools[m].submit(_fit, n, m, args.seed): (n, m) for n, m in jobs}
        for fut in cf.as_completed(futures):
            n, m = futures[fut]
            rec = fut.result()
            preds[(n, m)] = rec["predictions"]
            print(f"{n:28s} {m:18s} fitted in {rec['fit_s']:.1f}s", flush=True)
            if all((n, other) in preds for other in models):  # pair as soon as both are in
                ours, theirs = (preds.pop((n, other)) for other in models)
                paired[n] = pair(n, rec["y_test"], ours, theirs, models)
                paired[n].update(seed=args.seed, commit=commit, machine=machine_line(load))
                paired[n].update(time=_dt.datetime.now(_dt.timezone.utc).isoformat("T", "minutes"))
                r = paired[n]
                stats = f"diff {r['diff']:+.5g} se {r['se']:.3g} p {r['p']:.3g}"
                print(f"{n:28s} {stats} {r['verdict']}", flush=True)
    finally:
        for pool in pools.values():
            pool.shutdown()
    rows = [paired[n] for n in names]
    results = RESULTS if args.baseline is None else RESULTS.with_name("paired_baseline.jsonl")
    results.parent.mkdir(parents=True, exist_ok=True)
    with results.open("a") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")
    if args.baseline is not None:
        counts = {v: sum(r["verdict"] == v for r in rows) for v in {r["verdict"] for r in rows}}
        print(f"summary against {args.baseline}: {counts}")
    elif not args.no_write:
        write_section(HERE / "README.md", SECTION, render(rows, args.seed, commit, load))
        print(f"wrote {SECTION!r}")


if __name__ == "__main__":
    main()
