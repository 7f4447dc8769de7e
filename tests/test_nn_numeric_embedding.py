"""Numeric embeddings (tabsparse.nn.numeric_embedding) and the estimators' numeric_embedding:
the math, its gradients, one attention group per column, model files, export, errors, and the
default left exactly as it was."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import torch
from conftest import numeric_tabnet
from fixed_helpers import with_fixed
from sklearn.utils._param_validation import InvalidParameterError

from tabsparse import TabNetClassifier, TabNetPretrainer, TabNetRegressor, load, save
from tabsparse.nn import TabNet, TabularInput
from tabsparse.nn.numeric_embedding import PeriodicEmbedding, periodic_embedding

TODAY = Path("/tmp/today")  # the code before numeric embeddings (COMMON.md); absent elsewhere


def frame(n: int = 240, seed: int = 0) -> tuple[pd.DataFrame, np.ndarray, np.ndarray]:
    """Three numeric columns (one with NaN) around a categorical one; binary and numeric y."""
    rng = np.random.default_rng(seed)
    a, b, c = rng.normal(size=(3, n))
    b[::7] = np.nan
    colour = pd.Categorical(rng.choice(["red", "green", "blue"], size=n))
    X = pd.DataFrame({"a": a, "colour": colour, "b": b * 10 + 3, "c": c})
    y_cls = (np.sin(3 * a) + (colour == "red") > 0.3).astype(int)
    y_reg = np.sin(3 * a) + np.nan_to_num(b) ** 2 + c
    return X, y_cls, y_reg


# ---- the math --------------------------------------------------------------------------------


def test_periodic_embedding_is_the_value_then_relu_of_periodic_features() -> None:
    torch.manual_seed(0)
    emb = PeriodicEmbedding(n_columns=3, dim=4, n_frequencies=5, sigma=0.7).double()
    z = torch.randn(6, 3, dtype=torch.float64)
    out = emb(z)
    assert out.shape == (6, 12)
    for j in range(3):
        angles = 2 * math.pi * z[:, j : j + 1] * emb.frequencies[j]  # (6, 5)
        features = torch.cat([torch.cos(angles), torch.sin(angles)], dim=1)  # (6, 10)
        learned = torch.relu(features @ emb.weight[j].T + emb.bias[j])  # (6, 3)
        want = torch.cat([z[:, j : j + 1], learned], dim=1)
        torch.testing.assert_close(out[:, 4 * j : 4 * j + 4], want, rtol=1e-12, atol=1e-12)


def test_periodic_embedding_initialisation() -> None:
    torch.manual_seed(0)
    emb = PeriodicEmbedding(n_columns=40, dim=8, n_frequencies=50, sigma=0.1)
    assert emb.frequencies.shape == (40, 50)
    assert emb.weight.shape == (40, 7, 100) and emb.bias.shape == (40, 7)
    assert abs(float(emb.frequencies.detach().std()) - 0.1) < 0.005
    bound = 1 / math.sqrt(100)
    assert float(emb.weight.detach().abs().max()) <= bound
    assert float(emb.bias.detach().abs().max()) <= bound


def test_periodic_embedding_gradcheck_float64() -> None:
    torch.manual_seed(0)
    z = torch.randn(5, 3, dtype=torch.float64, requires_grad=True)
    freq = (0.5 * torch.randn(3, 4, dtype=torch.float64)).requires_grad_()
    weight = torch.randn(3, 2, 8, dtype=torch.float64, requires_grad=True)
    bias = (torch.randn(3, 2, dtype=torch.float64) + 0.5).requires_grad_()
    assert torch.autograd.gradcheck(periodic_embedding, (z, freq, weight, bias))


def test_network_groups_a_columns_channels_into_one_attention_group() -> None:
    torch.manual_seed(0)
    net = TabNet(
        numeric_columns=[0, 2, 3],
        categorical_columns=[1],
        numeric_mean=[0.0, 0.0, 0.0],
        numeric_std=[1.0, 1.0, 1.0],
        cardinalities=[5],
        cat_emb_dim=2,
        n_outputs=2,
        n_steps=3,
        numeric_embedding="periodic",
        numeric_embedding_dim=4,
    ).double()
    assert net.inputs.output_dim == 3 * 4 + 2
    assert net.encoder.group_index.tolist() == [0] * 4 + [2] * 4 + [3] * 4 + [1, 1]
    assert net.encoder.n_groups == 4
    inputs: list[torch.Tensor] = []
    for step in net.encoder.steps:  # what each step's transformer receives: x * spread mask
        step.register_forward_pre_hook(lambda _m, args: inputs.append(args[0]))
    net.eval()
    numeric = torch.randn(64, 3, dtype=torch.float64)
    codes = torch.randint(0, 5, (64, 1))
    out = net(numeric, codes)
    x = net.inputs(numeric, codes)
    assert out.masks.shape == (3, 64, 4)
    for mask, masked in zip(out.masks, inputs, strict=True):
        spread = mask[:, net.encoder.group_index]
        torch.testing.assert_close(masked, x * spread, rtol=0, atol=0)
        for g in range(4):  # a group's channels share one mask value
            ch = spread[:, net.encoder.group_index == g]
            assert torch.equal(ch, ch[:, :1].expand_as(ch))
    imp = net.importances(out.masks.detach(), out.step_importance.detach())
    assert imp.shape == (64, 4)
    torch.testing.assert_close(imp.sum(dim=1), torch.ones(64, dtype=torch.float64))


def test_default_network_has_no_embedding() -> None:
    torch.manual_seed(3)
    plain = numeric_tabnet(2, 1)
    assert plain.inputs.numeric_embedding is None and plain.inputs.output_dim == 2
    assert plain.encoder.identity_groups
    assert not any("numeric_embedding" in name for name in plain.state_dict())


def test_training_step_learns_the_embedding_through_the_encoder_node() -> None:
    """The hand-written encoder node gives the input gradient the embedding learns from:
    its gradients equal autograd's over the modules."""

    def make() -> TabNet:
        return numeric_tabnet(
            2, 2, numeric_embedding="periodic", numeric_embedding_dim=3, virtual_batch_size=16
        ).double()

    torch.manual_seed(0)
    net = make()
    numeric = torch.randn(64, 2, dtype=torch.float64)
    grads = []
    for with_masks in (False, True):  # False: the one-node step; True: the modules
        clone = make()
        clone.load_state_dict(net.state_dict())
        clone.train()
        out = clone(numeric, torch.zeros(64, 0, dtype=torch.int64), with_masks=with_masks)
        (out.logits.pow(2).sum() + out.sparsity_loss).backward()
        emb = clone.inputs.numeric_embedding
        grads.append([emb.frequencies.grad, emb.weight.grad, emb.bias.grad])
    assert net.encoder._plan(torch.zeros(64, 6, dtype=torch.float64)) is not None
    for fast, ref in zip(*grads, strict=True):
        assert float(ref.abs().max()) > 0
        torch.testing.assert_close(fast, ref, rtol=1e-9, atol=1e-9)


# ---- estimators --------------------------------------------------------------------------


def test_estimator_importances_and_explain_are_per_original_column() -> None:
    X, y, _ = frame()
    clf = TabNetClassifier(numeric_embedding="periodic", max_epochs=3, random_state=0)
    clf = with_fixed(clf, numeric_embedding_dim=3).fit(X, y)
    net = clf.network_
    assert net.inputs.numeric_embedding.dim == 3
    assert net.inputs.output_dim == 3 * 3 + 1  # three numeric columns, cat_emb_dim=1
    assert clf.feature_importances_.shape == (4,)
    assert clf.feature_importances_.sum() == pytest.approx(1.0, abs=1e-6)
    exp = clf.explain(X.iloc[:20])
    assert exp.feature_names == ["a", "colour", "b", "c"]
    assert exp.importances.shape == (20, 4) and exp.masks.shape == (3, 20, 4)
    np.testing.assert_allclose(exp.importances.sum(axis=1), 1.0, atol=1e-6)
    np.testing.assert_allclose(exp.masks.sum(axis=2), 1.0, atol=1e-6)


def test_model_file_round_trip(tmp_path: Path) -> None:
    X, _, y = frame()
    reg = TabNetRegressor(numeric_embedding="periodic", max_epochs=3, random_state=1)
    reg = with_fixed(reg, numeric_embedding_dim=5).fit(X, y)
    path = tmp_path / "reg.tabsparse"
    save(reg, path)
    back = load(path)
    assert back.get_params()["numeric_embedding"] == "periodic"
    assert back.architecture_["numeric_embedding_dim"] == 5
    assert back.network_.inputs.numeric_embedding.dim == 5
    np.testing.assert_array_equal(back.predict(X), reg.predict(X))
    for name, t in reg.network_.state_dict().items():
        assert torch.equal(back.network_.state_dict()[name], t), name


def test_exported_model_predicts_like_the_estimator(tmp_path: Path) -> None:
    from tabsparse.export import export_model

    X, y, _ = frame()
    clf = TabNetClassifier(
        numeric_embedding="periodic", n_steps=1, n_members=1, max_epochs=3, random_state=2
    )
    clf = with_fixed(clf, numeric_embedding_dim=4).fit(X, y)
    enc = clf.encoder_.transform(X)
    want = clf.predict_proba(X)
    path = export_model(clf, tmp_path / "clf.pt2", "torch")
    module = torch.export.load(str(path)).module()
    with torch.no_grad():
        got = module(torch.from_numpy(enc.numeric), torch.from_numpy(enc.codes)).numpy()
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-5)
    pytest.importorskip("onnx")
    pytest.importorskip("onnxscript")
    ort = pytest.importorskip("onnxruntime")
    onnx_path = export_model(clf, tmp_path / "clf.onnx", "onnx")
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(str(onnx_path), options, providers=["CPUExecutionProvider"])
    got = session.run(None, {"numeric": enc.numeric, "codes": enc.codes})[0]
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-5)


_TODAY_SCRIPT = textwrap.dedent(
    """
    import json, sys
    import numpy as np, pandas as pd, torch
    from tabsparse import TabNetClassifier, TabNetRegressor
    torch.set_num_threads(1)
    data = json.load(open(sys.argv[1]))
    X = pd.DataFrame(data["X"])
    X["colour"] = pd.Categorical(X["colour"])
    kw = dict(max_epochs=3, random_state=0, device="cpu")
    params = TabNetClassifier().get_params()
    if "n_members" in params:  # one network, no embedding, the per-row first mask, as before
        kw.update(n_members=1, numeric_embedding=None)
    if "first_mask" in params:
        kw.update(first_mask="per_row")
    clf = TabNetClassifier(**kw).fit(X, np.array(data["y_cls"]))
    reg = TabNetRegressor(**kw).fit(X, np.array(data["y_reg"]))
    np.save(sys.argv[2], np.concatenate([clf.predict_proba(X).ravel(), reg.predict(X).ravel()]))
    """
)


@pytest.mark.skipif(not (TODAY / "tabsparse").is_dir(), reason="needs the old checkout")
def test_default_fits_are_bit_identical_to_the_code_before(tmp_path: Path) -> None:
    """numeric_embedding=None fits exactly as before the parameter existed (one network:
    ``n_members=1``, and the per-row first mask)."""
    X, y_cls, y_reg = frame()
    data = {
        "X": {k: [None if isinstance(v, float) and math.isnan(v) else v for v in X[k]] for k in X},
        "y_cls": y_cls.tolist(),
        "y_reg": y_reg.tolist(),
    }
    data["X"]["colour"] = [str(v) for v in X["colour"]]
    (tmp_path / "data.json").write_text(json.dumps(data))
    script = tmp_path / "fit.py"
    script.write_text(_TODAY_SCRIPT)
    outputs = {}
    for label, path in (("today", str(TODAY)), ("now", str(Path(__file__).parents[1]))):
        out = tmp_path / f"{label}.npy"
        env = {"PYTHONPATH": path, "OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"}
        subprocess.run(
            [sys.executable, str(script), str(tmp_path / "data.json"), str(out)],
            check=True,
            env=env,
            cwd=tmp_path,
        )
        outputs[label] = np.load(out)
    np.testing.assert_array_equal(outputs["now"], outputs["today"])


# ---- errors ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("params", "message"),
    [
        (
            {"numeric_embedding": "pwl"},
            (  # the options are a set: printed in either order
                "The 'numeric_embedding' parameter of TabNetClassifier must be a str among "
                "{'auto', 'periodic'} or None. Got 'pwl' instead.",
                "The 'numeric_embedding' parameter of TabNetClassifier must be a str among "
                "{'periodic', 'auto'} or None. Got 'pwl' instead.",
            ),
        ),
    ],
)
def test_bad_estimator_values(params: dict[str, Any], message: str | tuple[str, ...]) -> None:
    X, y, _ = frame(40)
    with pytest.raises(InvalidParameterError) as info:
        TabNetClassifier(max_epochs=1, **params).fit(X, y)
    assert str(info.value) in ((message,) if isinstance(message, str) else message)


def test_pretrained_with_numeric_embedding_is_refused() -> None:
    X, y, _ = frame(60)
    pre = TabNetPretrainer(max_epochs=1, random_state=0).fit(X)
    with pytest.raises(ValueError) as info:
        TabNetClassifier(numeric_embedding="periodic", pretrained=pre, max_epochs=1).fit(X, y)
    assert str(info.value) == (
        "numeric_embedding='periodic' cannot be used with pretrained= (a TabNetPretrainer's "
        "network has no numeric embedding); set numeric_embedding=None"
    )


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"numeric_embedding": "pwl"},
            "numeric_embedding='pwl' must be None or one of ['periodic']",
        ),
        (
            {"numeric_embedding": "periodic", "numeric_embedding_dim": 1},
            "numeric_embedding_dim=1 must be >= 2",
        ),
    ],
)
def test_bad_input_module_values(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError) as info:
        TabularInput(numeric_mean=[0.0], numeric_std=[1.0], cardinalities=[], **kwargs)
    assert str(info.value) == message


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"n_columns": 0, "dim": 4}, "n_columns=0 must be >= 1"),
        ({"n_columns": 2, "dim": 1}, "dim=1 must be >= 2"),
        ({"n_columns": 2, "dim": 4, "n_frequencies": 0}, "n_frequencies=0 must be >= 1"),
        ({"n_columns": 2, "dim": 4, "sigma": 0.0}, "sigma=0.0 must be > 0"),
    ],
)
def test_bad_embedding_values(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError) as info:
        PeriodicEmbedding(**kwargs)
    assert str(info.value) == message
