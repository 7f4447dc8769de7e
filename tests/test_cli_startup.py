"""The ``tabsparse`` command's start-up: what ``--version`` imports, and Ctrl-C at any moment."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import tabsparse
from tabsparse.cli import main

HEAVY = ("torch", "numpy", "pandas", "sklearn", "tabsparse.estimators")


def python(code: str, *args: object, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code, *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


@pytest.fixture(scope="module")
def train_csv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("startup") / "train.csv"
    rng = np.random.default_rng(0)
    x = rng.normal(size=(60, 3))
    frame = pd.DataFrame(x, columns=["a", "b", "c"]).assign(label=(x[:, 0] > 0).astype(int))
    frame.to_csv(path, index=False)
    return path


def test_version_and_help_import_nothing_heavy() -> None:
    code = (
        "import sys\n"
        "from tabsparse.cli import main\n"
        "rc = main(sys.argv[1:])\n"
        f"print(rc, [m for m in {HEAVY!r} if m in sys.modules])\n"
    )
    proc = python(code, "--version")
    assert proc.stdout.splitlines() == [f"tabsparse {tabsparse.__version__}", "0 []"], proc.stderr
    proc = python(code, "fit", "--help")
    assert proc.stdout.splitlines()[-1] == "0 []", proc.stderr


def test_import_tabsparse_is_light() -> None:
    code = f"import sys, tabsparse\nprint([m for m in {HEAVY!r} if m in sys.modules])\n"
    assert python(code).stdout.strip() == "[]"


def test_keyboard_interrupt_in_a_command_is_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def interrupted(path: str, sep: str | None = None) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr("tabsparse.cli._fit.read_table", interrupted)
    argv = ["fit", str(tmp_path / "x.csv"), "-t", "y", "-o", str(tmp_path / "m")]
    assert main(argv) == 130
    captured = capsys.readouterr()
    assert (captured.out, captured.err) == ("", "tabsparse: error: interrupted\n")
    with pytest.raises(KeyboardInterrupt):
        main(["--debug", *argv])


def test_keyboard_interrupt_while_torch_is_imported(train_csv: Path, tmp_path: Path) -> None:
    # Ctrl-C arriving while the command imports torch: a finder raises it at that import.
    code = (
        "import sys\n"
        "class Interrupt:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'torch':\n"
        "            raise KeyboardInterrupt\n"
        "sys.meta_path.insert(0, Interrupt())\n"
        "from tabsparse.cli import main\n"
        "sys.exit(main(sys.argv[1:]))\n"
    )
    proc = python(code, "fit", train_csv, "-t", "label", "-o", tmp_path / "m")
    assert proc.returncode == 130
    assert (proc.stdout, proc.stderr) == ("", "tabsparse: error: interrupted\n")
    assert not (tmp_path / "m").exists()


@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="needs Linux's /proc")
def test_sigint_during_start_up(train_csv: Path, tmp_path: Path) -> None:
    """A real SIGINT, sent as soon as the process has mapped torch's library (torch's import
    then goes on for a second or more): exit status 130 and one line, no traceback."""
    out = tmp_path / "m"
    argv = ["fit", str(train_csv), "-t", "label", "-o", str(out), "-p", "max_epochs=1000"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "tabsparse", *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        maps = Path(f"/proc/{proc.pid}/maps")
        deadline = time.monotonic() + 120
        while proc.poll() is None and time.monotonic() < deadline:
            try:
                if "libtorch" in maps.read_text():
                    break
            except OSError:  # the process is exiting
                break
            time.sleep(0.002)
        assert proc.poll() is None, proc.communicate()
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, stderr
    assert (stdout, stderr) == ("", "tabsparse: error: interrupted\n")
    assert not out.exists()


def test_an_interrupted_fit_saves_the_model_it_kept(
    capsys: pytest.CaptureFixture[str],
    train_csv: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from tabsparse import load
    from tabsparse.estimators import TabNetClassifier

    original = TabNetClassifier.fit

    def fit_then_interrupt(self: TabNetClassifier, X: object, y: object, **kwargs: object) -> None:
        original(self, X, y, **kwargs)  # Ctrl-C after the epochs: the fit keeps its weights
        raise KeyboardInterrupt

    def interrupt_at_once(self: TabNetClassifier, X: object, y: object, **kwargs: object) -> None:
        raise KeyboardInterrupt  # before the first epoch: nothing to keep

    out = tmp_path / "m"
    argv = ["fit", str(train_csv), "-t", "label", "-o", str(out), "-p", "max_epochs=2", "n_d=4"]
    monkeypatch.setattr(TabNetClassifier, "fit", interrupt_at_once)
    assert main(argv) == 130
    assert capsys.readouterr().err == "tabsparse: error: interrupted\n"
    assert not out.exists()
    monkeypatch.setattr(TabNetClassifier, "fit", fit_then_interrupt)
    assert main(argv) == 130
    expected = f"tabsparse: error: interrupted; saved the best epoch's model so far to {out}\n"
    assert capsys.readouterr().err == expected
    model = load(out)
    assert isinstance(model, TabNetClassifier) and model.n_iter_ == 2
    assert model.callbacks is None
