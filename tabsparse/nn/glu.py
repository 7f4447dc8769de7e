"""The gated linear unit ``a * sigmoid(b)`` (``y = [a | b]`` split along the last dimension)
and its backward, fast for TabNet's narrow layers on the CPU.

PyTorch's CPU kernels run element-wise operations over a 2-d tensor row by row, vectorised in
chunks of two SIMD registers; a row shorter than that runs element by element. ``glu`` reads
its two halves as strided views, so each row is one half: 16 float32 channels (the GLU of a
TabNet with ``n_d + n_a = 16``) are half a chunk with AVX-512 and the whole ``glu`` runs
scalar. The *split path* here computes the sigmoid on a contiguous copy of the gate half (one
vectorised pass); the products, cheap even element by element, read the strided halves.

Where the halves span at least two registers (float32 with 32 or more channels on AVX-512, 16
or more on AVX2, and on CUDA) and for small inputs (under 8,192 gated values, where the extra
operations cost more than they save), and in exported or compiled programs, ``glu`` is
PyTorch's own. :func:`glu_with_gate` returns the sigmoid it computed on the split path, and a
hand-written backward passes it to :func:`glu_backward` (PyTorch's ``glu_backward`` without
one), so the path is chosen once, in the forward. Both ways give the same values to rounding
(``tests/test_glu.py``).
"""

from __future__ import annotations

import functools

import torch
import torch.nn.functional as F

__all__ = ["glu", "glu_backward", "glu_with_gate"]

#: Below this many gated values (rows x half width) PyTorch's kernels are used as they are.
_MIN_VALUES = 8192


@functools.lru_cache(maxsize=1)
def _register_bytes() -> int:
    """Bytes of one SIMD register of PyTorch's CPU kernels; 0 where not known (then the split
    path is never taken)."""
    capability = torch.backends.cpu.get_cpu_capability()
    return {"AVX512": 64, "AVX2": 32}.get(capability, 0)


def split_pays(y: torch.Tensor) -> bool:
    """Whether :func:`glu` / :func:`glu_with_gate` take the split path for ``y`` (2-d); never
    while ``torch.export`` or ``torch.compile`` traces (the batch size is symbolic there)."""
    if torch.compiler.is_compiling():
        return False
    if y.device.type != "cpu" or y.dim() != 2 or y.dtype not in (torch.float32, torch.float64):
        return False
    half = y.shape[1] // 2
    if half * y.shape[0] < _MIN_VALUES:
        return False
    return half * y.element_size() < 2 * _register_bytes()


def glu(y: torch.Tensor) -> torch.Tensor:
    """``F.glu(y, dim=-1)``: ``y[:, :c] * sigmoid(y[:, c:])`` for ``y`` of shape ``(n, 2c)``.

    Differentiable either way (the split path through ``mul`` and ``sigmoid``)."""
    return glu_with_gate(y)[0]


def glu_with_gate(y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
    """:func:`glu` and, where the split path ran, the gate ``sigmoid(y[:, c:])`` ``(n, c)``
    it computed (else None), for a hand-written backward to pass to :func:`glu_backward`
    instead of computing it again."""
    return _glu_split(y) if split_pays(y) else (F.glu(y, dim=-1), None)


def glu_backward(
    grad: torch.Tensor, y: torch.Tensor, gate: torch.Tensor | None = None
) -> torch.Tensor:
    """The gradient with respect to ``y`` ``(n, 2c)`` of ``glu(y)`` given its output's ``grad``
    ``(n, c)``: ``[grad * s | grad * s * (1 - s) * a]`` with ``a = y[:, :c]`` and
    ``s = sigmoid(y[:, c:])``, the ``gate`` that :func:`glu_with_gate` returned where it took
    the split path (it is not modified); PyTorch's ``glu_backward`` without one."""
    if gate is None:
        return torch.ops.aten.glu_backward(grad, y, -1)
    return _glu_backward_split(grad, y, gate)


def _glu_split(y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    c = y.shape[1] // 2
    s = torch.sigmoid(y[:, c:].contiguous())
    return torch.mul(y[:, :c], s), s


def _glu_backward_split(grad: torch.Tensor, y: torch.Tensor, gate: torch.Tensor) -> torch.Tensor:
    c = y.shape[1] // 2
    out = torch.empty_like(y)
    da, db = out[:, :c], out[:, c:]
    torch.mul(grad, gate, out=da)
    torch.mul(da, y[:, :c], out=db)
    db.mul_(torch.rsub(gate, 1.0))
    return out
