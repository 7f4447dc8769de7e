"""tabsparse.nn.glu: the split GLU equals PyTorch's, and is used exactly where the rule says."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from tabsparse.nn import glu as glu_module
from tabsparse.nn.glu import (
    _glu_backward_split,
    _glu_split,
    glu,
    glu_backward,
    glu_with_gate,
    split_pays,
)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("width", [2, 8, 16, 24, 64])
def test_split_glu_and_backward_equal_pytorch(dtype: torch.dtype, width: int) -> None:
    torch.manual_seed(0)
    y = torch.randn(300, 2 * width, dtype=dtype) * 4
    y[0, width:] = torch.tensor([-200.0, 200.0] * (width // 2), dtype=dtype)  # saturated gates
    grad = torch.randn(300, width, dtype=dtype)
    tol = {"rtol": 1e-6, "atol": 1e-6} if dtype == torch.float32 else {"rtol": 1e-13, "atol": 1e-13}
    out, gate = _glu_split(y)
    torch.testing.assert_close(out, F.glu(y, dim=-1), **tol)
    torch.testing.assert_close(gate, torch.sigmoid(y[:, width:]), **tol)
    expected = torch.ops.aten.glu_backward(grad, y, -1)
    torch.testing.assert_close(
        _glu_backward_split(grad, y, torch.sigmoid(y[:, width:])), expected, **tol
    )
    gate0 = gate.clone()
    torch.testing.assert_close(glu_backward(grad, y, gate), expected, **tol)  # the saved gate
    assert torch.equal(gate, gate0)  # not modified (autograd may use it again)


def test_split_glu_gradient_matches_gradcheck() -> None:
    torch.manual_seed(1)
    y = torch.randn(40, 12, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda t: _glu_split(t)[0], (y,))
    grad = torch.randn(40, 6, dtype=torch.float64)
    (auto,) = torch.autograd.grad(_glu_split(y)[0], y, grad)
    gate = torch.sigmoid(y.detach()[:, 6:])
    torch.testing.assert_close(_glu_backward_split(grad, y.detach(), gate), auto)


def test_split_glu_leaves_its_inputs_unchanged() -> None:
    y = torch.randn(50, 8)
    grad = torch.randn(50, 4)
    y0, grad0 = y.clone(), grad.clone()
    _glu_backward_split(grad, y, _glu_split(y)[1])
    assert torch.equal(y, y0) and torch.equal(grad, grad0)


@pytest.mark.parametrize(
    ("register", "rows", "width", "dtype", "expected"),
    [
        (64, 1024, 16, torch.float32, True),  # AVX-512: 64-byte halves, half a chunk
        (64, 1024, 24, torch.float32, True),
        (64, 1024, 32, torch.float32, False),  # two registers: vectorised as it is
        (64, 1024, 16, torch.float64, False),
        (32, 1024, 8, torch.float32, True),  # AVX2
        (32, 1024, 16, torch.float32, False),
        (64, 256, 16, torch.float32, False),  # under 8,192 gated values
        (0, 1024, 16, torch.float32, False),  # unknown instruction set
    ],
)
def test_split_path_rule(
    monkeypatch: pytest.MonkeyPatch,
    register: int,
    rows: int,
    width: int,
    dtype: torch.dtype,
    expected: bool,
) -> None:
    monkeypatch.setattr(glu_module, "_register_bytes", lambda: register)
    y = torch.randn(rows, 2 * width, dtype=dtype)
    assert split_pays(y) is expected
    assert not split_pays(y.to(torch.bfloat16))
    assert not split_pays(y[0])
    # either way the public functions give PyTorch's values
    grad = torch.randn(rows, width, dtype=dtype)
    torch.testing.assert_close(glu(y), F.glu(y, dim=-1))
    out, gate = glu_with_gate(y)
    torch.testing.assert_close(out, F.glu(y, dim=-1))
    assert (gate is not None) is expected
    torch.testing.assert_close(glu_backward(grad, y), torch.ops.aten.glu_backward(grad, y, -1))


def test_traced_programs_take_pytorchs_glu(monkeypatch: pytest.MonkeyPatch) -> None:
    """torch.export / torch.compile trace a symbolic batch size: no branch on it."""
    monkeypatch.setattr(glu_module, "_register_bytes", lambda: 64)
    y = torch.randn(1024, 32)
    assert split_pays(y)
    monkeypatch.setattr(torch.compiler, "is_compiling", lambda: True)
    assert not split_pays(y)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_split_path_is_cpu_only_cuda() -> None:
    assert not split_pays(torch.randn(1024, 32, device="cuda"))
