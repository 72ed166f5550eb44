"""From an on-chain job to the engine's `DecodingJob` (and a session resumed at a cycle), and the verifier-seed
convention (docs/node.md).

One mapping, used by every node, the referee and the requester CLI alike, so that all parties decode
the same prompt into the same tokens and the same sampling settings:

* the prompt bytes of `submitJob` are UTF-8 text, tokenized with the shared tokenizer (no special tokens
  added; the model id covers the tokenizer, so every party tokenizes identically);
* `temperature` and `topP` are WAD (temperature 0 = greedy, topP WAD = off), `topK` 0 = off;
* `eosToken` uint32 max means "no EOS" (the job runs to maxTokens);
* a prompt fits when prompt tokens + maxTokens + γ <= the model's positions.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from eth_hash.auto import keccak

from node import protocol
from node.chain.enums import NO_EOS
from node.decoding.distributions import SamplingParams
from node.decoding.messages import DecodingJob

WAD = protocol.WAD
VERIFIER_SEED_TAG = b"verispec.verifier-seed"


class JobRefused(ValueError):
    """A node cannot serve this job (prompt not UTF-8 / empty / too long, bad sampling settings, ...)."""


def prompt_tokens(tokenizer, prompt: bytes) -> list[int]:
    """The prompt's token ids: UTF-8 decode (strict), then the shared tokenizer without special tokens."""
    try:
        text = bytes(prompt).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise JobRefused(f"the prompt is not UTF-8 text: {exc}") from None
    return [int(t) for t in tokenizer(text, add_special_tokens=False)["input_ids"]]


def sampling_params(request: Mapping[str, Any]) -> SamplingParams:
    """SamplingParams from the request's WAD temperature / topP and topK."""
    temperature, top_p, top_k = int(request["temperature"]), int(request["topP"]), int(request["topK"])
    if not 0 < top_p <= WAD:
        raise JobRefused(f"topP {top_p} is not in 1..WAD")
    return SamplingParams(temperature=temperature / WAD, top_k=top_k, top_p=top_p / WAD)


def eos_token(request: Mapping[str, Any]) -> int | None:
    eos = int(request["eosToken"])
    return None if eos == NO_EOS else eos


def positions_needed(prompt_length: int, max_tokens: int, gamma: int) -> int:
    """docs/node.md: a job needs prompt tokens + maxTokens + γ positions (one more than the engine's minimum)."""
    return prompt_length + max_tokens + gamma


def check_fits(prompt_length: int, max_tokens: int, gamma: int, max_positions: int | None) -> None:
    needed = positions_needed(prompt_length, max_tokens, gamma)
    if max_positions is not None and needed > max_positions:
        raise JobRefused(
            f"the prompt does not fit: {prompt_length} prompt tokens + {max_tokens} max tokens + "
            f"γ {gamma} = {needed} > {max_positions} positions"
        )


def engine_job(
    job_id: int, request: Mapping[str, Any], prompt: bytes, tokenizer, max_positions: int | None = None
) -> DecodingJob:
    """The engine's DecodingJob for on-chain job `job_id` (its JobRequest fields by name, and its prompt bytes).

    Raises JobRefused when no node should serve it: prompt not UTF-8 or empty, or not fitting
    `max_positions` (when given), or sampling settings the engine rejects.
    """
    tokens = prompt_tokens(tokenizer, prompt)
    if not tokens:
        raise JobRefused("the prompt is empty")
    max_tokens, gamma = int(request["maxTokens"]), int(request["gamma"])
    check_fits(len(tokens), max_tokens, gamma, max_positions)
    try:
        return DecodingJob(
            job_id=int(job_id),
            prompt=tuple(tokens),
            max_new_tokens=max_tokens,
            gamma=gamma,
            sampling=sampling_params(request),
            eos_token_id=eos_token(request),
        )
    except ValueError as exc:
        raise JobRefused(str(exc)) from None


def job_from_record(record, tokenizer, max_positions: int | None = None) -> DecodingJob:
    """`engine_job` of a `chaindata.ChainJob`."""
    return engine_job(record.job_id, record.request, record.prompt, tokenizer, max_positions)


def resume_draft_session(session, context: list[int], cycle: int):
    """Put a fresh DraftSession of a job at `cycle` with `context` = prompt + every token emitted so far (from
    chain data).

    Its cache is empty; the next `propose` feeds the whole context (the session feeds
    `context[len(cache):]`), so this is exact up to the last digits of a prefill versus an
    incremental forward. Used after a restart, or when the in-memory session fell out of step.
    """
    session.context = list(context)
    session.cycle = int(cycle)
    return session


def resume_verify_session(session, context: list[int], cycle: int, generated: int):
    """Put a fresh VerifySession at `cycle` (see `resume_draft_session`); `generated` = tokens emitted so far."""
    session.context = list(context)
    session.cycle = int(cycle)
    session.generated = int(generated)
    session.done = False
    return session


def drafter_salt(store, job_id: int, role: str) -> int:
    """The job's drafter salt (docs/protocol.md §3: `commitFirstDraft`'s, or a transcript job's in its genesis): drawn
    here and nowhere else, and in `store` (its `job_salts`) before it is returned, so before anything carrying it
    is signed or sent; a resend, or a restart, carries the same salt. `role`: the drafter's rows in the store."""
    return store.job_salt(job_id, role, make=protocol.new_salt)


def _private_key_bytes(private_key: Any) -> bytes:
    key = getattr(private_key, "key", private_key)  # a LocalAccount
    if isinstance(key, str):
        key = bytes.fromhex(key.removeprefix("0x"))
    key = bytes(key)
    if len(key) != 32:
        raise ValueError(f"a private key is 32 bytes, got {len(key)}")
    return key


def verifier_seed(private_key: Any, job_id: int) -> bytes:
    """keccak256("verispec.verifier-seed" ‖ private key ‖ uint256(jobId)): secret, recomputable after a restart.

    `private_key`: 32 bytes, a 0x-hex string or a LocalAccount. The hash-chain head committed at
    acceptJob is `protocol.hash_chain(seed, protocol.hash_chain_length(maxTokens))`.
    """
    return keccak(VERIFIER_SEED_TAG + _private_key_bytes(private_key) + int(job_id).to_bytes(32, "big"))


def chain_head(private_key: Any, job_id: int, max_tokens: int) -> bytes:
    """The hash-chain head a verifier commits for a job (acceptJob)."""
    return protocol.hash_chain(verifier_seed(private_key, job_id), protocol.hash_chain_length(max_tokens))
