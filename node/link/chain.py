"""Where the link meets the chain: the endpoint in the registry, and a transcript job as chain data defines it.

The link itself never reads the chain; what both parties must agree on before cycle 0 (the job, the market's
domain, the parties, the verifier's committed head, the vocabulary) comes from here, read as hostile input like
every chain read of the nodes. Settlement is the settlement contract's: `settle_on_chain` is the one call the
integrator wires to it (`TranscriptSettlement`, built beside this branch).
"""

from __future__ import annotations

from typing import Any

from eth_utils import to_checksum_address

from node.chain import transcript_messages as tm
from node.link.job import TranscriptJob
from node.roles import chaindata
from node.roles.jobs import job_from_record

MAX_ENDPOINT_BYTES = 256  # StakingRegistry.MAX_ENDPOINT_BYTES


class EndpointError(ValueError):
    """No usable endpoint: the registry has none for the verifier, or what it has is not a ws:// URL."""


def _has_function(contract, name: str) -> bool:
    return any(e.get("type") == "function" and e.get("name") == name for e in contract.abi)


def check_endpoint(url: str) -> str:
    """A link endpoint is a ws:// or wss:// URL of at most MAX_ENDPOINT_BYTES bytes."""
    if not isinstance(url, str) or not url.startswith(("ws://", "wss://")) or len(url.encode()) > MAX_ENDPOINT_BYTES:
        raise EndpointError(f"{str(url)[:80]!r} is not a ws:// or wss:// URL of at most {MAX_ENDPOINT_BYTES} bytes")
    return url


def listen_url(host: str, port: int) -> str:
    return f"ws://[{host}]:{port}" if ":" in host else f"ws://{host}:{port}"


def publish_endpoint(node, url: str) -> int:
    """Send `setEndpoint(url)` from a node (once per URL: its idempotency key names it); 0 where the registry has no
    endpoint (an older deployment) or the endpoint is already published."""
    registry = node.system.registry
    if not _has_function(registry, "setEndpoint"):
        return 0
    if _has_function(registry, "endpointOf") and registry.functions.endpointOf(node.address).call() == url:
        return 0
    return node.transact(f"endpoint:{check_endpoint(url)}", registry.functions.setEndpoint(url))


def endpoint_of(registry, verifier: str) -> str:
    """The verifier's published link endpoint, checked; EndpointError when it has none."""
    if not _has_function(registry, "endpointOf"):
        raise EndpointError("this deployment's registry publishes no endpoints (deploy a newer one)")
    url = registry.functions.endpointOf(to_checksum_address(verifier)).call()
    if not url:
        raise EndpointError(f"verifier {verifier} has published no endpoint")
    return check_endpoint(url)


def transcript_spec(w3, market, job_id: int, tokenizer, from_block: int | None = None, max_positions=None):
    """The TranscriptJob of an accepted job, from chain data: its request, the head of `JobAccepted` and the
    vocabulary the market recorded, under the domain (this chain, this market) every message is signed for."""
    record = chaindata.job_request(market, job_id, from_block=from_block)
    job = job_from_record(record, tokenizer, max_positions)
    accepted = market.events.JobAccepted.get_logs(argument_filters={"jobId": job_id}, from_block=from_block or 0)
    if not accepted:
        raise chaindata.ChainDataError(f"job {job_id} has not been accepted: no verifier head yet")
    view = chaindata.job_view(market, job_id)
    return TranscriptJob(
        job=job,
        domain=tm.Domain(w3.eth.chain_id, market.address),
        drafter=to_checksum_address(record.drafter),
        verifier=to_checksum_address(record.verifier),
        head=bytes(accepted[-1].args["chainHead"]),
        vocab_size=int(view["vocabSize"]),
    )


def settle_on_chain(node, package: dict[str, Any]) -> int:
    """Post a co-signed Settlement (`drafter.settlement_package`) from `node`: the settlement contract's one call.

    Not wired yet: the transcript settlement contract is built beside this branch; the integrator binds this to its
    settle function (settlement, both signatures, the records, tokens and q, the salt)."""
    settle = getattr(node.system, "transcript", None)
    if settle is None or not _has_function(settle, "settle"):
        raise NotImplementedError("this deployment has no transcript settlement contract (TranscriptSettlement)")
    s = package["settlement"]
    sigs = package["signatures"]
    call = settle.functions.settle(
        s.as_tuple(),
        sigs["drafter"],
        sigs["verifier"],
        package["records"],
        package["tokens"],
        package["q"],
        package["salt"],
    )
    return node.transact(f"job:{s.job_id}:settle", call)
