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


def test_export_first_then_explain_and_training(tmp_path: Path) -> None:
    # a loaded model's first use of the functional code's cached constants may be export's
    # trace: the cache must not keep the tracer's placeholder tensors for later eager calls
    from tabsparse import TabNetClassifier
    from tabsparse.nn import functional

    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 4)).astype(np.float32)
    y = (X[:, 0] > 0).astype(int)
    est = TabNetClassifier(n_d=4, n_a=4, n_steps=2, max_epochs=2, random_state=0).fit(X, y)
    before = est.explain(X[:20]).importances
    functional._cached.cache_clear()  # as in a fresh process after tabsparse.load
    export_model(est, tmp_path / "model.pt2", format="torch", masks=True)
    np.testing.assert_allclose(est.explain(X[:20]).importances, before, rtol=1e-6, atol=1e-7)
    est.set_params(warm_start=True, max_epochs=3).fit(X, y)  # training steps after it
    assert est.n_iter_ == 2 + 3
