"""scikit-learn estimators over the pure-torch TabNet core."""

# model files: registers these classes as tabsparse.io's default allow-list
from tabsparse.estimators import _persistence  # noqa: F401
from tabsparse.estimators.classifier import TabNetClassifier
from tabsparse.estimators.pretrainer import TabNetPretrainer
from tabsparse.estimators.regressor import TabNetRegressor

__all__ = ["TabNetClassifier", "TabNetPretrainer", "TabNetRegressor"]
