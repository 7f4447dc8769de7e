"""Whole-fit, predict and explain speed of tabsparse against pytorch-tabnet, same model.

Both libraries train the same TabNet (n_d = n_a = 8, 3 steps, gamma 1.3, 2 shared + 2
step-specific GLU layers, sparsemax masks, lambda_sparse 1e-3, the batch norms' running
statistics averaged over the same horizon: momentum 0.02 per virtual batch, see
``TABSPARSE_MOMENTUM``) with the same optimiser (Adam, learning rate 0.02, no schedule,
gradient norm clipped at 1), batch size 1024, virtual batch size 128 and number of epochs, on
the same rows (covtype_50k_sample: 54 numeric features, 7 classes; an 80/20 split with seed 0;
standardised with the training rows' statistics), without a validation set or early stopping.

Every measurement runs in a fresh worker process (so that its peak memory is its own), and the
workers of the two libraries alternate (interleaved repeats). Each worker reports:

* ``fit_s`` — wall time of ``fit(X, y)`` as a user sees it (pytorch-tabnet includes the
  feature importances it computes at the end of every fit; tabsparse computes them too);
* ``predict_rows_s`` / ``explain_rows_s`` — rows per second of ``predict_proba`` / ``explain``
  over the training rows;
* ``accuracy`` on the held-out rows;
* ``rss_peak_mb`` — peak resident memory of the worker, and ``rss_base_mb`` after imports and
  loading the data.

Usage::

    python benchmarks/bench_speed.py                    # 1 and 2 threads, 3 repeats, README
    python benchmarks/bench_speed.py --repeats 1 --threads 1 --no-write
    # before/after a change: the same run also times the code checked out at DIR
    python benchmarks/bench_speed.py --baseline DIR --rows 15000 --epochs 20 --no-write
    # on a busy machine: time with the worker's CPU time instead of the wall clock
    python benchmarks/bench_speed.py --threads 1 --cpu-time --no-write
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as _dt
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
README = HERE / "README.md"
RESULTS = HERE / "results" / "speed.jsonl"
SECTION = "## Speed against pytorch-tabnet"
LIBRARIES = ("tabsparse", "pytorch-tabnet")
#: tabsparse as checked out at ``--baseline DIR`` (imported through PYTHONPATH=DIR)
BASELINE = "tabsparse@baseline"
ARCH = {"n_d": 8, "n_a": 8, "n_steps": 3, "gamma": 1.3, "n_independent": 2, "n_shared": 2}
TRAIN = {"lambda_sparse": 1e-3, "batch_size": 1024, "virtual_batch_size": 128}
#: pytorch-tabnet's batch-norm momentum: its ghost batch norm updates the running statistics once
#: per virtual batch (8 times per 1024-row batch)
PTAB_MOMENTUM = 0.02
#: tabsparse updates them once per batch (from all its virtual batches at once): the same
#: averaging horizon is 1 - (1 - 0.02) ** 8 = 0.149. With 0.02 per batch its statistics would
#: average over 8x as many steps, lag the weights, and make the 8-epoch accuracy a lottery
#: (10 seeds: mean 0.718, range 0.687-0.737, against 0.729, range 0.700-0.742, with 0.149;
#: pytorch-tabnet: 0.723, range 0.716-0.737)
TABSPARSE_MOMENTUM = 1 - (1 - PTAB_MOMENTUM) ** (TRAIN["batch_size"] / TRAIN["virtual_batch_size"])
LEARNING_RATE = 0.02


def datasets_dir() -> Path:
    return Path(os.environ.get("TABSPARSE_DATASETS", HERE.parents[1] / "shared" / "datasets"))


def load_data(
    rows: int | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, str]:
    """covtype_50k_sample (or synthetic rows of the same shape when it is absent); ``rows``
    keeps only the first ``rows`` training rows of the split."""
    path = datasets_dir() / "covtype_50k_sample" / "covtype_50k_sample.csv.gz"
    rng = np.random.default_rng(0)
    if path.exists():
        import pandas as pd

        frame = pd.read_csv(path)
        y = frame.pop("Cover_Type").to_numpy()
        X = frame.to_numpy(np.float32)
        name = "covtype_50k_sample"
    else:  # pragma: no cover - without ../shared
        X = rng.normal(size=(50_000, 54)).astype(np.float32)
        y = (X[:, :3].sum(axis=1) > 0).astype(np.int64)
        name = "synthetic 50,000 x 54"
    perm = rng.permutation(len(y))
    cut = int(0.8 * len(y))
    tr, te = perm[:cut], perm[cut:]
    if rows is not None:
        tr = tr[:rows]
    # standardised with the training rows' statistics for both libraries: pytorch-tabnet has no
    # input scaling of its own and trains badly on covtype's raw scales (elevation ~3000)
    mean, std = X[tr].mean(axis=0), X[tr].std(axis=0) + 1e-6
    X = ((X - mean) / std).astype(np.float32)
    return X[tr], y[tr], X[te], y[te], name


def rss_mb() -> float:
    """Current resident memory of this process (MB)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1e6


def _like_pytorch_tabnet(model: Any) -> None:
    """Give ``model`` pytorch-tabnet's batch-norm horizon and constant learning rate: fixed
    choices of the estimators (``tabsparse.estimators._fixed``), parameters of a baseline
    checked out from before they were fixed."""
    training = {"momentum": TABSPARSE_MOMENTUM, "lr_schedule": "constant"}
    if "momentum" in model.get_params():
        model.set_params(**training)
    else:
        model._fixed = dataclasses.replace(model._fixed, **training)


def worker(
    library: str,
    threads: int,
    epochs: int,
    device: str = "cpu",
    seed: int = 0,
    rows: int | None = None,
) -> dict[str, Any]:
    """One measurement in this (fresh) process; ``seed`` seeds the model (the split is fixed)."""
    import torch

    torch.set_num_threads(threads)
    X, y, X_test, y_test, _ = load_data(rows)
    if library in ("tabsparse", BASELINE):
        from tabsparse import TabNetClassifier

        model: Any = TabNetClassifier(
            **ARCH,
            **TRAIN,
            max_epochs=epochs,
            learning_rate=LEARNING_RATE,
            early_stopping=False,
            device=device,
            random_state=seed,
        )
        _like_pytorch_tabnet(model)
        fit = lambda: model.fit(X, y)  # noqa: E731
        explain = lambda rows: model.explain(rows)  # noqa: E731
    else:
        from pytorch_tabnet.tab_model import TabNetClassifier as PTTabNetClassifier

        model = PTTabNetClassifier(
            **ARCH,
            momentum=PTAB_MOMENTUM,
            lambda_sparse=TRAIN["lambda_sparse"],
            optimizer_params={"lr": LEARNING_RATE},
            clip_value=1,
            seed=seed,
            verbose=0,
            device_name=device,
        )
        fit = lambda: model.fit(  # noqa: E731
            X,
            y,
            max_epochs=epochs,
            patience=0,
            batch_size=TRAIN["batch_size"],
            virtual_batch_size=TRAIN["virtual_batch_size"],
            drop_last=False,
        )
        explain = lambda rows: model.explain(rows)  # noqa: E731
    base = rss_mb()
    # --cpu-time: the process's CPU time (with one thread, the work done; other load on a busy
    # machine adds wall time, not CPU time)
    clock = time.process_time if os.environ.get("BENCH_CLOCK") == "cpu" else time.perf_counter
    t0 = clock()
    fit()
    fit_s = clock() - t0
    t0 = clock()
    model.predict_proba(X)
    predict_s = clock() - t0
    t0 = clock()
    explain(X)
    explain_s = clock() - t0
    accuracy = float(np.mean(model.predict(X_test).astype(y_test.dtype) == y_test))
    gpu_mb = torch.cuda.max_memory_allocated() / 1e6 if device == "cuda" else None
    return {
        "library": library,
        "device": device,
        "gpu_peak_mb": gpu_mb,
        "threads": threads,
        "epochs": epochs,
        "seed": seed,
        "rows": len(y),
        "clock": "cpu" if clock is time.process_time else "wall",
        "fit_s": fit_s,
        "predict_rows_s": len(y) / predict_s,
        "explain_rows_s": len(y) / explain_s,
        "accuracy": accuracy,
        "rss_base_mb": base,
        "rss_peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e3,
    }


def run_worker(
    library: str,
    threads: int,
    epochs: int,
    device: str,
    seed: int,
    rows: int | None = None,
    baseline: Path | None = None,
) -> dict[str, Any]:
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
    env["PYTHONWARNINGS"] = "ignore"
    if library == BASELINE:
        assert baseline is not None
        env["PYTHONPATH"] = str(baseline)
    cmd = [sys.executable, __file__, "--worker", library, "--threads", str(threads)]
    cmd += ["--epochs", str(epochs), "--device", device, "--seed", str(seed)]
    if rows is not None:
        cmd += ["--rows", str(rows)]
    out = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def summarise(records: list[dict[str, Any]]) -> tuple[list[str], list[str]]:
    """Markdown table rows and the verdict lines.

    Times, throughputs and memory are the median of the repeats; accuracy is the mean over them
    (each repeat seeds both models with its own seed, so the mean is over seeds: a single seed's
    8-epoch accuracy moves by about a point with rounding alone).
    """
    rows, verdict = [], []
    libraries = [lib for lib in (*LIBRARIES, BASELINE) if any(r["library"] == lib for r in records)]
    for threads in sorted({r["threads"] for r in records}):
        stats: dict[str, dict[str, float]] = {}
        for lib in libraries:
            mine = [r for r in records if r["library"] == lib and r["threads"] == threads]
            keys = ("fit_s", "predict_rows_s", "explain_rows_s", "rss_peak_mb")
            m = stats[lib] = {k: statistics.median(r[k] for r in mine) for k in keys}
            accuracies = [r["accuracy"] for r in mine]
            m["accuracy"] = statistics.mean(accuracies)
            m["acc_range"] = max(accuracies) - min(accuracies)
            rows.append(
                f"| {threads} | {lib} | {m['fit_s']:.1f} | {m['predict_rows_s']:,.0f} | "
                f"{m['explain_rows_s']:,.0f} | {m['accuracy']:.4f} (±{m['acc_range']:.4f}) | "
                f"{m['rss_peak_mb']:,.0f} |"
            )
        a, b = stats["tabsparse"], stats["pytorch-tabnet"]
        verdict.append(
            f"- {threads} thread(s): fit **{b['fit_s'] / a['fit_s']:.2f}x** faster "
            f"(target 3x), predict **{a['predict_rows_s'] / b['predict_rows_s']:.1f}x** and "
            f"explain **{a['explain_rows_s'] / b['explain_rows_s']:.1f}x** (targets 5x), "
            f"mean accuracy {a['accuracy']:.4f} vs {b['accuracy']:.4f}, peak memory "
            f"{a['rss_peak_mb']:,.0f} vs {b['rss_peak_mb']:,.0f} MB."
        )
        if BASELINE in stats:
            c = stats[BASELINE]
            verdict.append(
                f"- {threads} thread(s), baseline code: fit **{b['fit_s'] / c['fit_s']:.2f}x**, "
                f"predict **{c['predict_rows_s'] / b['predict_rows_s']:.1f}x**, explain "
                f"**{c['explain_rows_s'] / b['explain_rows_s']:.1f}x** against pytorch-tabnet; "
                f"this code / baseline: fit time {a['fit_s'] / c['fit_s']:.3f}, predict "
                f"throughput {a['predict_rows_s'] / c['predict_rows_s']:.3f}, explain "
                f"{a['explain_rows_s'] / c['explain_rows_s']:.3f}."
            )
    return rows, verdict


def history(path: Path, device: str, last: int = 6) -> list[str]:
    """One line per stored run on ``device`` (the latest ``last``): its date and the fit ratio
    (median pytorch-tabnet fit time over median tabsparse fit time) per thread count."""
    runs: dict[str, list[dict[str, Any]]] = {}
    for line in path.read_text().splitlines() if path.exists() else []:
        record = json.loads(line)
        if record.get("device", "cpu") == device and "date" in record:
            runs.setdefault(record["date"], []).append(record)
    lines = []
    for date, records in sorted(runs.items())[-last:]:
        ratios = []
        for threads in sorted({r["threads"] for r in records}):
            fit = {
                lib: [
                    r["fit_s"] for r in records if r["library"] == lib and r["threads"] == threads
                ]
                for lib in LIBRARIES
            }
            if all(fit.values()):
                ratio = statistics.median(fit["pytorch-tabnet"]) / statistics.median(
                    fit["tabsparse"]
                )
                ratios.append(f"{ratio:.2f}x ({threads} thread{'s' if threads > 1 else ''})")
        if ratios:
            lines.append(f"- {date}: " + ", ".join(ratios))
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--epochs", type=int, default=8)
    parser.add_argument("--device", default="cpu", help="cpu or cuda")
    parser.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--readme", type=Path, default=README, help="file the table goes to")
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument("--rows", type=int, help="keep only this many training rows")
    parser.add_argument(
        "--baseline", type=Path, help="also time the tabsparse checked out at this folder"
    )
    parser.add_argument(
        "--cpu-time", action="store_true", help="time with CPU time (one thread, busy machine)"
    )
    parser.add_argument("--worker", choices=(*LIBRARIES, BASELINE), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.cpu_time:
        os.environ["BENCH_CLOCK"] = "cpu"  # read by the workers
    if args.worker:
        threads = args.threads[0]
        record = worker(args.worker, threads, args.epochs, args.device, args.seed, args.rows)
        print(json.dumps(record))
        return
    sys.path.insert(0, str(HERE))
    from _readme import cpu_model, load_average, write_section

    records = []
    load_before = load_average()
    libraries = (*LIBRARIES, BASELINE) if args.baseline else LIBRARIES
    for rep in range(args.repeats):
        for threads in args.threads:
            for lib in libraries if rep % 2 == 0 else libraries[::-1]:
                rec = run_worker(
                    lib, threads, args.epochs, args.device, rep, args.rows, args.baseline
                )
                rec["repeat"] = rep
                records.append(rec)
                print(json.dumps(rec), flush=True)
    rows, verdict = summarise(records)
    print("\n".join(rows + verdict))
    if args.no_write:
        return
    import torch

    stamp = _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    where = (
        f"{torch.cuda.get_device_name(0)} (CUDA)"
        if args.device == "cuda"
        else f"{cpu_model()}, {os.cpu_count()} cores"
    )
    machine = (
        f"{where}, torch {torch.__version__}, Python {platform.python_version()}; one-minute "
        f"load average {load_before} before the run and {load_average()} after"
    )
    RESULTS.parent.mkdir(exist_ok=True)
    with RESULTS.open("a") as f:
        for rec in records:
            f.write(json.dumps({"date": stamp, "machine": machine, **rec}) + "\n")
    _, _, _, _, name = load_data()
    body = render(records, stamp, machine, args.device, name)
    section = SECTION if args.device == "cpu" else f"{SECTION} (GPU)"
    write_section(args.readme, section, body)


def render(records: list[dict[str, Any]], stamp: str, machine: str, device: str, name: str) -> str:
    """The README section body for one run's ``records`` (and the stored runs' fit ratios)."""
    rows, verdict = summarise(records)
    repeats = len({r.get("repeat", r.get("seed")) for r in records})
    return "\n".join(
        [
            f"`python benchmarks/bench_speed.py --device {device}` — {stamp}; machine: "
            f"{machine} (the machine is shared: the two libraries alternate, so compare ratios).",
            "",
            f"{name}, {records[0]['rows']:,} training rows, {records[0]['epochs']} epochs, the "
            "same TabNet in both (n_d = n_a = 8, 3 steps, batch 1024, virtual batch 128, Adam "
            "0.02, no schedule, no validation; batch-norm statistics averaged over the same "
            "horizon: momentum 0.02 per virtual batch in pytorch-tabnet, "
            f"{TABSPARSE_MOMENTUM:.3f} per batch in tabsparse, which updates them once per "
            f"batch). Times, throughputs and memory: median of {repeats} fresh processes per "
            "cell; predict and explain run over the training rows. Repeat r seeds both models "
            "with `random_state` r (the split stays the same): accuracy is the mean over the "
            "seeds, (±) the range max − min.",
            "",
            "| threads | library | fit (s) | predict (rows/s) | explain (rows/s) | accuracy "
            "| peak RSS (MB) |",
            "|---:|---|---:|---:|---:|---:|---:|",
            *rows,
            "",
            *verdict,
            "",
            "The fit ratios of the latest stored runs (every run's rows are in "
            "`results/speed.jsonl`; each ran the code of its day, some on other machines):",
            "",
            *history(RESULTS, device),
            "",
            "tabsparse trains small batches on one thread whatever the setting (see the user "
            "guide, *Speed and threads*), so its 2-thread figures equal its 1-thread ones; "
            "compare 2-thread runs only on an otherwise idle machine.",
            "",
        ]
    )


def readme_section(path: Path = RESULTS, device: str = "cpu") -> str:
    """The section body from the latest run stored in ``path`` (no fits)."""
    runs: dict[str, list[dict[str, Any]]] = {}
    for line in path.read_text().splitlines():
        if line.strip():
            record = json.loads(line)
            if record.get("device", "cpu") == device and "date" in record:
                runs.setdefault(record["date"], []).append(record)
    stamp = max(runs)  # the dates sort as text; rows added by hand may come later
    records = runs[stamp]
    machine = records[0].get("machine", "not recorded in `results/speed.jsonl`")
    return render(records, stamp, machine, device, "covtype_50k_sample")


if __name__ == "__main__":
    main()
