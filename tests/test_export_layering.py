"""tabsparse.export sits below the estimators: it imports none of them and accepts only what
holds a TabNet (duck typing on the estimator object)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tabsparse.export import export_model


def test_export_does_not_import_the_estimators() -> None:
    """Serving sits below the estimators: importing export (and the network it serves) loads
    no estimator module; export reads what it needs from the estimator object passed in."""
    code = (
        "import sys, tabsparse.export, tabsparse.nn\n"
        "print(sorted(m for m in sys.modules if m.startswith('tabsparse.estimators')))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "[]"


def test_export_refuses_other_estimators(tmp_path: Path) -> None:
    """Duck typing accepts only a fitted estimator that holds a TabNet: another fitted
    scikit-learn classifier is refused with the same message as any other object."""
    from sklearn.linear_model import LogisticRegression

    other = LogisticRegression().fit(np.random.default_rng(0).normal(size=(20, 3)), [0, 1] * 10)
    with pytest.raises(TypeError, match="TabNetClassifier or TabNetRegressor, got LogisticRegr"):
        export_model(other, tmp_path / "m.pt2", "torch")
