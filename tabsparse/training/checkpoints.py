"""Training checkpoints: writing and reading them, copies of weights, fingerprints of data.

A checkpoint is a dict of tensors and plain Python values (see
:meth:`tabsparse.training.Trainer.checkpoint_state`), written with :func:`torch.save` and read
with ``weights_only=True``, so loading one runs no code.
"""

from __future__ import annotations

import collections
import copy
import hashlib
import os
from pathlib import Path
from typing import Any

import torch
from torch import nn

from tabsparse.training.batches import TensorData

__all__ = [
    "CHECKPOINT_FORMAT",
    "CHECKPOINT_NAME",
    "CHECKPOINT_PREFIX",
    "data_fingerprint",
    "load_checkpoint",
    "save_checkpoint",
    "snapshot",
]

CHECKPOINT_PREFIX = "tabsparse-training-checkpoint-"
CHECKPOINT_FORMAT = CHECKPOINT_PREFIX + "2"  # 2: tabsparse.optim state
CHECKPOINT_NAME = "checkpoint.pt"


def save_checkpoint(state: dict[str, Any], folder: str | os.PathLike[str]) -> Path:
    """Write ``state`` to ``folder/checkpoint.pt`` atomically (never a half-written file)."""
    path = Path(folder)
    path.mkdir(parents=True, exist_ok=True)
    target = path / CHECKPOINT_NAME
    tmp = path / f".{CHECKPOINT_NAME}.tmp"
    torch.save(state, tmp)
    os.replace(tmp, target)
    return target


def load_checkpoint(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read a checkpoint (a file, or a folder holding ``checkpoint.pt``) without unpickling
    arbitrary objects (``torch.load(weights_only=True)``)."""
    p = Path(path)
    if p.is_dir():
        p = p / CHECKPOINT_NAME
    try:
        state = torch.load(p, map_location="cpu", weights_only=True)
    except FileNotFoundError:
        raise
    except Exception as exc:
        raise ValueError(f"{p} is not a readable tabsparse training checkpoint: {exc}") from exc
    if isinstance(state, dict) and str(state.get("format", "")).startswith(CHECKPOINT_PREFIX):
        if state["format"] != CHECKPOINT_FORMAT:
            raise ValueError(
                f"{p} was written by another version of tabsparse ({state['format']}; this "
                f"version reads {CHECKPOINT_FORMAT}): start a new fit"
            )
    else:
        raise ValueError(f"{p} is not a tabsparse training checkpoint")
    return state


def snapshot(module: nn.Module) -> dict[str, Any]:
    """A copy of ``module.state_dict()`` that later training does not change.

    Copied tensor by tensor (much faster than ``copy.deepcopy``); entries that are the same
    view of the same memory (a layer shared by several modules) stay one tensor, as they do in
    a deep copy. Keeps the state dict's ``_metadata`` for
    :meth:`~torch.nn.Module.load_state_dict`."""
    state = module.state_dict()
    copies: dict[tuple[Any, ...], torch.Tensor] = {}
    out: dict[str, Any] = collections.OrderedDict()
    for key, value in state.items():
        if not isinstance(value, torch.Tensor):
            out[key] = copy.deepcopy(value)
            continue
        tag = (value.data_ptr(), value.dtype, value.device, tuple(value.shape), value.stride())
        if tag not in copies:
            copies[tag] = value.detach().clone()
        out[key] = copies[tag]
    metadata = getattr(state, "_metadata", None)
    if metadata is not None:
        out._metadata = copy.deepcopy(metadata)  # type: ignore[attr-defined]
    return out


def data_fingerprint(*datasets: object) -> str | None:
    """A hash (BLAKE2b, hex) of the contents of in-memory training data, for telling on resume
    whether a checkpoint was written by a fit on the same rows.

    Each argument is a :class:`~tabsparse.training.TensorData` (its numeric values, codes,
    target, weights and row subset, with their shapes and dtypes, in that order), an object with
    a ``fingerprint()`` method returning a string (rows streamed from disk:
    :meth:`tabsparse.streaming.StreamingSource.fingerprint`), or None (hashed as absent).
    Returns None when any argument is something else, which the resume check then skips.
    """
    digest = hashlib.blake2b(digest_size=16)
    for data in datasets:
        if data is None:
            digest.update(b"none;")
            continue
        if not isinstance(data, TensorData):
            fingerprint = getattr(data, "fingerprint", None)
            if not callable(fingerprint):
                return None
            digest.update(f"source:{fingerprint()};".encode())
            continue
        for name in ("numeric", "codes", "target", "weight", "rows"):
            tensor = getattr(data, name)
            if tensor is None:
                digest.update(f"{name}:none;".encode())
                continue
            if not isinstance(tensor, torch.Tensor):  # sparse rows (training.sparse_rows)
                digest.update(f"{name}:{tensor.fingerprint()};".encode())
                continue
            digest.update(f"{name}:{tensor.dtype}:{tuple(tensor.shape)};".encode())
            flat = tensor.detach().to("cpu").contiguous().reshape(-1)
            digest.update(flat.view(torch.uint8).numpy().data if flat.numel() else b"")
    return digest.hexdigest()
