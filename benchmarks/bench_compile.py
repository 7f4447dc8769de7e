"""Does ``torch.compile`` pay for TabNet training? tabsparse's eager step against a plain
TabNet, eager and compiled.

Why this script exists: the speed issue asked for compiled kernels "where they pay"
(``compile="auto"``: on only when the whole fit, compile time included, gets shorter).
tabsparse's eager training step is hand-fused (``tabsparse.nn.fused``); ``compile=True`` traces
the module path instead (``tabsparse.compiling``). This measures the choice that
``compile="auto"`` makes on each device. Training steps (forward, loss, backward, Adam
update) of the same TabNet (n_d = n_a = 8, 3 steps, 2 shared + 2 step-specific GLU layers,
sparsemax, batch 1024, virtual batch 128, 54 numeric features, 7 classes, the speed
benchmark's shape):

* ``tabsparse`` — :class:`tabsparse.nn.TabNet` with the library's optimiser, eager;
* ``tabsparse compiled`` — the same step as ``compile=True`` runs it: forward and loss through
  :class:`tabsparse.compiling.StepCompiler` (inductor, one graph, the backward compiled with
  it), the optimiser update eager;
* ``tabsparse reduce-overhead`` (CUDA only) — the same with ``compile="reduce-overhead"``
  (inductor with CUDA graphs: one launch for the whole step instead of one per kernel);
* ``plain eager`` — a straightforward TabNet in plain PyTorch modules (ghost batch norm by
  reshaping, sparsemax by sorting, autograd for every operation), ``torch.optim.Adam``;
* ``plain compiled`` — the same step under ``torch.compile`` (inductor, default mode), with
  the seconds its first two calls take (tracing and code generation; the inductor cache is a
  fresh temporary folder, as for a first fit).

Each measurement runs in a fresh process, the three variants in turn, ``--repeats`` times.
Reported: milliseconds per step (in each process the median of 5 blocks of 20 steps after
warm-up, process CPU time on the CPU, wall time with synchronisation on CUDA; then the median
over the processes), the compile seconds, and the number of steps after which compiling would
have paid against tabsparse's eager step (``compile_s / (tabsparse_ms - compiled_ms)``;
"never" when the compiled step is not faster).

Usage::

    python benchmarks/bench_compile.py                  # CPU, README section
    python benchmarks/bench_compile.py --device cuda --readme /tmp/README_gpu.md
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
README = HERE / "README.md"
SECTION = "## torch.compile against hand-fused eager"
VARIANTS = ("tabsparse", "tabsparse compiled", "plain eager", "plain compiled")
CUDA_VARIANTS = ("tabsparse reduce-overhead",)  # CUDA graphs: measured on CUDA only
SETTINGS: dict[str, bool | str] = {
    "tabsparse": False,
    "tabsparse compiled": True,
    "tabsparse reduce-overhead": "reduce-overhead",
}
D, N_CLASSES, BATCH, VBS, N_DA, N_STEPS, GAMMA = 54, 7, 1024, 128, 8, 3, 1.3


def plain_tabnet() -> Any:
    """A straightforward TabNet in plain PyTorch (no custom autograd functions)."""
    import torch
    import torch.nn.functional as F
    from torch import nn

    def ghost_bn(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        n, c = x.shape
        k = max(1, n // VBS)
        h = x.reshape(n // k, k * c)  # virtual batch i = rows i, i + k, ...
        mean = h.mean(0, keepdim=True)
        var = h.var(0, unbiased=False, keepdim=True)
        return ((h - mean) * torch.rsqrt(var + 1e-5)).reshape(n, c) * weight + bias

    def sparsemax(z: torch.Tensor) -> torch.Tensor:
        z = z - z.amax(1, keepdim=True)
        zs = torch.sort(z, 1, descending=True).values
        r = torch.arange(1, z.shape[1] + 1, dtype=z.dtype, device=z.device)
        cs = zs.cumsum(1) - 1
        k = (zs * r > cs).sum(1, keepdim=True)
        return torch.clamp(z - cs.gather(1, k - 1) / k, min=0)

    class GLU(nn.Module):
        def __init__(self, d_in: int, d_out: int) -> None:
            super().__init__()
            self.fc = nn.Linear(d_in, 2 * d_out, bias=False)
            self.weight = nn.Parameter(torch.ones(2 * d_out))
            self.bias = nn.Parameter(torch.zeros(2 * d_out))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return F.glu(ghost_bn(self.fc(x), self.weight, self.bias), -1)

    class Plain(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            width = 2 * N_DA
            self.bn0 = nn.BatchNorm1d(D)
            self.shared = nn.ModuleList([GLU(D, width), GLU(width, width)])
            self.steps = nn.ModuleList(
                nn.ModuleList([GLU(width, width), GLU(width, width)]) for _ in range(N_STEPS + 1)
            )
            self.att = nn.ModuleList(nn.Linear(N_DA, D, bias=False) for _ in range(N_STEPS))
            self.att_w = nn.ParameterList(nn.Parameter(torch.ones(D)) for _ in range(N_STEPS))
            self.att_b = nn.ParameterList(nn.Parameter(torch.zeros(D)) for _ in range(N_STEPS))
            self.head = nn.Linear(N_DA, N_CLASSES)

        def transformer(self, x: torch.Tensor, i: int) -> torch.Tensor:
            h = self.shared[0](x)
            h = (h + self.shared[1](h)) * 0.5**0.5
            for layer in self.steps[i]:  # type: ignore[attr-defined]
                h = (h + layer(h)) * 0.5**0.5
            return h

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            x = self.bn0(x)
            att = self.transformer(x, 0)[:, N_DA:]
            prior = torch.ones_like(x)
            out = torch.zeros(x.shape[0], N_DA, device=x.device)
            entropy = torch.zeros((), device=x.device)
            for i in range(N_STEPS):
                logits = ghost_bn(self.att[i](att), self.att_w[i], self.att_b[i])
                mask = sparsemax(logits * prior)
                prior = prior * (GAMMA - mask)
                entropy = entropy + (-mask * torch.log(mask + 1e-15)).sum(1).mean()
                h = self.transformer(x * mask, i + 1)
                out = out + F.relu(h[:, :N_DA])
                att = h[:, N_DA:]
            return self.head(out), entropy / N_STEPS

    return Plain()


def worker(variant: str, device: str) -> dict[str, Any]:
    import torch
    import torch.nn.functional as F

    torch.manual_seed(0)
    dev = torch.device(device)
    X = torch.randn(BATCH, D, device=dev)
    y = torch.randint(0, N_CLASSES, (BATCH,), device=dev)
    if variant.startswith("tabsparse"):
        from tabsparse.compiling import StepCompiler
        from tabsparse.nn import TabNet
        from tabsparse.optim import AdamW

        net: Any = TabNet(
            numeric_columns=list(range(D)),
            categorical_columns=[],
            numeric_mean=[0.0] * D,
            numeric_std=[1.0] * D,
            cardinalities=[],
            n_outputs=N_CLASSES,
            n_d=N_DA,
            n_a=N_DA,
            n_steps=N_STEPS,
            gamma=GAMMA,
            virtual_batch_size=VBS,
        ).to(dev)
        opt: Any = AdamW(net.parameters(), lr=0.02, flat=True)
        codes = torch.zeros(BATCH, 0, dtype=torch.int64, device=dev)

        def forward_loss(x: torch.Tensor, c: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
            out = net(x, c, with_masks=False)
            return F.cross_entropy(out.logits, t) + 1e-3 * out.sparsity_loss

        forward = StepCompiler(forward_loss, SETTINGS[variant], dev)

        def step() -> None:
            loss = forward(X, codes, y)
            opt.zero_grad()
            loss.backward()
            opt.step()

    else:
        net = plain_tabnet().to(dev)
        opt = torch.optim.Adam(net.parameters(), lr=0.02)

        def step() -> None:
            logits, entropy = net(X)
            loss = F.cross_entropy(logits, y) + 1e-3 * entropy
            opt.zero_grad()
            loss.backward()
            opt.step()

    net.train()
    compile_s = None
    run = step
    if variant != "tabsparse" and variant != "plain eager":
        t0 = time.perf_counter()
        run = step if variant.startswith("tabsparse") else torch.compile(step)
        run()
        run()
        if dev.type == "cuda":
            torch.cuda.synchronize()
        compile_s = time.perf_counter() - t0
    for _ in range(5):
        run()
    blocks = []
    for _ in range(5):
        if dev.type == "cuda":
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(20):
                run()
            torch.cuda.synchronize()
            blocks.append((time.perf_counter() - t0) / 20 * 1e3)
        else:
            t0 = time.process_time()
            for _ in range(20):
                run()
            blocks.append((time.process_time() - t0) / 20 * 1e3)
    return {
        "variant": variant,
        "device": device,
        "ms_per_step": statistics.median(blocks),
        "compile_s": compile_s,
    }


COMPARED = (
    ("tabsparse's compiled step", "tabsparse compiled"),
    ("tabsparse's step with CUDA graphs", "tabsparse reduce-overhead"),
    ("A plain compiled TabNet", "plain compiled"),
)


def _verdict(name: str, record: dict[str, Any], ours: float) -> str:
    """When compiling pays against tabsparse's eager step, in steps (or never)."""
    gain, seconds = ours - record["ms_per_step"], record["compile_s"]
    if gain > 0:
        return (
            f"{name} pays against tabsparse's eager step after **{seconds * 1e3 / gain:,.0f} "
            f"steps** (compile {seconds:.0f} s, then {gain:.1f} ms less per step)."
        )
    return (
        f"{name} **never** pays against tabsparse's eager step here: it is {-gain:.1f} ms "
        f"slower per step, after {seconds:.0f} s of compiling."
    )


def run_worker(variant: str, device: str, cache: str) -> dict[str, Any]:
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", PYTHONWARNINGS="ignore")
    env["TORCHINDUCTOR_CACHE_DIR"] = cache  # a first compile, not a cached one
    env["PYTHONPATH"] = os.pathsep.join([str(HERE.parent), env.get("PYTHONPATH", "")])
    cmd = [sys.executable, __file__, "--worker", variant, "--device", device]
    out = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu", help="cpu or cuda")
    parser.add_argument("--repeats", type=int, default=3, help="fresh processes per variant")
    parser.add_argument("--readme", type=Path, default=README, help="file the table goes to")
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument("--worker", choices=VARIANTS + CUDA_VARIANTS, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        import torch

        torch.set_num_threads(1)
        print(json.dumps(worker(args.worker, args.device)))
        return
    variants = VARIANTS + (CUDA_VARIANTS if args.device == "cuda" else ())
    runs: dict[str, list[dict[str, Any]]] = {v: [] for v in variants}
    for rep in range(args.repeats):  # interleaved: the machine's load moves all of them alike
        for v in variants:
            with tempfile.TemporaryDirectory() as cache:
                rec = run_worker(v, args.device, cache)
            runs[v].append(rec)
            print(json.dumps({**rec, "repeat": rep}), flush=True)
    records = {
        v: {
            "ms_per_step": statistics.median(r["ms_per_step"] for r in recs),
            "compile_s": None
            if recs[0]["compile_s"] is None
            else statistics.median(r["compile_s"] for r in recs),
        }
        for v, recs in runs.items()
    }
    stored = {"variants": list(variants), "repeats": args.repeats, "records": records}
    print(render({**stored, "device": args.device, "date": "(now)", "machine": "(this one)"}))
    if args.no_write:
        return
    sys.path.insert(0, str(HERE))
    import torch
    from _readme import cpu_model, write_section

    where = (
        f"{torch.cuda.get_device_name(0)} (CUDA)"
        if args.device == "cuda"
        else f"{cpu_model()}, {os.cpu_count()} cores, one thread"
    )
    stored.update(
        device=args.device,
        date=_dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        machine=f"{where}, torch {torch.__version__}, Python {platform.python_version()}",
    )
    out = results_file(args.device)
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(stored, indent=1) + "\n")
    write_section(args.readme, SECTION, render(stored))


def results_file(device: str) -> Path:
    """``results/compile.json`` (the CPU run the README shows) or ``compile_<device>.json``."""
    return HERE / "results" / ("compile.json" if device == "cpu" else f"compile_{device}.json")


def render(stored: dict[str, Any]) -> str:
    """The README section body from one stored run."""
    records = stored["records"]
    ours = records["tabsparse"]["ms_per_step"]
    rows = []
    for v in stored["variants"]:
        seconds = records[v]["compile_s"]
        shown = "" if seconds is None else f"{seconds:.0f}"
        rows.append(f"| {v} | {records[v]['ms_per_step']:.1f} | {shown} |")
    verdict = " ".join(_verdict(name, records[v], ours) for name, v in COMPARED if v in records)
    return "\n".join(
        [
            f"`python benchmarks/bench_compile.py --device {stored['device']}` — "
            f"{stored['date']}; machine: {stored['machine']}; median of {stored['repeats']} "
            "fresh processes per variant, interleaved.",
            "",
            "One training step (forward, loss, backward, Adam) of the speed benchmark's TabNet "
            "(batch 1024, 54 features, n_d = n_a = 8, 3 steps): tabsparse eager (hand-fused "
            "autograd nodes) and compiled (`compile=True`: the module path as one graph), "
            "against a plain PyTorch TabNet, eager and under `torch.compile` (first compile, "
            "empty inductor cache).",
            "",
            "| variant | ms per step | compile (s) |",
            "|---|---:|---:|",
            *rows,
            "",
            verdict,
            "",
        ]
    )


def readme_section(device: str = "cpu") -> str:
    """The section body from the stored run on ``device`` (no fits)."""
    return render(json.loads(results_file(device).read_text()))


if __name__ == "__main__":
    main()
