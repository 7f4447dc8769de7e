"""Property-based tests of input handling: generated mixed-dtype DataFrames either fit and
transform (or predict) into the declared shapes and values, or are refused with an error naming
a column; no pandas, numpy or torch exception escapes.

The strategy, and what "escapes" means precisely, live in ``benchmarks/fuzz_inputs.py``
(:func:`classify`), which runs thousands of examples; this is a fast slice of it.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import fuzz_inputs as fz

from tabsparse.data import EncoderNotFittedError

FAST = settings(
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@settings(FAST, max_examples=80)
@given(fz.examples(estimator_share=0.0, max_rows=8))
def test_the_encoder_fits_or_refuses_by_name(ex: fz.Example) -> None:
    outcome, detail = fz.run_example(ex)
    assert outcome in ("fitted", "refused"), detail


@settings(FAST, max_examples=8)
@given(fz.examples(estimator_share=1.0, max_rows=8))
def test_the_estimators_fit_and_predict_or_refuse_by_name(ex: fz.Example) -> None:
    outcome, detail = fz.run_example(ex)
    assert outcome in ("fitted", "refused"), detail


@pytest.mark.parametrize(
    ("exc", "outcome"),
    [
        (ValueError("Column 'c0' contains infinite values"), "refused"),
        (TypeError("Column 'c1__year' is odd"), "refused"),
        (ValueError("something is wrong"), "escaped"),  # names no column
        (KeyError("c0"), "escaped"),
        (IndexError("index 3 is out of bounds"), "escaped"),
        (AttributeError("'c0'"), "escaped"),
        (pd.errors.InvalidIndexError("Reindexing only valid"), "escaped"),
        (np.exceptions.AxisError(2, 1), "escaped"),
        (RuntimeError("'c0'"), "escaped"),
        (EncoderNotFittedError("not fitted"), "refused"),  # tabsparse's own error
    ],
)
def test_what_escapes_is_defined_by_module_and_type(exc: Exception, outcome: str) -> None:
    assert fz.classify(exc, ["c0", "c1"]) == outcome


def test_a_known_escape_is_caught_by_the_property() -> None:
    # the frame of issue 48 item 4, once an InvalidIndexError from inside pandas
    X = pd.DataFrame({"c0": pd.Series([True, 2**60 + 1, 2**60, 7.5] * 3, dtype=object)})
    ex = fz.Example(X, X, ["mixed"], "expand", None)
    assert fz.run_example(ex) == ("fitted", "")


def test_the_benchmark_counts_and_writes_its_summary(tmp_path: Path) -> None:
    out = tmp_path / "fuzz.json"
    assert fz.main(["--examples", "12", "--estimator-share", "0", "--out", str(out)]) == 0
    import json

    result = json.loads(out.read_text())
    assert result["examples"] == 12
    assert result["fitted"] + result["refused"] + result["escaped"] == 12
    assert result["escaped"] == 0 and result["failures"] == {}
