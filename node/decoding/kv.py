"""A causal LM together with its KV cache and the exact tokens that cache holds.

Both sides of speculative decoding feed a few tokens at a time and then roll
the cache back to the accepted prefix. Keeping the cached tokens beside the
cache makes "what does this cache hold" a list you can read, and rollback a
crop: the prefix is never recomputed.
"""

from __future__ import annotations

import inspect
import time

import torch
from transformers import DynamicCache


def _new_cache(model) -> DynamicCache:
    try:
        return DynamicCache(config=model.config)
    except TypeError:  # transformers 4.x: no config argument
        return DynamicCache()


class CachedLM:
    def __init__(self, model):
        self.model = model
        self.device = model.device
        params = inspect.signature(model.forward).parameters
        # transformers 5 renamed past_key_values to cache; support both
        self._cache_kw = "cache" if "cache" in params else "past_key_values"
        self._can_trim_logits = "logits_to_keep" in params
        self.cache = _new_cache(model)
        self.tokens: list[int] = []
        self.forward_s = 0.0  # wall time spent in forward passes, for the cost model
        self.forwards = 0

    def extend(self, tokens: list[int], keep: int = 1) -> torch.Tensor:
        """Feed `tokens` after the cached ones; return the (keep, V) logits of the last `keep` fed positions."""
        if not 1 <= keep <= len(tokens):
            raise ValueError(f"cannot keep {keep} logits from {len(tokens)} fed tokens")
        start = time.perf_counter()
        ids = torch.tensor([tokens], dtype=torch.long, device=self.device)
        kwargs = {self._cache_kw: self.cache, "use_cache": True}
        if self._can_trim_logits:
            kwargs["logits_to_keep"] = keep  # skip the LM head on prompt positions nobody samples from
        out = self.model(input_ids=ids, **kwargs)
        self.cache = getattr(out, self._cache_kw, None) or self.cache
        self.tokens.extend(tokens)
        logits = out.logits[0, -keep:]
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)  # the caller copies to host next anyway; this makes the timing honest
        self.forward_s += time.perf_counter() - start
        self.forwards += 1
        return logits

    def crop(self, length: int) -> None:
        """Roll the cache back to its first `length` tokens."""
        extra = len(self.tokens) - length
        if extra > 0:
            self.cache.crop(-extra)  # negative: remove that many (the form transformers 4 and 5 both accept)
            del self.tokens[length:]
