"""Exact speculative decoding that makes every decision with the protocol math (node/protocol.py).

    proposer.DraftSession   draft model + cache: K proposals per cycle from the public draft uniforms
    scorer.VerifySession    target model + cache (+ optional draft replay): one pass, one verdict per cycle
    sampler.decide          pure: the on-chain accept rule, then the residual or bonus token
    decoder.SpeculativeDecoder  both models in one process; generate() is the two sessions' cycle loop

See docs/engine.md.
"""

from node.decoding.decoder import DecodedCycle, GenerationResult, SpeculativeDecoder, Timings
from node.decoding.distributions import SamplingParams, probabilities, quantized, top_k
from node.decoding.messages import DecodingJob, Draft, DraftFault, Verification
from node.decoding.model_id import model_id, model_id_of, tokenizer_digest
from node.decoding.proposer import DraftSession
from node.decoding.scorer import VerifySession

__all__ = [
    "DecodedCycle",
    "DecodingJob",
    "Draft",
    "DraftFault",
    "DraftSession",
    "GenerationResult",
    "SamplingParams",
    "SpeculativeDecoder",
    "Timings",
    "Verification",
    "VerifySession",
    "model_id",
    "model_id_of",
    "probabilities",
    "quantized",
    "tokenizer_digest",
    "top_k",
]
