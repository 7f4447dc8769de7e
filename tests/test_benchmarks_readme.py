"""benchmarks/README.md is what ``benchmarks/make_readme.py`` generates from the results files
(issue 47, "benchmarks as a product"): the committed file is up to date, at most 400 lines, and
has every headline section. No fits: the generator only reads ``benchmarks/results/``."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = ROOT / "benchmarks"
README = BENCHMARKS / "README.md"


@pytest.fixture(scope="module")
def make_readme():
    sys.path.insert(0, str(BENCHMARKS))
    try:
        return importlib.import_module("make_readme")
    except ImportError as exc:  # an optional dependency of a benchmark script
        pytest.skip(f"a benchmark script does not import: {exc}")
    finally:
        sys.path.remove(str(BENCHMARKS))


@pytest.fixture(scope="module")
def generated(make_readme) -> str:
    sys.path.insert(0, str(BENCHMARKS))
    try:
        return make_readme.generate()
    except ImportError as exc:
        pytest.skip(f"a benchmark script does not import: {exc}")
    finally:
        sys.path.remove(str(BENCHMARKS))


def test_the_committed_readme_is_what_make_readme_generates(generated: str) -> None:
    assert README.read_text() == generated, (
        "benchmarks/README.md is out of date: run `python benchmarks/make_readme.py`"
    )


def test_the_readme_is_at_most_400_lines(make_readme, generated: str) -> None:
    assert make_readme.MAX_LINES == 400
    assert len(README.read_text().splitlines()) <= 400
    assert len(generated.splitlines()) <= 400


@pytest.mark.parametrize(
    "heading",
    [
        "Speed against pytorch-tabnet",
        "Quality against gradient boosting and pytorch-tabnet",
        "Quality against the best tabular models",
        "Paired test against pytorch-tabnet",
        "Attributions",
        "Selector budget",
        "Self-supervised pretraining",
        "Multi-label (yeast)",
        "Scaling with the number of rows",
        "Streaming (data larger than memory)",
    ],
)
def test_the_readme_has_each_headline_section(heading: str) -> None:
    assert f"\n## {heading}\n" in README.read_text()


def test_the_quality_table_has_all_17_tables(make_readme, generated: str) -> None:
    quality = generated.split("## Quality against gradient boosting and pytorch-tabnet\n", 1)[1]
    table = quality.split("\n## ", 1)[0]
    rows = [line for line in table.splitlines() if line.startswith("| ") and " | " in line]
    assert len(rows) - 1 == 17  # the header row aside


def test_every_section_names_its_command(generated: str) -> None:
    for section in generated.split("\n## ")[1:]:
        heading, body = section.split("\n", 1)
        if heading in ("GPU check", "Benchmarks without a results file"):
            continue
        assert "python benchmarks/" in body or "`benchmarks/" in body, heading


def test_the_history_is_kept_and_says_it_is_not_current() -> None:
    history = (BENCHMARKS / "HISTORY.md").read_text()
    assert "not the current state" in history
    for heading in ("## Quality round 11 ", "## Quality round 26 ", "## The redesign (issue 22)"):
        assert heading in history
        assert heading not in README.read_text()
