"""The engine on a CUDA device: what only a GPU run can show.

Skipped where torch sees no CUDA device; tests/test_decoding.py covers the
same engine on CPU, the bf16 path included. scripts/device_check.sh runs
this file on a lent GPU (without conftest.py, so no chain is needed).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from eth_hash.auto import keccak

from node import protocol
from node.decoding import DraftSession, SpeculativeDecoder, VerifySession
from node.decoding.distributions import SamplingParams, quantized
from node.decoding.kv import CachedLM
from node.decoding.loading import load_model, load_tokenizer
from node.decoding.scorer import default_tolerance_wad
from tests.fixtures.tiny_pair import build_pair, bundled_pair

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="torch sees no CUDA device")

CUDA, CPU = torch.device("cuda"), torch.device("cpu")
PROMPT = "def __init__(self, "


@pytest.fixture(scope="module")
def pair_paths(tmp_path_factory):
    return bundled_pair() or build_pair(tmp_path_factory.mktemp("tiny_pair"))


@pytest.fixture(scope="module")
def models(pair_paths):
    """(target, draft) per (device, dtype), loaded once."""
    loaded = {}

    def get(device, dtype):
        if (device, dtype) not in loaded:
            loaded[device, dtype] = tuple(load_model(path, device, dtype) for path in pair_paths)
        return loaded[device, dtype]

    return get


@pytest.fixture(scope="module")
def prompt(pair_paths):
    return load_tokenizer(pair_paths[0])(PROMPT)["input_ids"]


def seed_for(i: int) -> bytes:
    return keccak(b"verifier seed " + i.to_bytes(8, "big"))


def test_cuda_is_the_default_device_and_bf16_its_default_dtype(pair_paths):
    decoder = SpeculativeDecoder.from_pretrained(*pair_paths)
    for model in (decoder.target, decoder.draft):
        assert model.device.type == "cuda" and model.dtype == torch.bfloat16


@pytest.mark.parametrize("gamma", [1, 4])
def test_fp32_greedy_on_cuda_equals_the_targets_own_greedy_generate(models, prompt, gamma):
    target, draft = models(CUDA, torch.float32)
    ours = SpeculativeDecoder(target, draft, gamma=gamma, temperature=0).generate(
        prompt, 64, job_id=gamma, verifier_seed=seed_for(gamma)
    )
    with torch.inference_mode():
        reference = target.generate(
            torch.tensor([prompt], device=CUDA), max_new_tokens=64, do_sample=False, eos_token_id=None, pad_token_id=0
        )[0, len(prompt) :].tolist()
    assert ours.tokens == reference


def test_bf16_sampling_on_cuda_is_deterministic_faithful_and_passes_the_chain_checks(models, prompt):
    target, draft = models(CUDA, torch.bfloat16)
    decoder = SpeculativeDecoder(target, draft, gamma=4, verify_draft=True)
    result = decoder.generate(prompt, 96, job_id=7, verifier_seed=seed_for(7))
    assert len(result.tokens) == 96
    assert result.draft_faults == 0  # the replay on the same GPU stays inside bf16's tolerance
    for c in result.cycles:
        root = protocol.draft_root(7, c.cycle, c.proposals, c.q)
        assert protocol.count_accepted(c.reveal, root, c.q, c.p, 0) == c.accepted  # the local engine: salt 0
        assert c.emitted == (c.proposals[: c.accepted] + (c.out_token,))[: len(c.emitted)]
    assert decoder.generate(prompt, 96, job_id=7, verifier_seed=seed_for(7)).tokens == result.tokens


def run_job(job, seed, drafter_model, target_model, replay_model) -> tuple[list[int], int]:
    """A drafter and a verifier on whatever devices their models live on, as two nodes would run them."""
    drafter = DraftSession(drafter_model, job)
    verifier = VerifySession(target_model, job, seed, draft_model=replay_model)
    tokens, faults = [], 0
    while not verifier.done:
        verification = verifier.verify(verifier.cycle, drafter.propose(verifier.cycle))
        faults += len(verification.draft_faults)
        verifier.advance(verification.emitted)
        drafter.advance(verification.emitted)
        tokens.extend(verification.emitted)
    return tokens, faults


def test_a_cpu_verifier_accepts_an_honest_cuda_drafter_and_catches_a_biased_one(models, prompt):
    """Different hardware, same model: the replay tolerance absorbs the last digits, not a lie."""
    _, cuda_draft = models(CUDA, torch.float32)
    cpu_target, cpu_draft = models(CPU, torch.float32)
    job = SpeculativeDecoder(cpu_target, cpu_draft, gamma=4).job(prompt, 64, job_id=11)
    tokens, faults = run_job(job, seed_for(11), cuda_draft, cpu_target, cpu_draft)
    assert len(tokens) == 64 and faults == 0

    class Biased(DraftSession):  # claims a q twice the true one at every proposal
        def _choose(self, cycle, index, row, u):
            x, q = super()._choose(cycle, index, row, u)
            return x, min(2 * q, protocol.WAD)

    drafter = Biased(cuda_draft, job)
    verifier = VerifySession(cpu_target, job, seed_for(11), draft_model=cpu_draft)
    verification = verifier.verify(0, drafter.propose(0))
    assert {f.kind for f in verification.draft_faults} == {"q"}  # the tokens are honest, only q is inflated


def test_target_probabilities_on_cuda_agree_with_a_cpu_replay_within_the_fp32_tolerance(models, prompt):
    """A referee replaying on CPU what an fp32 verifier computed on a GPU (docs/protocol.md §6), at every position of
    a real generation, in one forward and token by token through the KV cache as a decoding node computes them."""
    cpu_target, cpu_draft = models(CPU, torch.float32)
    cuda_target, _ = models(CUDA, torch.float32)
    ids = (
        prompt
        + SpeculativeDecoder(cpu_target, cpu_draft, gamma=4)
        .generate(prompt, 128, job_id=13, verifier_seed=seed_for(13))
        .tokens
    )
    sampling = SamplingParams()
    with torch.inference_mode():
        reference = quantized(cpu_target(torch.tensor([ids])).logits[0], sampling)
        one_forward = quantized(cuda_target(torch.tensor([ids], device=CUDA)).logits[0], sampling)
        lm = CachedLM(cuda_target)
        stepwise = quantized(torch.cat([lm.extend(ids[:1])] + [lm.extend([t]) for t in ids[1:]]), sampling)
    for replay in (one_forward, stepwise):
        gap = int(np.abs(replay - reference).max())
        assert gap <= default_tolerance_wad(torch.float32), gap / protocol.WAD
