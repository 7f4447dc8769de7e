"""Ensembles inside one network (``n_members``): each member's outputs, masks and importances
against running that member alone, the training loss of the members, the estimators' parameter,
model files, export and pretrained weights."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch
import torch.nn.functional as TF
from sklearn.utils._param_validation import InvalidParameterError

from tabsparse import TabNetClassifier, TabNetPretrainer, TabNetRegressor, load, save
from tabsparse.export import export_model
from tabsparse.nn import TabNet
from tabsparse.nn import functional as F
from tabsparse.training.loop import Trainer

SMALL = dict(max_epochs=3, n_d=8, n_a=8, n_steps=2, random_state=0, device="cpu")


def network(n_members: int, n_outputs: int = 3, seed: int = 0) -> TabNet:
    """Two numeric columns and a categorical one of 4 categories."""
    torch.manual_seed(seed)
    return TabNet(
        numeric_columns=[0, 2],
        categorical_columns=[1],
        numeric_mean=[0.5, -1.0],
        numeric_std=[2.0, 0.5],
        cardinalities=[6],
        cat_emb_dim=2,
        n_outputs=n_outputs,
        n_steps=3,
        n_d=8,
        n_a=8,
        virtual_batch_size=16,
        n_members=n_members,
    )


def inputs(n: int = 40, seed: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, 2, generator=g), torch.randint(0, 6, (n, 1), generator=g)


def alone(net: TabNet, m: int, numeric: torch.Tensor, codes: torch.Tensor) -> tuple:
    """Member ``m`` run by itself in eval mode: the shared encoder on the inputs times its
    scale, then its block of the head. Returns (logits, masks (n_steps, n, groups), step
    importance (n_steps, n): the size of each step's share of the member's logits, as the
    network has no output groups)."""
    x = net.inputs(numeric, codes) * net.member_scale[m, 0]
    enc = net.encoder(x, keep_decisions=True)
    out = net.n_outputs
    weight = net.head.weight[m * out : (m + 1) * out]
    logits = enc.output @ weight.T + net.head.bias[m * out : (m + 1) * out]
    eta = torch.stack([(d @ weight.T).abs().sum(dim=1) for d in enc.decisions])
    return logits, enc.masks, eta


def frame(n: int = 300, seed: int = 0) -> tuple[pd.DataFrame, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    a, b = rng.normal(size=(2, n))
    colour = pd.Categorical(rng.choice(["red", "green", "blue"], size=n))
    X = pd.DataFrame({"a": a, "colour": colour, "b": b})
    y_cls = np.where(a + (colour == "red") > 0.3, "yes", "no")
    y_reg = 3.0 * a + b**2
    return X, y_cls, y_reg


# ---- the network ---------------------------------------------------------------------------


def test_one_member_is_the_plain_network() -> None:
    one = network(1).eval()
    assert not hasattr(one, "member_scale")
    assert one.n_members == 1
    assert not any(name.startswith("member") for name in one.state_dict())
    assert one.head.weight.shape == (3, 8)
    numeric, codes = inputs()
    with torch.no_grad():
        out = one(numeric, codes)
        enc = one.encoder(one.inputs(numeric, codes))
    assert out.member_logits is None
    torch.testing.assert_close(out.logits, one.head(enc.output))
    assert out.masks.shape == (3, 40, 3)  # n_steps, n, groups (one per column)
    torch.testing.assert_close(out.masks, enc.masks)


def test_member_logits_are_each_member_alone_and_the_prediction_their_mean() -> None:
    net = network(4).eval()
    numeric, codes = inputs()
    with torch.no_grad():
        out = net(numeric, codes)
        assert out.member_logits is not None and out.member_logits.shape == (4, 40, 3)
        for m in range(4):
            logits, _, _ = alone(net, m, numeric, codes)
            torch.testing.assert_close(out.member_logits[m], logits, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(out.logits, out.member_logits.mean(dim=0))
    # members differ: their input scales are random signs, their heads their own
    scale = net.member_scale.detach()
    assert set(scale.unique().tolist()) <= {-1.0, 1.0}
    assert len({tuple(row.tolist()) for row in scale[:, 0]}) > 1
    assert not torch.allclose(out.member_logits[0], out.member_logits[1])


def test_masks_are_member_by_member_and_explanations_average_the_members() -> None:
    net = network(3).eval()
    numeric, codes = inputs()
    with torch.no_grad():
        out = net(numeric, codes)
        assert out.masks.shape == (3 * 3, 40, 3)  # k * n_steps, n, groups
        per_member = [alone(net, m, numeric, codes) for m in range(3)]
        for m, (_, masks, eta) in enumerate(per_member):
            torch.testing.assert_close(out.masks[3 * m : 3 * m + 3], masks, rtol=1e-5, atol=1e-6)
            torch.testing.assert_close(
                out.step_importance[3 * m : 3 * m + 3], eta, rtol=1e-5, atol=1e-5
            )
        member_imp = net.member_importances(out.masks, out.step_importance)
        assert member_imp.shape == (3, 40, 3)
        for m, (_, masks, eta) in enumerate(per_member):
            want = net._spread(F.importances(masks.clone(), eta))
            torch.testing.assert_close(member_imp[m], want, rtol=1e-5, atol=1e-6)
        imp = net.importances(out.masks, out.step_importance)
        torch.testing.assert_close(imp, member_imp.mean(dim=0))
        torch.testing.assert_close(imp.sum(dim=1), torch.ones(40))
        col = net.column_masks(out.masks)
        assert col.shape == (3, 40, 3)
        want_col = torch.stack([net._spread(p[1]) for p in per_member]).mean(dim=0)
        torch.testing.assert_close(col, want_col, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(col.sum(dim=-1), torch.ones(3, 40))


def test_each_member_trains_on_its_own_loss() -> None:
    net = network(3, n_outputs=2)
    numeric, codes = inputs(64)
    target = torch.randint(0, 2, (64,), generator=torch.Generator().manual_seed(3))

    def loss_fn(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return TF.cross_entropy(logits, y, reduction="none")

    owner = SimpleNamespace(
        loss_fn=loss_fn, config=SimpleNamespace(amp=False), device=torch.device("cpu")
    )
    forward_loss = Trainer._forward_loss(owner, net)  # type: ignore[arg-type]
    summed, sparsity = forward_loss(numeric, codes, target, None)
    out = net(numeric, codes, with_masks=False)  # training mode, the same batch statistics
    assert out.member_logits is not None
    want = torch.stack([loss_fn(m, target) for m in out.member_logits]).mean(dim=0).sum()
    torch.testing.assert_close(summed, want)
    of_the_mean = loss_fn(out.logits, target).sum()
    assert not torch.isclose(summed, of_the_mean)  # not the loss of the averaged logits
    torch.testing.assert_close(sparsity, out.sparsity_loss)
    weight = torch.linspace(0.5, 2.0, 64)
    weighted, _ = forward_loss(numeric, codes, target, weight)
    per_row = torch.stack([loss_fn(m, target) for m in out.member_logits]).mean(dim=0)
    torch.testing.assert_close(weighted, (per_row * weight).sum())


def test_network_refuses_zero_members() -> None:
    with pytest.raises(ValueError, match="n_members=0 must be >= 1"):
        network(0)


# ---- the estimators ------------------------------------------------------------------------


@pytest.mark.parametrize("bad", [0, -2, 1.5, "4"])
def test_estimator_validates_n_members(bad: object) -> None:
    X, y, _ = frame(60)
    with pytest.raises(InvalidParameterError, match="'n_members' parameter"):
        TabNetClassifier(n_members=bad, **SMALL).fit(X, y)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def fitted() -> dict[str, object]:
    X, y_cls, y_reg = frame()
    return {
        "X": X,
        "classifier": TabNetClassifier(n_members=3, **SMALL).fit(X, y_cls),
        "regressor": TabNetRegressor(n_members=3, **SMALL).fit(X, y_reg),
    }


def test_estimator_predicts_the_members_mean_and_explains_with_their_spread(
    fitted: dict,
) -> None:
    clf, X = fitted["classifier"], fitted["X"]
    net = clf.network_
    assert net.n_members == 3
    proba = clf.predict_proba(X)
    data = clf._tensor_data(clf._encoded_blocks(X)[0], None, None, clf.device_)
    net.eval()
    with torch.no_grad():
        out = net(data.numeric, data.codes)
    member_proba = torch.softmax(out.logits, dim=1).numpy()
    np.testing.assert_allclose(proba, member_proba, rtol=1e-5, atol=1e-6)
    explanation = clf.explain(X)
    assert explanation.masks.shape == (2, len(X), 3)
    np.testing.assert_allclose(explanation.importances.sum(axis=1), 1.0, rtol=1e-5)
    # the fit's importances: the members' mean, their standard error from the members' spread
    std = clf.feature_importances_std_
    assert std.shape == (3,) and np.all(std > 0)
    np.testing.assert_allclose(clf.feature_importances_.sum(), 1.0, rtol=1e-5)


def test_model_file_keeps_the_members(fitted: dict, tmp_path: Path) -> None:
    for name in ("classifier", "regressor"):
        est, X = fitted[name], fitted["X"]
        path = tmp_path / f"{name}.tabsparse"
        save(est, path)
        back = load(path)
        assert back.n_members == 3
        torch.testing.assert_close(back.network_.member_scale, est.network_.member_scale)
        np.testing.assert_array_equal(back.predict(X), est.predict(X))
        np.testing.assert_allclose(back.explain(X).importances, est.explain(X).importances)


def test_export_serves_the_members_mean(fitted: dict, tmp_path: Path) -> None:
    reg, X = fitted["regressor"], fitted["X"]
    path = export_model(reg, tmp_path / "reg.pt2", "torch", masks=True)
    program = torch.export.load(str(path)).module()
    data = reg._tensor_data(reg._encoded_blocks(X)[0], None, None, reg.device_)
    preds, masks, importances = program(data.numeric, data.codes)
    np.testing.assert_allclose(
        preds.numpy().ravel(), reg.predict(X), rtol=1e-5, atol=1e-5 * reg.target_scale_[0]
    )
    explanation = reg.explain(X)
    np.testing.assert_allclose(masks.numpy(), explanation.masks, atol=1e-5)
    np.testing.assert_allclose(importances.numpy(), explanation.importances, atol=1e-5)


def test_pretrained_encoder_starts_the_shared_encoder() -> None:
    X, y, _ = frame()
    pre = TabNetPretrainer(max_epochs=2, n_d=8, n_a=8, n_steps=2, random_state=0).fit(X)
    params = {**SMALL, "max_epochs": 1, "learning_rate": 1e-9}
    clf = TabNetClassifier(n_members=2, pretrained=pre, **params).fit(X, y)
    got = dict(clf.network_.encoder.named_parameters())
    for name, tensor in pre.network_.encoder.named_parameters():
        torch.testing.assert_close(got[name], tensor, rtol=0, atol=1e-6)
