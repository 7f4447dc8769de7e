"""Paired comparison of tabsparse and pytorch-tabnet on the quality benchmark's test rows.

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

Usage::

    python benchmarks/bench_paired.py                  # every dataset, seed 0, 2 workers
    python benchmarks/bench_paired.py --datasets credit_card_default_taiwan --no-write
    # this checkout's tabsparse against the one checked out at DIR (before/after a change)
    python benchmarks/bench_paired.py --baseline DIR --no-write
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

import bench_quality as bq  # noqa: E402
from _readme import cpu_model, load_average, write_section  # noqa: E402

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
    return {
        "n": n,
        "metric": "rmse",
        "ours": float(math.sqrt(e_ours.mean())),
        "theirs": float(math.sqrt(e_theirs.mean())),
        "diff": diff,
        "se": se,
        "p": math.erfc(abs(z) / math.sqrt(2.0)),
    }


def verdict(stats: dict[str, Any], models: tuple[str, str] = MODELS) -> str:
    """Which model is better at the 5% level (accuracy: higher; MSE: lower)."""
    if stats["p"] >= ALPHA:
        return "no significant difference"
    better_ours = stats["diff"] > 0 if stats["metric"] == "accuracy" else stats["diff"] < 0
    return f"{models[0] if better_ours else models[1]} better"


def pair(
    name: str,
    y_test: Any,
    ours: np.ndarray,
    theirs: np.ndarray,
    models: tuple[str, str] = MODELS,
) -> dict[str, Any]:
    """The paired statistics of one dataset's two sets of test predictions."""
    if bq.TASK_BY_NAME[name].kind == "regression":
        stats = paired_regression(y_test.to_numpy(dtype=float), ours, theirs)
    else:
        stats = paired_classification(y_test.astype(str).to_numpy(), ours, theirs)
    row = {"dataset": name, **stats}
    row["verdict"] = verdict(row, models)
    return row


def _fit(name: str, model: str, seed: int) -> dict[str, Any]:
    model = "tabsparse" if model == BASELINE else model
    return bq.run_model(name, model, {}, bq.TRAIN_CAP, bq.TEST_CAP, seed=seed, predictions=True)


def _import_from(folder: str) -> None:
    """Worker initialiser: ``import tabsparse`` finds the checkout at ``folder`` first."""
    sys.path.insert(0, folder)


def render(rows: list[dict[str, Any]], seed: int, commit: str, load: float | None) -> str:
    when = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        f"`python benchmarks/bench_paired.py` — {when}; {cpu_model()}, each model on 1 thread; "
        f"Python {platform.python_version()}; tabsparse at commit {commit}; "
        f"one-minute load average {load} at the start.",
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


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", nargs="*", help="names (default: all found)")
    parser.add_argument("--seed", type=int, default=bq.SEED)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--no-write", action="store_true", help="do not touch the README")
    parser.add_argument(
        "--baseline",
        type=Path,
        help="pair this checkout's tabsparse with the one checked out at this folder "
        "instead of pytorch-tabnet (rows go to results/paired_baseline.jsonl, not the README)",
    )
    args = parser.parse_args(argv)
    models: tuple[str, str] = MODELS if args.baseline is None else ("tabsparse", BASELINE)
    names = [
        t.dataset
        for t in bq.TASKS
        if not t.skip
        and (not args.datasets or t.dataset in args.datasets)
        and (bq.DATASETS / t.dataset / f"{t.dataset}.csv.gz").exists()
    ]
    if not names:
        print(f"no datasets found under {bq.DATASETS}")
        return
    load = load_average()
    commit = bq.git_commit()
    size = {n: (bq.DATASETS / n / f"{n}.csv.gz").stat().st_size for n in names}
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
                paired[n].update(seed=args.seed, commit=commit)
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
