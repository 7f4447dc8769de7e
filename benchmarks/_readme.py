"""Shared by the benchmark scripts: the machine they ran on, and one ``## Section`` of
benchmarks/README.md."""

from __future__ import annotations

import platform
import re
from pathlib import Path


def write_section(path: Path, section: str, body: str) -> None:
    """Replace (or append) ``section`` (a ``## ...`` heading) of ``path``, keeping the rest."""
    text = path.read_text() if path.exists() else ""
    block = f"{section}\n\n{body}"
    pattern = re.compile(rf"^{re.escape(section)}[ \t]*\n.*?(?=^## |\Z)", re.M | re.S)
    if pattern.search(text):
        text = pattern.sub(lambda _: block + "\n", text, count=1).rstrip("\n") + "\n"
    else:
        text = (text.rstrip("\n") + "\n\n" if text.strip() else "# Benchmarks\n\n") + block
    path.write_text(text)


def cpu_model() -> str:
    """CPU model name from /proc/cpuinfo (or the platform string), with the instruction set
    PyTorch's CPU kernels use (results differ in rounding between AVX2 and AVX-512 kernels,
    and short rows run at different speeds)."""
    name = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                name = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        import torch

        return f"{name} ({torch.backends.cpu.get_cpu_capability()} kernels)"
    except ImportError:
        return name


def load_average() -> float | None:
    """One-minute load average (None where unavailable)."""
    try:
        return float(Path("/proc/loadavg").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
