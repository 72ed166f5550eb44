"""The models a node computes with: loaded once per process, on a device in the protocol's precision.

Nodes in one process (tests, the demo) share the weights of a checkpoint read-only, so each checkpoint is loaded
once per (path, device, dtype), and its model id is hashed once per path. A replay (`next_token_rows`) is one fresh
forward pass with no cache: what a referee, a watchdog or an accused party without its transcript computes.

Precision: every node computes in float32 on every device (`node_device`), so that referees and watchdogs on other
hardware judge committed values within the fp32 tolerance; the engine's bf16 GPU default is for standalone use
(why, and the measured gap: docs/node.md, "Known limits").
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

_MODELS: dict[tuple[str, str, str], Any] = {}
_MODEL_IDS: dict[str, bytes] = {}
_LOAD_LOCK = threading.Lock()


def node_device(device=None):
    """(torch device, dtype) a node computes on: the device asked for (`loading.resolve_device`: CUDA when present,
    else CPU) and float32, the protocol's precision, on every device."""
    import torch

    from node.decoding import loading

    return loading.resolve_device(device), torch.float32


def load_model(path, device, dtype):
    """The checkpoint at `path` on `device` in `dtype`, loaded once per process."""
    from node.decoding import loading

    key = (str(Path(path).resolve()), str(device), str(dtype))
    with _LOAD_LOCK:
        if key not in _MODELS:
            _MODELS[key] = loading.load_model(str(path), device, dtype)
        return _MODELS[key]


def model_id(path) -> bytes:
    """The model id of the checkpoint at `path` (docs/protocol.md §2), hashed once per process."""
    from node.decoding import model_id as compute

    key = str(Path(path).resolve())
    with _LOAD_LOCK:
        if key not in _MODEL_IDS:
            _MODEL_IDS[key] = compute(path)
        return _MODEL_IDS[key]


def load_tokenizer(path, *others):
    """The shared tokenizer of `path`, checked equal to the tokenizers of `others` (draft and target must share one)."""
    from node.decoding import loading

    tokenizer = loading.load_tokenizer(str(path))
    for other in others:
        loading.check_same_tokenizer(tokenizer, loading.load_tokenizer(str(other)))
    return tokenizer


def next_token_rows(model, context: list[int], sampling, keep: int = 1):
    """Quantized (WAD) distributions of the tokens following the last `keep` positions of `context`,
    from one fresh forward pass (a replay: no cache is reused)."""
    import torch

    from node.decoding.distributions import quantized
    from node.decoding.kv import CachedLM

    with torch.inference_mode():
        logits = CachedLM(model).extend(list(context), keep=keep)
        return quantized(logits, sampling)
