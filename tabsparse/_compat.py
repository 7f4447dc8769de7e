"""The private scikit-learn helpers tabsparse uses, imported in one place."""

from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import _check_sample_weight

__all__ = ["Interval", "StrOptions", "_check_sample_weight"]
