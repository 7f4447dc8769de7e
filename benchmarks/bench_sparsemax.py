"""Benchmark tabsparse sparsemax / entmax-1.5 against the ``entmax`` package and softmax.

Every implementation is timed forward only and forward + backward on float32 inputs, measured
interleaved (one repeat of every implementation, then the next repeat) and summarised by the
median. The table is printed and written to the ``## Sparsemax`` section of
``benchmarks/README.md`` (other sections of that file are left untouched).

Usage::

    python benchmarks/bench_sparsemax.py                 # CPU, 2 threads, writes the README
    python benchmarks/bench_sparsemax.py --threads 1 --no-write
    python benchmarks/bench_sparsemax.py --device cuda
"""

from __future__ import annotations

import argparse
import datetime as _dt
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch
from _readme import write_section

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tabsparse.sparsemax import entmax15, sparsemax

try:
    import entmax as _entmax_pkg
except ImportError:  # pragma: no cover - optional reference
    _entmax_pkg = None

SHAPES = [(16384, 16), (16384, 64), (4096, 512), (1024, 4096), (256, 32768)]
README = Path(__file__).resolve().parent / "README.md"
SECTION = "## Sparsemax"

Fn = Callable[[torch.Tensor], torch.Tensor]


def implementations() -> dict[str, Fn]:
    """The functions to time, by name."""
    impls: dict[str, Fn] = {
        "softmax": lambda x: torch.softmax(x, dim=-1),
        "tabsparse.sparsemax": lambda x: sparsemax(x, dim=-1),
        "tabsparse.entmax15": lambda x: entmax15(x, dim=-1),
    }
    if _entmax_pkg is not None:
        impls["entmax.sparsemax"] = lambda x: _entmax_pkg.sparsemax(x, dim=-1)
        impls["entmax.entmax15"] = lambda x: _entmax_pkg.entmax15(x, dim=-1)
    return impls


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_once(fn: Fn, x: torch.Tensor, grad: torch.Tensor | None) -> float:
    """Seconds for one forward (``grad is None``) or forward + backward call."""
    device = x.device
    if grad is None:
        _sync(device)
        t0 = time.perf_counter()
        with torch.no_grad():
            fn(x)
        _sync(device)
        return time.perf_counter() - t0
    xg = x.detach().requires_grad_(True)
    _sync(device)
    t0 = time.perf_counter()
    fn(xg).backward(grad)
    _sync(device)
    return time.perf_counter() - t0


def bench_shape(
    shape: tuple[int, int], impls: dict[str, Fn], repeats: int, device: torch.device
) -> dict[tuple[str, str], float]:
    """Median milliseconds per (implementation, mode) for one shape, measured interleaved."""
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(shape, generator=gen).to(device)
    grad = torch.randn(shape, generator=gen).to(device)
    modes: dict[str, torch.Tensor | None] = {"fwd": None, "fwd+bwd": grad}
    for fn in impls.values():  # warm-up
        for g in modes.values():
            time_once(fn, x, g)
    samples: dict[tuple[str, str], list[float]] = {
        (name, mode): [] for name in impls for mode in modes
    }
    for _ in range(repeats):
        for name, fn in impls.items():
            for mode, g in modes.items():
                samples[(name, mode)].append(time_once(fn, x, g))
    return {key: 1e3 * statistics.median(vals) for key, vals in samples.items()}


def cpu_model() -> str:
    """CPU model name from /proc/cpuinfo (or the platform string)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def load_average() -> float | None:
    """One-minute load average (None where unavailable)."""
    try:
        return float(Path("/proc/loadavg").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def machine_line(device: torch.device, threads: int) -> str:
    """One line describing where the numbers come from."""
    where = f"CPU: {cpu_model()}, {threads} thread(s)"
    if device.type == "cuda":
        where = f"GPU: {torch.cuda.get_device_name(device)} ({where})"
    today = _dt.date.today().isoformat()
    load = load_average()
    busy = f"; load average {load:.2f} at start" if load is not None else ""
    return f"{where}; torch {torch.__version__}; Python {platform.python_version()}; {today}{busy}"


def render(
    results: dict[tuple[int, int], dict[tuple[str, str], float]],
    impls: dict[str, Fn],
    machine: str,
    repeats: int,
) -> str:
    """Markdown text of the section (without the heading)."""
    lines = [
        f"Machine: {machine}.",
        "",
        f"float32, rows of width `d` normalised along the last dim, random normal scores; "
        f"median of {repeats} interleaved repeats; `fwd` = forward under `no_grad`, "
        "`f+b` = forward + backward. Times in ms. Generated by "
        "`benchmarks/bench_sparsemax.py`.",
        "",
    ]
    load = load_average()
    if load is not None and load > 0.5 * (os.cpu_count() or 1):
        lines[-1:-1] = [
            "",
            f"**Caveat:** other processes were loading this machine (load average {load:.2f}). "
            "The iterative algorithm runs many small operations, each of which waits for every "
            "thread, so it suffers more from competing processes than the single fused softmax "
            "kernel: ratios to softmax vary by up to about 2x between such runs. Re-run on an "
            "idle machine for reference numbers.",
        ]
    header = ["shape", "softmax fwd / f+b"]
    for kind in ("sparsemax", "entmax15"):
        header.append(f"tabsparse {kind} fwd / f+b")
        if f"entmax.{kind}" in impls:
            header.append(f"entmax {kind} fwd / f+b")
            header.append(f"{kind}: entmax / tabsparse (fwd, f+b)")
        header.append(f"{kind}: tabsparse / softmax (fwd, f+b)")
    lines.append("| " + " | ".join(header) + " |")
    lines.append("|" + "---|" * len(header))
    for shape, res in results.items():

        def pair(name: str, res: dict[tuple[str, str], float] = res) -> str:
            return f"{res[(name, 'fwd')]:.2f} / {res[(name, 'fwd+bwd')]:.2f}"

        def ratio(num: str, den: str, res: dict[tuple[str, str], float] = res) -> str:
            return ", ".join(f"{res[(num, m)] / res[(den, m)]:.1f}x" for m in ("fwd", "fwd+bwd"))

        row = [f"{shape[0]} x {shape[1]}", pair("softmax")]
        for kind in ("sparsemax", "entmax15"):
            row.append(pair(f"tabsparse.{kind}"))
            if f"entmax.{kind}" in impls:
                row.append(pair(f"entmax.{kind}"))
                row.append(ratio(f"entmax.{kind}", f"tabsparse.{kind}"))
            row.append(ratio(f"tabsparse.{kind}", "softmax"))
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    """Run the benchmark."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu", help="cpu or cuda (default: cpu)")
    parser.add_argument("--threads", type=int, default=2, help="torch CPU threads (default 2)")
    parser.add_argument("--repeats", type=int, default=7, help="interleaved repeats (default 7)")
    parser.add_argument(
        "--shapes",
        default=",".join(f"{n}x{d}" for n, d in SHAPES),
        help="comma separated NxD shapes",
    )
    parser.add_argument("--no-write", action="store_true", help="do not update the README")
    parser.add_argument("--readme", type=Path, default=README, help="markdown file to update")
    args = parser.parse_args(argv)

    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda requested but CUDA is not available")
    shapes = [tuple(int(v) for v in s.lower().split("x")) for s in args.shapes.split(",")]
    impls = implementations()
    line = machine_line(device, torch.get_num_threads())
    print(line, flush=True)
    load = load_average()
    if load is not None and load > 0.5 * (os.cpu_count() or 1):
        print(
            f"warning: load average {load:.2f}: other processes compete for the CPU and many "
            "small operations suffer most (each waits for every thread); numbers will be noisy",
            flush=True,
        )
    results: dict[tuple[int, int], dict[tuple[str, str], float]] = {}
    for shape in shapes:
        n, d = shape
        results[(n, d)] = res = bench_shape((n, d), impls, args.repeats, device)
        summary = "  ".join(
            f"{name} {res[(name, 'fwd')]:.2f}/{res[(name, 'fwd+bwd')]:.2f}" for name in impls
        )
        print(f"{n}x{d}: {summary} ms", flush=True)
    body = render(results, impls, line, args.repeats)
    print()
    print(body)
    if not args.no_write:
        write_section(args.readme, SECTION, body)
        print(f"wrote section {SECTION!r} of {args.readme}")


if __name__ == "__main__":
    main()
