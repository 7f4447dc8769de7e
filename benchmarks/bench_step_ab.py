"""Training-step, predict and explain speed of the network: this checkout against another, and
the one-node encoder step against autograd over the functional code.

The network is the speed benchmark's TabNet (54 numeric columns, 7 classes, n_d = n_a = 8, 3
steps, virtual batch 128) on random rows, one thread. ``step_ms`` is one training step
(forward with ``with_masks=False``, cross-entropy plus 1e-3 times the sparsity loss, backward,
gradient clipping at 1 and the library's AdamW, or torch's Adam where a checkout has none) of a
1,024-row batch; ``predict_us`` / ``explain_us`` are microseconds per 1,000 rows of the eval
network over 16,384 rows (explain: masks spread over columns and per-row importances). Times
are the thread's CPU time (one thread), the fastest of several timed chunks per worker (other
load on the machine only adds time); the table shows the medians over workers.

Modes::

    python benchmarks/bench_step_ab.py --baseline /tmp/baseline --repeats 7
        alternating worker processes, PYTHONPATH=DIR (old) and this checkout (new); medians
    python benchmarks/bench_step_ab.py --node
        one process: steps with and without the one-node encoder (EncoderStep), interleaved
    python benchmarks/bench_step_ab.py --baseline /tmp/baseline --fit --repeats 3
        the small-table check: a default-width TabNetClassifier fitted for 20 epochs on
        15,000 rows of bench_speed's covtype sample (54 numeric columns, 7 classes); process
        CPU seconds of fit, predict_proba and explain over the training rows
    python benchmarks/bench_step_ab.py --baseline /tmp/baseline --same-process --repeats 30
        both checkouts in ONE process (the baseline's package copied to a temporary folder as
        ``tabsparse_base``, its imports renamed), the estimators' fit (5 epochs on the
        small table), predict_proba and explain called alternately: both sides see the same
        machine load within milliseconds, so the ratio stays measurable on a busy machine.
        Prints the median ratio new / old with a bootstrap 95% interval. (A baseline that
        registers global torch hooks on import affects both sides' module construction.)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def _network():  # type: ignore[no-untyped-def]
    import torch

    from tabsparse.nn import TabNet

    torch.manual_seed(0)
    return TabNet(
        numeric_columns=list(range(54)),
        categorical_columns=[],
        numeric_mean=[0.0] * 54,
        numeric_std=[1.0] * 54,
        cardinalities=[],
        n_outputs=7,
        n_d=8,
        n_a=8,
        n_steps=3,
        virtual_batch_size=128,
        momentum=0.149,
    )


def _optimizer(net):  # type: ignore[no-untyped-def]
    import torch

    try:
        from tabsparse.optim import AdamW

        return AdamW(list(net.parameters()), lr=0.02, weight_decay=0.0)
    except (ImportError, TypeError):  # pragma: no cover - other checkouts
        return torch.optim.Adam(net.parameters(), lr=0.02)


def _stepper(net, opt):  # type: ignore[no-untyped-def]
    import torch

    g = torch.Generator().manual_seed(1)
    x = torch.randn(1024, 54, generator=g)
    codes = torch.zeros(1024, 0, dtype=torch.int64)
    y = torch.randint(0, 7, (1024,), generator=g)
    params = list(net.parameters())

    def step() -> None:
        out = net(x, codes, with_masks=False)
        loss = torch.nn.functional.cross_entropy(out.logits, y) + 1e-3 * out.sparsity_loss
        opt.zero_grad()
        loss.backward()
        if hasattr(opt, "clip_grad_norm_"):
            opt.clip_grad_norm_(1.0)
        else:
            torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()

    return step


def _time(fn, reps: int) -> float:  # type: ignore[no-untyped-def]
    """Seconds of this thread's CPU time per call: on a shared machine wall time mostly
    measures the other processes (one thread: CPU time is the work done)."""
    start = time.thread_time()
    for _ in range(reps):
        fn()
    return (time.thread_time() - start) / reps


def worker(steps: int) -> dict[str, float]:
    import torch

    torch.set_num_threads(1)
    net = _network().train()
    step = _stepper(net, _optimizer(net))
    for _ in range(20):
        step()
    # the fastest of several chunks: the machine's other load only ever adds time
    step_s = min(_time(step, max(1, steps // 10)) for _ in range(10))
    net.eval()
    x = torch.randn(16384, 54, generator=torch.Generator().manual_seed(2))
    codes = torch.zeros(16384, 0, dtype=torch.int64)

    @torch.inference_mode()
    def predict() -> None:
        torch.softmax(net(x, codes, with_masks=False).logits, dim=1)

    @torch.inference_mode()
    def explain() -> None:
        out = net(x, codes)
        net.column_masks(out.masks)
        net.importances(out.masks, out.step_importance)

    predict()
    explain()
    predict_s = min(_time(predict, 1) for _ in range(7))
    explain_s = min(_time(explain, 1) for _ in range(7))
    return {
        "step_ms": step_s * 1e3,
        "predict_us": predict_s / 16.384 * 1e6,
        "explain_us": explain_s / 16.384 * 1e6,
    }


def fit_worker() -> dict[str, float]:
    import numpy as np
    import torch

    sys.path.insert(0, str(HERE))
    from bench_speed import load_data

    from tabsparse import TabNetClassifier

    torch.set_num_threads(1)
    X, y, _, _, _ = load_data(15000)
    model = TabNetClassifier(max_epochs=20, random_state=0)
    start = time.process_time()
    model.fit(X, y)
    fit_s = time.process_time() - start
    start = time.process_time()
    proba = model.predict_proba(X)
    predict_s = time.process_time() - start
    start = time.process_time()
    model.explain(X)
    explain_s = time.process_time() - start
    return {
        "fit_s": fit_s,
        "predict_s": predict_s,
        "explain_s": explain_s,
        "proba_sum": float(np.asarray(proba, dtype=np.float64)[:, 0].sum()),
    }


def _renamed_copy(checkout: Path, name: str) -> Path:
    """``checkout/tabsparse`` copied to a temporary folder as package ``name``, every import of
    ``tabsparse`` in it renamed; returns the folder to put on ``sys.path``."""
    import re
    import shutil
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="tabsparse_ab_"))
    shutil.copytree(checkout / "tabsparse", folder / name, ignore=shutil.ignore_patterns("*.pyc"))
    pattern = re.compile(r"\btabsparse(?=\.|\s+import\b|\s*$)", re.MULTILINE)
    for path in (folder / name).rglob("*.py"):
        text = path.read_text()
        text = pattern.sub(name, text).replace('"tabsparse.', f'"{name}.')
        path.write_text(text)
    return folder


def same_process_ab(
    baseline: Path,
    repeats: int,
    rows: int = 15000,
    new_params: dict[str, Any] | None = None,
    both_params: dict[str, Any] | None = None,
) -> dict[str, tuple[float, float, float]]:
    """Median ratio new / old (with a bootstrap 95% interval) of fit, predict_proba and explain
    on the small table, the two checkouts' estimators called alternately in this process;
    ``new_params`` go to this checkout's estimator only (e.g. ``{"n_members": 1}``: the same
    network as a checkout from before the parameter), ``both_params`` to both."""
    import importlib

    import numpy as np
    import torch

    torch.set_num_threads(1)
    sys.path.insert(0, str(_renamed_copy(baseline, "tabsparse_base")))
    sys.path.insert(0, str(HERE))
    from bench_speed import load_data

    X, y, _, _, _ = load_data(rows)
    X = np.ascontiguousarray(X, dtype=np.float32)
    classes = {
        "old": importlib.import_module("tabsparse_base").TabNetClassifier,
        "new": importlib.import_module("tabsparse").TabNetClassifier,
    }
    base = {"max_epochs": 5, "early_stopping": False, "random_state": 0, **(both_params or {})}
    params = {"old": base, "new": {**base, **(new_params or {})}}
    models = {side: cls(**params[side]).fit(X, y) for side, cls in classes.items()}

    def timed(side: str, job: str) -> float:
        start = time.thread_time()
        if job == "fit":
            classes[side](**params[side]).fit(X, y)
        else:
            getattr(models[side], job)(X)
        return time.thread_time() - start

    rng = np.random.default_rng(0)
    result = {}
    jobs = (("fit", max(8, repeats // 2)), ("predict_proba", repeats), ("explain", repeats))
    for job, reps in jobs:
        timed("old", job), timed("new", job)
        ratios = []
        for i in range(reps):  # alternate which side goes first
            first, second = ("old", "new") if i % 2 else ("new", "old")
            t = {first: timed(first, job), second: timed(second, job)}
            ratios.append(t["new"] / t["old"])
        r = np.asarray(ratios)
        boot = np.median(rng.choice(r, size=(2000, len(r))), axis=1)
        result[job] = (
            float(np.median(r)),
            float(np.percentile(boot, 2.5)),
            float(np.percentile(boot, 97.5)),
        )
    return result


def node_ab(rounds: int, steps: int) -> dict[str, float]:
    """Steps with the one-node encoder against the modules (autograd over the functional code),
    interleaved in this process."""
    import torch

    torch.set_num_threads(1)
    nets = {"node": _network().train(), "autograd": _network().train()}
    nets["autograd"].encoder._plan = lambda x: None  # type: ignore[method-assign]
    steppers = {name: _stepper(net, _optimizer(net)) for name, net in nets.items()}
    for fn in steppers.values():
        for _ in range(20):
            fn()
    times: dict[str, list[float]] = {name: [] for name in steppers}
    for _ in range(rounds):
        for name, fn in steppers.items():
            times[name].append(_time(fn, steps) * 1e3)
    return {f"{name}_step_ms": statistics.median(t) for name, t in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--baseline", type=Path, help="checkout to compare against")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--rows", type=int, default=15000, help="--same-process: table rows")
    parser.add_argument("--node", action="store_true", help="one-node step against autograd")
    parser.add_argument("--fit", action="store_true", help="the small-table fit check")
    parser.add_argument(
        "--same-process", action="store_true", help="both checkouts in one process (--baseline)"
    )
    parser.add_argument(
        "--new-params",
        type=json.loads,
        default={},
        help="--same-process: JSON parameters for this checkout's estimator only",
    )
    parser.add_argument(
        "--params",
        type=json.loads,
        default={},
        help="--same-process: JSON parameters for both checkouts' estimators",
    )
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.same_process:
        if args.baseline is None:
            parser.error("--same-process needs --baseline")
        print(f"{'new / old':>14} {'median':>8} {'95% interval':>18}")
        ratios = same_process_ab(
            args.baseline, args.repeats, args.rows, args.new_params, args.params
        )
        for job, (median, low, high) in ratios.items():
            print(f"{job:>14} {median:8.3f}    [{low:.3f}, {high:.3f}]")
        return
    if args.worker:
        print(json.dumps(fit_worker() if args.fit else worker(args.steps)))
        return
    if args.node:
        result = node_ab(args.repeats * 4, args.steps)
        for name, value in result.items():
            print(f"{name:>20} {value:8.3f}")
        ratio = result["autograd_step_ms"] / result["node_step_ms"]
        print(f"{'autograd / node':>20} {ratio:8.3f}")
        return
    sides = {"new": str(ROOT)}
    if args.baseline is not None:
        sides = {"old": str(args.baseline.resolve()), **sides}
    results: dict[str, list[dict[str, float]]] = {side: [] for side in sides}
    for _ in range(args.repeats):
        for side, path in sides.items():
            env = {**os.environ, "PYTHONPATH": path, "OMP_NUM_THREADS": "1"}
            out = subprocess.run(
                [
                    sys.executable,
                    __file__,
                    "--worker",
                    "--steps",
                    str(args.steps),
                    *(["--fit"] if args.fit else []),
                ],
                env=env,
                cwd=path,
                capture_output=True,
                text=True,
                check=True,
            )
            results[side].append(json.loads(out.stdout.strip().splitlines()[-1]))
    keys = (
        ("fit_s", "predict_s", "explain_s") if args.fit else ("step_ms", "predict_us", "explain_us")
    )
    print(f"{'':>12}" + "".join(f"{k:>14}" for k in keys))
    medians = {}
    for side, runs in results.items():
        medians[side] = {k: statistics.median(r[k] for r in runs) for k in keys}
        print(f"{side:>12}" + "".join(f"{medians[side][k]:14.3f}" for k in keys))
    if args.fit:  # the same fit on both sides: predictions equal to rounding
        for side, runs in results.items():
            print(f"{side:>12} sum of P(class 0): {runs[0]['proba_sum']:.6f}")
    if "old" in medians:
        ratio = {k: medians["new"][k] / medians["old"][k] for k in keys}
        print(f"{'new / old':>12}" + "".join(f"{ratio[k]:14.3f}" for k in keys))


if __name__ == "__main__":
    main()
