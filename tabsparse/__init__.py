"""tabsparse: TabNet on sparsemax, as fast, exact scikit-learn estimators.

The pure-torch core (:mod:`tabsparse.sparsemax`, :mod:`tabsparse.losses`, :mod:`tabsparse.nn`,
:mod:`tabsparse.training`, :mod:`tabsparse.data`) never imports scikit-learn; the estimators in
:mod:`tabsparse.estimators` are the thin scikit-learn layer on top.
"""

from tabsparse.estimators import TabNetClassifier, TabNetPretrainer, TabNetRegressor
from tabsparse.explain import Explanation
from tabsparse.io import ModelFileError, load, save
from tabsparse.losses import SparsemaxLoss, sparsemax_loss
from tabsparse.sparsemax import Entmax15, Sparsemax, entmax15, sparsemax

__version__ = "0.1.0"

__all__ = [
    "Entmax15",
    "Explanation",
    "ModelFileError",
    "Sparsemax",
    "SparsemaxLoss",
    "TabNetClassifier",
    "TabNetPretrainer",
    "TabNetRegressor",
    "__version__",
    "entmax15",
    "load",
    "save",
    "sparsemax",
    "sparsemax_loss",
]
