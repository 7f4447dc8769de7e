"""scikit-learn estimators over the pure-torch TabNet core."""

from tabsparse.estimators.classifier import TabNetClassifier
from tabsparse.estimators.pretrainer import TabNetPretrainer
from tabsparse.estimators.regressor import TabNetRegressor

# model files: registers these classes as tabsparse.io's default allow-list
from tabsparse.estimators import _persistence  # noqa: E402, F401, I001

__all__ = ["TabNetClassifier", "TabNetPretrainer", "TabNetRegressor"]
