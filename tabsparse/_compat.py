"""The private scikit-learn helpers tabsparse uses, imported in one place."""

from sklearn.utils._param_validation import HasMethods, Interval, StrOptions
from sklearn.utils.validation import _check_feature_names_in, _check_sample_weight

__all__ = [
    "HasMethods",
    "Interval",
    "StrOptions",
    "_check_feature_names_in",
    "_check_sample_weight",
]
