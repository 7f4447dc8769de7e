"""The kinds of target an estimator is fitted on: one object per kind.

A target object holds what a fit learned about ``y`` (the classes, the standardisation, ...) and
everything that follows from it: how ``y`` is encoded for the network, the width of the network's
output layer, the loss, how network outputs become predictions and probabilities, the default
score, its serialisation and what export needs. The estimators call these objects instead of
branching on the kind of target; model files and export can do the same.

=========================  ==============================================  ======================
kind (``name``)            ``y``                                           head / loss
=========================  ==============================================  ======================
``"single"``               one column of class labels (binary or           ``n_classes`` logits,
                           multi-class, :class:`ClassLabels`)              softmax cross-entropy
``"multilabel-sparsemax"`` 0 / 1 indicator matrix (:class:`SparsemaxMulti  ``n_labels + 1``,
                           Label`)                                         sparsemax loss
``"multilabel-bce"``       0 / 1 indicator matrix (:class:`BCEMultiLabel`) ``n_labels`` sigmoids
``"multitask"``            one column of labels per task (:class:`Multi    ``sum(n_classes_j)``,
                           Task`)                                          mean cross-entropy
``"regression"``           1-D or 2-D numbers, one or more outputs         ``n_outputs`` (or one
                           (:class:`Regression`)                           per quantile), the
                                                                           objective's loss
=========================  ==============================================  ======================

The multi-label and multi-task conventions (scores, decision rule, "no label" pseudo-label) are
documented in :mod:`tabsparse.estimators._multioutput`, which parses 2-D targets. One module
per family: ``_base`` (the interface), ``_classes``, ``_multi``, ``_regression``.

Interface of a target object ``t`` (every kind):

* ``Kind.fit(y) -> (t, encoded)``: learn from a fit's ``y`` and encode it (a classmethod;
  :func:`classification_kind` picks the kind of a classifier's ``y``).
* ``t.encode(y) -> encoded``: encode another ``y`` (validation data, a warm start) with what
  was learned; ``ValueError`` when it does not fit.
* ``Kind.check_params(params)``: ``ValueError`` when the estimator's parameters cannot serve
  the kind (a string scorer for a multi-task target, another ``multilabel_loss`` on a warm
  start).
* ``t.n_network_outputs``; ``t.loss() -> LossFn``; ``t.tensor(encoded, device)``;
  ``t.stratify(encoded)``: the labels the validation split is stratified on, or None.
* ``t.outputs(logits) -> {"predict": ..., "predict_proba": ...}`` (no ``predict_proba`` for
  regression); ``t.log_proba(logits)``; ``t.true_values(target_tensor)``: ``y`` as a scorer
  sees it; ``t.score(y, y_pred, sample_weight)``: the estimator's default ``score``.
* ``t.attributes() -> dict``: the estimator's fitted attributes that hold the learned state
  (``classes_``, ``n_outputs_``, ...); :func:`target_of` reads them back from an estimator.
* ``Kind.from_attributes(estimator)``; ``Kind.check_attributes(estimator)``: ``ValueError``
  when an estimator's fitted target attributes (from a model file) are not a target of this
  kind (:func:`kind_of` tells the kind of a fitted estimator).
* ``t.to_json() -> dict`` (plain JSON, ``"kind"`` included); :func:`target_from_json` reverses
  it and checks it.
* export: ``t.export_task`` (``"classification"`` or ``"regression"``),
  ``t.check_exportable()`` (``NotImplementedError`` for kinds without a serving spec),
  ``t.serve(logits)`` (the served output, traceable torch), ``t.serving_head()`` (the same as
  a module, which export traces), ``t.export_spec()`` (the target part of the serving spec)
  and ``t.export_sections()`` (the spec's ``outputs``, ``classes``, ``class_types`` and
  ``target`` entries).
"""

from __future__ import annotations

from typing import Any

import tabsparse.estimators._multioutput as mo
from tabsparse.estimators._targets._base import Target, labels_1d
from tabsparse.estimators._targets._classes import ClassLabels
from tabsparse.estimators._targets._multi import (
    BCEMultiLabel,
    MultiLabel,
    MultiTask,
    SparsemaxMultiLabel,
)
from tabsparse.estimators._targets._regression import Regression

__all__ = [
    "BCEMultiLabel",
    "ClassLabels",
    "MultiLabel",
    "MultiTask",
    "Regression",
    "SparsemaxMultiLabel",
    "Target",
    "classification_kind",
    "kind_of",
    "labels_1d",
    "target_from_json",
    "target_of",
]


def classification_kind(y: Any, multilabel_loss: str) -> type[Target]:
    """The kind of a classifier's ``y``: one column of labels, a multi-label indicator matrix
    or a multi-task target (``ValueError`` for columns that are not class labels)."""
    if not mo.is_multi_column(y):
        return ClassLabels
    kind = mo.infer_kind(mo.label_columns(y), multilabel_loss)
    return {
        mo.MULTILABEL_SPARSEMAX: SparsemaxMultiLabel,
        mo.MULTILABEL_BCE: BCEMultiLabel,
        mo.MULTITASK: MultiTask,
    }[kind]


_CLASSIFIER_KINDS: dict[str, type[Target]] = {
    k.name: k for k in (ClassLabels, SparsemaxMultiLabel, BCEMultiLabel, MultiTask)
}
_KINDS: dict[str, type[Target]] = {**_CLASSIFIER_KINDS, Regression.name: Regression}


def target_from_json(doc: Any) -> Target:
    """The target that ``Target.to_json`` wrote; ``ValueError`` for anything else."""
    if not isinstance(doc, dict) or doc.get("kind") not in _KINDS:
        raise ValueError(f"not a target: 'kind' must be one of {list(_KINDS)}, got {doc!r}")
    return _KINDS[doc["kind"]].from_json(doc)


def target_of(estimator: Any) -> Target:
    """The target a fitted estimator learned, from its fitted attributes (:meth:`Target.
    attributes`). A classifier without ``_target_kind`` (model files from before multi-output
    support) has a single column of labels; a regressor is told by its ``target_mean_``."""
    return kind_of(estimator).from_attributes(estimator)


def kind_of(estimator: Any) -> type[Target]:
    """The kind of target a fitted estimator learned, told as :func:`target_of` tells it
    (``ValueError`` for an unknown ``_target_kind``)."""
    if hasattr(estimator, "target_mean_"):
        return Regression
    kind = getattr(estimator, "_target_kind", ClassLabels.name)
    if kind not in _CLASSIFIER_KINDS:
        raise ValueError(f"_target_kind={kind!r} must be one of {list(_CLASSIFIER_KINDS)}")
    return _CLASSIFIER_KINDS[kind]
