"""Loading a target/draft pair: device and dtype defaults, and the checks that they can be paired.

Speculative decoding compares p and q token by token, so both models must
share one tokenizer and one vocabulary; a mismatch is an error at load time,
not a silently wrong distribution later.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import torch
from safetensors import SafetensorError
from transformers import AutoModelForCausalLM, AutoTokenizer

from node.decoding.model_id import CheckpointError, check_weights


def default_device() -> torch.device:
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def resolve_device(device=None) -> torch.device:
    """The device asked for (default: CUDA when available, else CPU), refused up front if torch cannot use it."""
    try:
        resolved = torch.device(device) if device is not None else default_device()
    except RuntimeError as exc:
        raise ValueError(f"unknown device {device!r}: {exc}") from None
    if resolved.type == "cuda" and not torch.cuda.is_available():
        built = f"built with CUDA {torch.version.cuda}" if torch.version.cuda else "a CPU-only build"
        raise ValueError(f"device {device!r} asked for, but torch {torch.__version__} ({built}) sees no CUDA device")
    if resolved.type not in ("cpu", "cuda"):
        raise ValueError(f"device {device!r}: only cpu and cuda are supported")
    return resolved


def default_dtype(device: torch.device) -> torch.dtype:
    """fp32 on CPU (bf16 matmuls are slow there and replays should be tight); bf16 on GPU."""
    return torch.bfloat16 if device.type == "cuda" else torch.float32


def load_model(path, device: torch.device, dtype: torch.dtype):
    """The checkpoint at `path`; a broken one is a `CheckpointError` naming what is wrong with which file."""
    check_weights(path)
    try:
        try:
            model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype)
        except TypeError:  # transformers 4.x spelled it torch_dtype
            model = AutoModelForCausalLM.from_pretrained(path, torch_dtype=dtype)
    except (OSError, SafetensorError) as exc:  # missing config.json or weights, unreadable files
        raise CheckpointError(f"cannot load the model at {path}: {str(exc).splitlines()[0]}") from None
    return model.to(device).eval()


def max_positions(model) -> int | None:
    """The positions the model attends over (prompt + generated tokens), None when its config names no limit.

    `model`: a loaded model, or the directory of a checkpoint (then its config.json is read; nothing is loaded).
    """
    if isinstance(model, (str, os.PathLike)):
        try:
            config = json.loads((Path(model) / "config.json").read_text())
        except (OSError, ValueError):
            return None
        return config.get("n_positions") or config.get("max_position_embeddings")
    config = model.config
    return getattr(config, "n_positions", None) or getattr(config, "max_position_embeddings", None)


def vocab_size(model) -> int | None:
    """The number of logits per position (the LM head's output width).

    `model`: a loaded model, or the directory of a checkpoint (then its config.json's `vocab_size`; None without one).
    """
    if isinstance(model, (str, os.PathLike)):
        try:
            config = json.loads((Path(model) / "config.json").read_text())
        except (OSError, ValueError):
            return None
        size = config.get("vocab_size")
        return int(size) if size else None
    head = model.get_output_embeddings()
    return head.weight.shape[0] if head is not None else model.config.vocab_size


def check_same_vocabulary(target, draft) -> None:
    t, d = vocab_size(target), vocab_size(draft)
    if t != d:
        raise ValueError(f"target and draft vocabularies differ: {t} vs {d} logits per position")


def check_same_tokenizer(target_tokenizer, draft_tokenizer) -> None:
    problems = []
    if target_tokenizer.get_vocab() != draft_tokenizer.get_vocab():
        problems.append("vocabularies differ")
    backends = [getattr(tok, "backend_tokenizer", None) for tok in (target_tokenizer, draft_tokenizer)]
    if all(backends) and json.loads(backends[0].to_str()) != json.loads(backends[1].to_str()):
        problems.append("tokenization rules (merges, normalizer or pre-tokenizer) differ")
    for name in ("eos_token_id", "bos_token_id", "pad_token_id", "unk_token_id"):
        if getattr(target_tokenizer, name, None) != getattr(draft_tokenizer, name, None):
            problems.append(f"{name} differs")
    if problems:
        raise ValueError("target and draft do not share a tokenizer: " + "; ".join(problems))


def load_tokenizer(path):
    return AutoTokenizer.from_pretrained(path)
