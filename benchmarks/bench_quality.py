"""Quality of tabsparse's defaults against gradient boosting and pytorch-tabnet on real tables.

Every dataset of ``../shared/datasets`` (or ``$TABSPARSE_DATASETS``) gets one fixed task (see
``TASKS`` in ``quality_tasks.py`` and the README section this script writes), one fixed
train/test split (the official one where the data has one, else 80/20 with seed 0, stratified
for classification) and caps on the training and test rows (a seeded random subsample) so that
the whole run stays near 30 minutes on 2 cores. Four models are fitted with their own defaults:

- ``tabsparse``: ``TabNetClassifier/TabNetRegressor(random_state=0)`` on the DataFrame as it is
  (plus ``--tabsparse-params`` when screening other defaults);
- ``hgb``: ``HistGradientBoosting*(categorical_features="from_dtype", random_state=0)``
  (categorical columns with more than 255 levels, which HGB refuses, enter as ordinal codes);
- ``lightgbm``: ``LGBM*(n_jobs=1, verbose=-1, random_state=0)``, pandas categories native;
- ``pytorch-tabnet``: pytorch-tabnet 4.1 ``TabNet*(verbose=0)`` as its README shows it: ordinal
  codes of the categorical columns (vocabulary of the whole file, NaN its own level) with
  ``cat_idxs``/``cat_dims``, numeric NaN replaced by the training mean, float32 numpy input,
  ``eval_set`` = a 10% split (seed 0, stratified for classification) of the training rows for its
  default early stopping (``max_epochs=100, patience=10``), ``compute_importance=False``;
- ``xgboost``, ``catboost``, ``realmlp`` (pytabkit's RealMLP-TD) and ``tabm`` (pytabkit's TabM-D):
  the strongest references, with their libraries' defaults on one thread (``quality_refs.py``
  says how; they need the ``bench`` extra, and are fitted only when ``--models`` names them).

With ``--seeds N`` the two neural networks are fitted with ``random_state`` 0..N-1 on the same
split (the seed sets their initialisation, batch order and early-stopping holdout) and the table
shows the means over the seeds with their range; single-seed differences of a point are common
on the small tables. The gradient-boosted models are fitted once.

Each worker process runs one model at a time on one thread (``OMP_NUM_THREADS=1``,
``torch.set_num_threads(1)``, LightGBM ``n_jobs=1``), so the fit times are single-thread times.
Fit times are stored as wall seconds (``fit_s``) and the worker's CPU seconds (``fit_cpu_s``,
``time.process_time``; the fair figure on a loaded machine). ``--fit-cpu-limit S`` ends a fit
after S CPU seconds (the worker is restarted; the fit is noted in
``results/quality_timeouts.jsonl`` and skipped by later ``--reuse`` runs with the same limit).
With ``--predictions`` every fit also stores its test predictions under
``results/predictions/`` (see ``quality_refs.py``) for ``bench_paired.py --a M --b M``; with
``--reuse`` a seed-0 row without its prediction file is refitted (the reference models always
store theirs). One JSON record per dataset x model x parameter variant is appended to
``benchmarks/results/quality.jsonl``; ``--reuse`` takes rows from there instead of refitting (the
reference models need not be rerun when tabsparse changes; tabsparse rows are matched by the
hash of all of its resolved parameters, so a changed default is a new variant).

Usage::

    python benchmarks/bench_quality.py                         # everything, writes the README
    python benchmarks/bench_quality.py --reuse                 # refit only what is not stored
    python benchmarks/bench_quality.py --models tabsparse --reuse \\
        --tabsparse-params '{"batch_size": 4096}' --no-write   # screen a candidate default
    python benchmarks/bench_quality.py --datasets adult letter --train-cap 20000
    python benchmarks/bench_quality.py --seeds 3 --reuse   # neural models: mean over 3 seeds
    # the strongest references, one worker, cheap tables first, 15 CPU minutes per fit at most
    python benchmarks/bench_quality.py --reuse --predictions --workers 1 --small-first \\
        --fit-cpu-limit 900 --models tabsparse hgb lightgbm xgboost catboost realmlp tabm
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")  # before numpy/torch/lightgbm load their pools
os.environ.setdefault("MKL_NUM_THREADS", "1")

# this script is the command line; the benchmark's parts are quality_tasks (tasks, splits),
# quality_fits (the model runners), quality_store (the stored rows), quality_report (the README
# section) and quality_best (the section on the best tabular models). The names imported
# ``as`` themselves are re-exported for the other benchmarks and the tests, which take them
# from here.
import argparse
import concurrent.futures as cf
import datetime as _dt
import json
import multiprocessing as mp
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import quality_best
from _readme import cpu_model, write_section
from quality_fits import _codes_frame as _codes_frame
from quality_fits import fit_hgb as fit_hgb
from quality_fits import fit_lightgbm as fit_lightgbm
from quality_fits import run_model
from quality_fits import score as score
from quality_refs import REFERENCES, prediction_path
from quality_refs import variant as variant_tag
from quality_report import (
    NOTES_FILE,
    _fmt_metric,
    checks,
    render,
    render_variants,
    summary,
    variants,
)
from quality_store import ADDED_CLASSIFIER_PARAMS as ADDED_CLASSIFIER_PARAMS
from quality_store import ADDED_PARAMS as ADDED_PARAMS
from quality_store import ADDED_REGRESSOR_PARAMS as ADDED_REGRESSOR_PARAMS
from quality_store import METRICS as METRICS
from quality_store import (
    RESULTS,
    _stored_predictions,
    find_stored,
    git_commit,
    load_results,
    mean_over_seeds,
    params_hash,
    resolved_tabsparse_params,
)
from quality_store import _completed as _completed
from quality_store import primary as primary
from quality_store import stored_seeds as stored_seeds
from quality_store import with_auto_resolved as with_auto_resolved
from quality_tasks import (
    ALL_MODELS,
    DATASETS,
    GBDTS,
    GBMS,
    MODELS,
    NEURAL,
    ROOT,
    SEED,
    TASK_BY_NAME,
    TASKS,
    TEST_CAP,
    TRAIN_CAP,
)
from quality_tasks import Split as Split
from quality_tasks import Task as Task
from quality_tasks import load_split as load_split

README = Path(__file__).resolve().parent / "README.md"
SECTION = "## Quality against gradient boosting and pytorch-tabnet"
TIMEOUTS = Path(__file__).resolve().parent / "results" / "quality_timeouts.jsonl"


# ---- main ----------------------------------------------------------------------------------
def _import_from(folder: str) -> None:
    """Worker initialiser: ``import tabsparse`` finds the checkout at ``folder`` first."""
    sys.path.insert(0, folder)


def _timed_out(caps: tuple[int, int], limit: float | None) -> set[tuple[str, str, str, int]]:
    """(dataset, model, variant, seed) of the fits stored as ended by a CPU limit <= ``limit``."""
    if limit is None or not TIMEOUTS.exists():
        return set()
    out = set()
    for line in TIMEOUTS.read_text().splitlines():
        if line.strip():
            r = json.loads(line)
            if (r["train_cap"], r["test_cap"]) == caps and r["cpu_limit"] <= limit:
                out.add((r["dataset"], r["model"], r.get("variant", ""), r["seed"]))
    return out


Job = tuple[str, str, dict[str, Any], int, str | None]  # dataset, model, params, seed, npz path


def execute(
    jobs: list[Job],
    caps: tuple[int, int],
    workers: int,
    cpu_limit: float | None,
    tabsparse_from: str | None,
) -> Any:
    """Run the jobs in spawned worker processes; yields ``(job, record or exception)``.

    With ``cpu_limit`` the jobs run one at a time in the given order, and a fit that runs out of
    CPU time ends its worker (a fresh one takes the next job): its exception is a
    ``TimeoutError``."""
    ctx = mp.get_context("spawn")
    init = {"initializer": _import_from, "initargs": (tabsparse_from,)} if tabsparse_from else {}

    def submit(pool: cf.ProcessPoolExecutor, job: Job) -> cf.Future:
        n, m, p, seed, path = job
        return pool.submit(run_model, n, m, p, *caps, seed, False, path, cpu_limit)

    if cpu_limit is None:
        with cf.ProcessPoolExecutor(workers, mp_context=ctx, **init) as pool:
            futures = {submit(pool, job): job for job in jobs}
            for fut in cf.as_completed(futures):
                try:
                    yield futures[fut], fut.result()
                except Exception as exc:  # keep the other results
                    yield futures[fut], exc
        return
    pool: cf.ProcessPoolExecutor | None = None
    try:
        for job in jobs:
            if pool is None:
                pool = cf.ProcessPoolExecutor(1, mp_context=ctx, **init)
            started = time.perf_counter()
            try:
                yield job, submit(pool, job).result()
            except cf.process.BrokenProcessPool:
                pool.shutdown()
                pool = None
                # one thread cannot spend more CPU seconds than wall seconds: a worker that
                # ended sooner was killed for another reason
                if time.perf_counter() - started >= cpu_limit:
                    yield job, TimeoutError(f"worker ended: over {cpu_limit:.0f} CPU s")
                else:
                    yield job, RuntimeError("the worker process ended before its CPU limit")
            except Exception as exc:
                yield job, exc
    finally:
        if pool is not None:
            pool.shutdown()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", nargs="*", help="names (default: all found)")
    parser.add_argument(
        "--models",
        nargs="*",
        default=list(MODELS),
        choices=ALL_MODELS,
        help=f"models to fit (default: {' '.join(MODELS)}); the others' stored rows are shown",
    )
    parser.add_argument(
        "--tabsparse-params",
        default="{}",
        help="JSON dict (or a list of dicts: several variants in one pool) of tabsparse parameters",
    )
    parser.add_argument(
        "--reuse", action="store_true", help="take stored rows instead of refitting"
    )
    parser.add_argument("--train-cap", type=int, default=TRAIN_CAP)
    parser.add_argument("--test-cap", type=int, default=TEST_CAP)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--no-write", action="store_true", help="do not touch the README")
    parser.add_argument("--label", default="", help="free text stored with the tabsparse rows")
    parser.add_argument(
        "--variants", action="store_true", help="only print the stored tabsparse variants"
    )
    parser.add_argument("--caveat", default="", help="a sentence about the machine's load")
    parser.add_argument(
        "--seeds",
        type=int,
        default=1,
        help="fit tabsparse and pytorch-tabnet with random_state 0..N-1 (same split); "
        "the table shows the mean over the seeds",
    )
    parser.add_argument(
        "--predictions",
        action="store_true",
        help="store every fit's test predictions (results/predictions/); with --reuse, refit "
        "seed-0 rows whose predictions are not stored",
    )
    parser.add_argument(
        "--fit-cpu-limit",
        type=float,
        help="end a fit after this many CPU seconds (runs the fits one at a time)",
    )
    parser.add_argument(
        "--small-first",
        action="store_true",
        help="table by table from the cheapest (tabsparse's stored fit time) up: the "
        "gradient-boosted models and tabsparse; then RealMLP; then TabM; then pytorch-tabnet",
    )
    parser.add_argument(
        "--tabsparse-from",
        type=Path,
        help="import tabsparse from this checkout (e.g. /tmp/today) in every process",
    )
    parser.add_argument(
        "--best-only",
        action="store_true",
        help="write only the section on the best tabular models (not the pytorch-tabnet one)",
    )
    args = parser.parse_args(argv)
    tabsparse_from = str(args.tabsparse_from.resolve()) if args.tabsparse_from else None
    if tabsparse_from:
        sys.path.insert(0, tabsparse_from)
    ts_given = json.loads(args.tabsparse_params)
    # a list screens several variants in one pool (the table shows the first)
    ts_variants = ts_given if isinstance(ts_given, list) else [ts_given]
    ts_params = {k: v for k, v in ts_variants[0].items() if k != "_datasets"}
    caps = (args.train_cap, args.test_cap)

    names = []
    for task in TASKS:
        if args.datasets and task.dataset not in args.datasets:
            continue
        if task.skip:
            print(f"skip {task.dataset}: {task.skip}")
            continue
        if not (DATASETS / task.dataset / f"{task.dataset}.csv.gz").exists():
            print(f"skip {task.dataset}: not found under {DATASETS}")
            continue
        names.append(task.dataset)

    stored = load_results()
    if args.variants:
        found = variants(stored, names)
        print(render_variants(found))
        for v in found:
            print(f"\n{v['caps']} {v['params']}")
            for n, rows in v["by_dataset"].items():
                c = checks(rows)
                gap = "—" if c["gap"] is None else f"{100 * c['gap']:+.2f}"
                print(f"  {n:28s} {_fmt_metric(rows['tabsparse']):18s} gap {gap}")
        return
    if args.seeds < 1:
        parser.error(f"--seeds {args.seeds} must be >= 1")
    commit = git_commit(Path(tabsparse_from) if tabsparse_from else ROOT)
    timed_out = _timed_out(caps, args.fit_cpu_limit)
    # the rows of the table: dataset -> model -> seed -> row (GBMs: seed 0 only)
    by_seed: dict[str, dict[str, dict[int, dict[str, Any]]]] = {n: {} for n in names}
    jobs: list[Job] = []
    for n in names:
        kind = TASK_BY_NAME[n].kind
        for m in ALL_MODELS:
            run_it = m in args.models
            for k, given in enumerate(ts_variants if m == "tabsparse" else [{}]):
                only = given.get("_datasets")  # screening: this variant on these datasets only
                if only is not None and n not in only:
                    continue
                params = {key: v for key, v in given.items() if key != "_datasets"}
                if m == "tabsparse":
                    tag = variant_tag(resolved_tabsparse_params(kind, params))
                else:
                    tag = variant_tag(params) if params else ""
                for seed in range(args.seeds) if m in NEURAL else [SEED]:
                    path = prediction_path(n, m, seed, tag)
                    save = run_it and (args.predictions or m in REFERENCES)
                    stored_row = (
                        find_stored(stored, n, m, params, caps, seed)
                        if (args.reuse or not run_it)
                        else None
                    )
                    if (
                        stored_row is not None
                        and run_it
                        and save
                        and seed == SEED
                        and not path.exists()
                        and not _stored_predictions(stored_row, path)
                    ):
                        stored_row = None  # refit for the predictions
                    if stored_row is not None and k == 0:
                        by_seed[n].setdefault(m, {})[seed] = stored_row
                    elif stored_row is None and run_it:
                        if (n, m, tag, seed) in timed_out:
                            print(f"skip {n} {m} seed {seed}: over the CPU limit before")
                            continue
                        jobs.append((n, m, params, seed, str(path) if save else None))
    size = {n: (DATASETS / n / f"{n}.csv.gz").stat().st_size for n in names}
    if args.small_first:
        # a table's cost: tabsparse's stored fit seconds there (else its file size)
        cost = {}
        for n in names:
            fits = [r["fit_s"] for r in stored if (r["dataset"], r["model"]) == (n, "tabsparse")]
            cost[n] = float(np.median(fits)) if fits else size[n] / 1e4
        tier = {**dict.fromkeys((*GBDTS, "tabsparse"), 0), "realmlp": 1, "tabm": 2}
        order = {m: i for i, m in enumerate(ALL_MODELS)}
        jobs.sort(key=lambda j: (tier.get(j[1], 2), cost[j[0]], order[j[1]], j[3]))
    else:  # longest first: the neural networks on the biggest training sets
        jobs.sort(key=lambda j: (j[1] in GBMS or j[1] in GBDTS, -size[j[0]], j[3]))
    workers = 1 if args.fit_cpu_limit is not None else args.workers
    print(
        f"{len(jobs)} fits on {workers} workers; "
        f"{sum(len(per) for v in by_seed.values() for per in v.values())} reused"
    )
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    for (n, m, p, seed, path), rec in execute(
        jobs, caps, workers, args.fit_cpu_limit, tabsparse_from
    ):
        if isinstance(rec, Exception):
            print(f"FAILED {n} {m} seed {seed}: {type(rec).__name__}: {rec}", flush=True)
            if isinstance(rec, TimeoutError):
                tag = Path(path).stem.rsplit("-seed", 1)[0][len(m) + 1 :] if path else ""
                note = {"dataset": n, "model": m, "variant": tag, "seed": seed}
                note.update(cpu_limit=args.fit_cpu_limit, train_cap=caps[0], test_cap=caps[1])
                note.update(time=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"))
                with TIMEOUTS.open("a") as fh:
                    fh.write(json.dumps(note) + "\n")
            continue
        rec.update(
            params=p,
            train_cap=caps[0],
            test_cap=caps[1],
            commit=commit,
            time=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            cpu=cpu_model(),
        )
        if m == "tabsparse":
            rec["params_hash"] = params_hash(rec["tabsparse_params"])
            rec["label"] = args.label
        with RESULTS.open("a") as fh:
            fh.write(json.dumps(rec) + "\n")
        if p == ts_params or m != "tabsparse":
            by_seed[n].setdefault(m, {})[seed] = rec
        metric = (
            f"rmse {rec['rmse']:.4g}"
            if "rmse" in rec
            else f"acc {rec['accuracy']:.4f} auc {rec['auc']:.4f}"
        )
        tag = f"{m} s{seed}" if m in NEURAL else m
        print(
            f"{n:28s} {tag:18s} {metric}  fit {rec['fit_s']:.1f}s ({rec['fit_cpu_s']:.1f} CPU s)",
            flush=True,
        )

    by_dataset = {
        n: {m: mean_over_seeds([per[s] for s in sorted(per)]) for m, per in by_seed[n].items()}
        for n in names
        if by_seed[n]
    }
    print()
    for n, rows in by_dataset.items():
        c = checks(rows)
        cells = "  ".join(f"{m}={_fmt_metric(rows.get(m))}" for m in ALL_MODELS if m in rows)
        print(f"{n:28s} {cells}  T={c['vs_tabnet']} G={c['vs_gbm']}")
    s = summary(by_dataset)
    print(
        f"\nT {s['vs_tabnet'][0]}/{s['vs_tabnet'][1]}  G {s['vs_gbm'][0]}/{s['vs_gbm'][1]}  "
        f"mean acc gap {100 * s['mean_acc_gap']:.2f} pts  "
        f"mean rmse excess {100 * s['mean_rmse_excess']:.1f}%  "
        f"tabsparse fit {s['tabsparse_fit_s']:.0f}s"
    )
    if not args.no_write and not args.best_only:
        notes = NOTES_FILE.read_text() if NOTES_FILE.exists() else ""
        table = render_variants(variants(load_results(), names))
        notes = notes.replace("<!-- variants -->", table)
        write_section(
            README,
            SECTION,
            render(
                by_dataset,
                caps,
                args.workers,
                ts_params,
                notes,
                caveat=args.caveat and " " + args.caveat,
                seeds=args.seeds,
            ),
        )
        print(f"wrote {SECTION!r} in {README}")
    if not args.no_write:
        if any(m in rows for rows in by_dataset.values() for m in REFERENCES):
            ts_tag = {
                k: variant_tag(resolved_tabsparse_params(k, ts_params))
                for k in ("binary", "multiclass", "regression")
            }
            body = quality_best.render(by_dataset, caps, ts_tag, commit)
            write_section(README, quality_best.SECTION, body)
            print(f"wrote {quality_best.SECTION!r} in {README}")


if __name__ == "__main__":
    main()
