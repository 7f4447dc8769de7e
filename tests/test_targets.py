"""The target kinds (tabsparse/estimators/_targets.py): fitting, encoding, outputs, JSON, export."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from tabsparse.estimators._targets import (
    BCEMultiLabel,
    ClassLabels,
    MultiTask,
    Regression,
    SparsemaxMultiLabel,
    Target,
    classification_kind,
    target_from_json,
    target_of,
)


def fitted_targets() -> list[tuple[Target, np.ndarray]]:
    labels = np.array(["b", "a", "c", "a"])
    indicator = np.array([[1, 0, 1], [0, 1, 0], [0, 0, 1], [1, 1, 0]])
    tasks = np.array([["x", 1], ["y", 2], ["x", 3], ["y", 1]], dtype=object)
    return [
        ClassLabels.fit(labels),
        SparsemaxMultiLabel.fit(indicator),
        BCEMultiLabel.fit(indicator),
        MultiTask.fit(tasks),
        Regression.fit(np.array([1.0, 2.0, 4.0, 5.0])),
        Regression.fit(np.array([[1.0, 0.0], [2.0, 0.0], [4.0, 0.0], [5.0, 0.0]])),
    ]


def test_classification_kind_follows_the_shape_and_values_of_y() -> None:
    assert classification_kind(np.array([0, 1, 1]), "sparsemax") is ClassLabels
    indicator = np.array([[0, 1], [1, 0], [1, 1]])
    assert classification_kind(indicator, "sparsemax") is SparsemaxMultiLabel
    assert classification_kind(indicator, "bce") is BCEMultiLabel
    assert classification_kind(np.array([[0, 5], [1, 6], [1, 5]]), "bce") is MultiTask


def test_fit_learns_and_encodes() -> None:
    target, codes = ClassLabels.fit(np.array(["b", "a", "c", "a"]))
    assert target.classes.tolist() == ["a", "b", "c"]
    assert codes.tolist() == [1, 0, 2, 0] and codes.dtype == np.int64
    assert target.stratify(codes) is codes
    with pytest.raises(ValueError, match=r"labels not seen.*\['d'\]"):
        target.encode(np.array(["a", "d"]))
    with pytest.raises(ValueError, match="y has 2 columns, but the classifier was fitted on a "):
        target.encode(np.zeros((3, 2)))
    reg, z = Regression.fit(np.array([1.0, 3.0]))
    assert z.tolist() == [[-1.0], [1.0]] and reg.stratify(z) is None
    np.testing.assert_allclose(reg.unscale(z), [1.0, 3.0])
    ml, y = SparsemaxMultiLabel.fit(np.array([[1, 0], [0, 1], [0, 0], [1, 1]]))
    assert ml.n_network_outputs == 3 and ml.mean_label_count == pytest.approx(5 / 4)
    assert y.dtype == np.float32


def test_outputs_losses_and_network_width() -> None:
    torch.manual_seed(0)
    for target, encoded in fitted_targets():
        logits = torch.randn(4, target.n_network_outputs)
        loss = target.loss()(logits, target.tensor(encoded, torch.device("cpu")))
        assert loss.shape == (4,) and torch.all(torch.isfinite(loss))
        out = target.outputs(logits)
        assert "predict" in out
        if target.export_task == "classification":
            assert ("predict_proba" in out) and target.log_proba(logits) is not None
    cls, _ = ClassLabels.fit(np.array([0, 1, 2]))
    logits = torch.tensor([[0.0, 1.0, 3.0]])
    np.testing.assert_allclose(cls.outputs(logits)["predict_proba"], torch.softmax(logits, 1))
    assert cls.outputs(logits)["predict"].tolist() == [2]
    np.testing.assert_allclose(np.exp(cls.log_proba(logits)), torch.softmax(logits, 1))
    assert cls.true_values(torch.tensor([2, 0])).tolist() == [2, 0]


@pytest.mark.parametrize("index", range(6))
def test_json_round_trip_and_attributes(index: int) -> None:
    target, _ = fitted_targets()[index]
    doc = json.loads(json.dumps(target.to_json()))
    back = target_from_json(doc)
    assert type(back) is type(target)
    assert back.to_json() == target.to_json()

    class Fitted:
        pass

    est = Fitted()
    for name, value in target.attributes().items():
        setattr(est, name, value)
    assert target_of(est).to_json() == target.to_json()


def test_bad_json_is_refused() -> None:
    with pytest.raises(ValueError, match="'kind' must be one of"):
        target_from_json({"kind": "ranking"})
    with pytest.raises(ValueError, match="at least 2 distinct labels"):
        target_from_json({"kind": "single", "classes": {"dtype": "<i8", "values": [1]}})
    with pytest.raises(ValueError, match="mean_label_count=9"):
        target_from_json({"kind": "multilabel-sparsemax", "n_labels": 2, "mean_label_count": 9})
    with pytest.raises(ValueError, match="scale finite and positive"):
        target_from_json({"kind": "regression", "ndim": 1, "mean": [0.0], "scale": [-1.0]})


def test_check_params_refuses_what_a_kind_cannot_serve() -> None:
    with pytest.raises(ValueError, match="scoring='accuracy' cannot score a multi-task"):
        MultiTask.check_params({"scoring": "accuracy"})
    MultiTask.check_params({"scoring": "loss"})
    with pytest.raises(ValueError, match="multilabel_loss='bce', but the network was fitted"):
        SparsemaxMultiLabel.check_params({"multilabel_loss": "bce"})


def test_export_hooks() -> None:
    cls, _ = ClassLabels.fit(np.array(["n", "y"]))
    cls.check_exportable()
    assert cls.export_spec() == {"classes": ["n", "y"]}
    logits = torch.tensor([[0.0, 1.0]])
    torch.testing.assert_close(cls.serve(logits), torch.softmax(logits, 1))
    reg, _ = Regression.fit(np.array([1.0, 3.0]))
    torch.testing.assert_close(reg.serve(torch.tensor([[1.0]])), torch.tensor([[3.0]]).double())
    assert reg.export_spec() == {
        "n_outputs": 1,
        "ndim": 1,
        "mean": [2.0],
        "scale": [1.0],
        "loss": "squared_error",
        "link": "identity",
        "quantiles": None,
    }
    for target, _ in fitted_targets()[1:4]:
        with pytest.raises(NotImplementedError, match="single-output models only"):
            target.check_exportable()
