"""What a drafter node reads from chain, checked as hostile input (docs/protocol.md §10 "Values are validated at the
boundary"): a job it would serve, and each verified cycle's output.

Nothing here raises on bad data: a job gets a refusal reason (the node logs it and never acts on the job), and a
cycle's output is rebuilt or sanitized with a list of problems (the node logs them and keeps drafting, so that it
never misses a deadline because of what its counterparty posted). Pure functions: no web3, no model.

* A job is refused when its price per accepted token is below the node's `--min-price`, its γ is outside
  1..MAX_GAMMA, or (once the market records it) its vocabulary differs from the node's draft model's.
* A cycle's output must decode (4 bytes per token), hold at most γ + 1 tokens, be the first `accepted` of the node's
  own proposals then `outToken` (cut after EOS / at maxTokens), and every token must be inside the vocabulary. An
  output that does not decode, or an `accepted` above γ, is rebuilt from the node's proposals, `accepted` (capped
  at γ) and `outToken`; a token outside the vocabulary is replaced by `REPLACEMENT_TOKEN` in the node's own context
  (no model defines a next token after it, and referees judge nothing after it: node/roles/referee/node.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from node import protocol

MAX_GAMMA = 16  # InferenceMarket.MAX_GAMMA
REPLACEMENT_TOKEN = 0  # what stands for an out-of-range token in the node's own context


def job_refusal(
    request: Mapping[str, Any], min_price_wei: int, vocab_size: int | None = None, chain_vocab: int | None = None
) -> str | None:
    """Why a drafter declines a job (a sentence for the log and the store), or None when it serves it."""
    try:
        price, gamma = int(request["pricePerAcceptedToken"]), int(request["gamma"])
    except (KeyError, TypeError, ValueError) as exc:
        return f"malformed job request ({exc!r})"
    if price < min_price_wei:
        return f"price per accepted token {price} wei is below my minimum {min_price_wei} wei (--min-price)"
    if not 1 <= gamma <= MAX_GAMMA:
        return f"γ {gamma} is outside 1..{MAX_GAMMA}"
    if chain_vocab is not None and vocab_size is not None and int(chain_vocab) != vocab_size:
        return f"the job's vocabulary {chain_vocab} is not my draft model's ({vocab_size})"
    return None


def decode_output(data: Any) -> list[int] | None:
    """CycleVerified.output (4 big-endian bytes per token), or None when it does not decode."""
    try:
        raw = bytes(data)
    except (TypeError, ValueError):
        return None
    if len(raw) % 4:
        return None
    return [int.from_bytes(raw[i : i + 4], "big") for i in range(0, len(raw), 4)]


def expected_output(
    proposals: Sequence[int], accepted: int, out_token: int, eos_token: int | None, remaining: int
) -> list[int]:
    """What the contract emits for a cycle: the first `accepted` proposals then outToken, cut after EOS and to the
    `remaining` budget of maxTokens (protocol.truncate_emitted)."""
    return protocol.truncate_emitted(list(proposals[:accepted]) + [out_token], eos_token, remaining)


def checked_output(
    raw_output: Any,
    accepted: Any,
    out_token: Any,
    *,
    gamma: int,
    vocab_size: int,
    proposals: Sequence[int] | None = None,
    eos_token: int | None = None,
    remaining: int | None = None,
) -> tuple[tuple[int, ...], list[str]]:
    """(the output the node continues from, the problems found: empty when the output is sound).

    `raw_output` is the event's packed bytes, or already a list of tokens; `proposals` the node's own proposals
    of the cycle (None when it has no transcript); `remaining` the job's budget of tokens before the cycle."""
    problems: list[str] = []
    tokens = list(raw_output) if isinstance(raw_output, list | tuple) else decode_output(raw_output)
    try:
        n, out = int(accepted), int(out_token)
    except (TypeError, ValueError):
        n, out = 0, REPLACEMENT_TOKEN
        problems.append(f"accepted {accepted!r} / outToken {out_token!r} are not integers")
    if not 0 <= n <= gamma:
        problems.append(f"accepted {n} is outside 0..γ={gamma}")
        n = min(max(n, 0), gamma)
    rebuilt = None
    if proposals is not None:
        rebuilt = expected_output(proposals, n, out, eos_token, gamma + 1 if remaining is None else remaining)
    if tokens is None:
        problems.append(f"the packed output {raw_output!r:.80} does not decode (4 bytes per token)")
        tokens = rebuilt if rebuilt is not None else [out]
    elif len(tokens) == 0 or len(tokens) > gamma + 1:
        problems.append(f"the output has {len(tokens)} tokens, not 1..γ+1={gamma + 1}")
        tokens = rebuilt if rebuilt is not None else tokens[: gamma + 1] or [out]
    elif rebuilt is not None and remaining is not None and tokens != rebuilt:
        # the chain's output is what everyone else replays: keep it, but say so
        problems.append(f"the output {tokens} is not my {n} accepted proposals then outToken {out}: {rebuilt}")
    bad = [t for t in tokens if not 0 <= t < vocab_size]
    if not 0 <= out < vocab_size:
        problems.append(f"outToken {out} is outside the vocabulary ({vocab_size})")
    if bad:
        problems.append(f"tokens {bad} of the output are outside the vocabulary ({vocab_size})")
    return sanitized(tokens, vocab_size), problems


def sanitized(tokens: Sequence[int], vocab_size: int) -> tuple[int, ...]:
    """The tokens with every one outside 0..vocab_size-1 replaced by REPLACEMENT_TOKEN (a context a model can
    take)."""
    return tuple(int(t) if 0 <= int(t) < vocab_size else REPLACEMENT_TOKEN for t in tokens)
