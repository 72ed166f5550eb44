"""A causal LM together with its KV cache and the exact tokens that cache holds.

Both sides of speculative decoding feed a few tokens at a time and then roll
the cache back to the accepted prefix. Keeping the cached tokens beside the
cache makes "what does this cache hold" a list you can read, and rollback a
crop: the prefix is never recomputed.

With engine_head=True (off by default, see CachedLM) the LM head over several rows is computed here:
MKL multiplies a few rows by a vocabulary-wide matrix far faster as
head @ hiddenᵀ than as transformers' hidden @ headᵀ (SmolLM2's 49,152 × 576
head over 5 rows: 17.8 ms against 30.3 ms on one thread; docs/engine.md, "The
LM head on the CPU"). The two differ in summation order (~1e-6 of a logit),
but the first was not bit-reproducible between two sessions that reached the
same state by different feeds (tests/test_roles.py's wrong-guess test: p
moved in the 8th digit; cause not pinned down, likely MKL choosing kernels by
buffer alignment). Replays must be bit-exact: nodes keep transformers' head.
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


# architectures whose logits are exactly lm_head(final hidden state): no bias, scale or soft-capping
_PLAIN_HEAD_ARCHITECTURES = {"LlamaForCausalLM", "GPT2LMHeadModel", "MistralForCausalLM", "Qwen2ForCausalLM"}
_ENGINE_HEAD_MIN_ROWS = 2  # one row: the two layouts cost the same (scripts/bench_head.py)


def _engine_head(model) -> torch.Tensor | None:
    """The (V, d) head weight when this class may compute the logits itself (CPU, a plain head), else None."""
    head = model.get_output_embeddings()
    if (
        model.device.type != "cpu"
        or type(model).__name__ not in _PLAIN_HEAD_ARCHITECTURES
        or not isinstance(head, torch.nn.Linear)
        or head.bias is not None
    ):
        return None
    return head.weight


class CachedLM:
    def __init__(self, model, engine_head: bool = False):
        """engine_head: compute the LM head here when it pays (see the module's docstring). Off by default: it was
        not bit-reproducible across feeds (see the module's docstring), and replays must be bit-exact;
        scripts/bench_head.py times both."""
        self.model = model
        self.device = model.device
        params = inspect.signature(model.forward).parameters
        # transformers 5 renamed past_key_values to cache; support both
        self._cache_kw = "cache" if "cache" in params else "past_key_values"
        self._can_trim_logits = "logits_to_keep" in params
        self._head = _engine_head(model) if engine_head else None
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
        if self._head is not None and keep >= _ENGINE_HEAD_MIN_ROWS:
            out = self.model.base_model(input_ids=ids, **kwargs)
            logits = torch.mm(self._head, out.last_hidden_state[0, -keep:].t()).t()
        else:
            if self._can_trim_logits:
                kwargs["logits_to_keep"] = keep  # skip the LM head on prompt positions nobody samples from
            out = self.model(input_ids=ids, **kwargs)
            logits = out.logits[0, -keep:]
        self.cache = getattr(out, self._cache_kw, None) or self.cache
        self.tokens.extend(tokens)
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
