"""Sampling settings, applied identically to both models' logits before quantization (docs/protocol.md §3).

One function, `probabilities`, turns logits into the distribution a job
samples from; the drafter, the verifier and any replaying referee all call
it, so p and q are shaped by exactly the same rule. `quantized` then hands
the rows to protocol.quantize_rows, the protocol's only quantizer.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from node import protocol


@dataclass(frozen=True)
class SamplingParams:
    temperature: float = 1.0  # 0 means greedy: one-hot distributions
    top_k: int = 0  # 0 keeps the whole vocabulary
    top_p: float = 1.0  # 1 keeps the whole vocabulary

    def __post_init__(self):
        if not self.temperature >= 0:
            raise ValueError(f"temperature must be >= 0, got {self.temperature}")
        if self.top_k < 0:
            raise ValueError(f"top_k must be >= 0, got {self.top_k}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")


def probabilities(logits: torch.Tensor, params: SamplingParams, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """(rows, V) logits -> (rows, V) probabilities: temperature, then top-k, then top-p.

    The order is the one transformers' warpers use, so the same settings mean
    the same thing here as in `model.generate`. Steps that change nothing
    (temperature 1, top_k 0, top_p 1) are skipped: this runs once per draft step.
    """
    logits = logits.float()
    if params.temperature == 0:
        # argmax picks the lowest id among equal maxima, as greedy `generate` does
        return torch.nn.functional.one_hot(logits.argmax(-1), logits.shape[-1]).to(dtype)
    if params.temperature != 1:
        logits = logits / params.temperature
    if 0 < params.top_k < logits.shape[-1]:
        kth_largest = torch.topk(logits, params.top_k, dim=-1).values[..., -1:]
        logits = logits.masked_fill(logits < kth_largest, float("-inf"))
    if params.top_p < 1:
        # keep the smallest most-likely set whose mass reaches top_p: drop a token
        # once the mass of the tokens ranked above it already reaches top_p
        sorted_logits, order = logits.sort(dim=-1, descending=True)
        sorted_probs = sorted_logits.softmax(-1)
        drop_sorted = (sorted_probs.cumsum(-1) - sorted_probs) >= params.top_p
        drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
        logits = logits.masked_fill(drop, float("-inf"))
    return logits.softmax(-1, dtype=dtype)


def quantized(logits: torch.Tensor, params: SamplingParams) -> np.ndarray:
    """(rows, V) logits -> (rows, V) int64 WAD rows, each summing to exactly WAD.

    One device->host copy per call: the protocol math (quantize, invcdf,
    residual) runs on the CPU in numpy, so it is bit-identical on every node.
    """
    probs = probabilities(logits, params, dtype=torch.float64)
    return protocol.quantize_rows(probs.cpu().numpy())


def top_k(wad_rows: np.ndarray, k: int) -> list[list[tuple[int, int]]]:
    """Per position, the k most likely tokens as (token, WAD), most likely first, lower id first on ties.

    This is what an accused party posts in a dispute (docs/protocol.md §6, step 2).
    """
    order = np.argsort(-wad_rows, axis=1, kind="stable")[:, :k]
    return [[(int(t), int(row[t])) for t in ids] for row, ids in zip(wad_rows, order)]
