"""Where the link meets the chain: the endpoint in the registry, and a transcript job as chain data defines it.

The link itself never reads the chain; what both parties must agree on before cycle 0 (the job, the market's
domain, the parties, the verifier's committed head, the vocabulary) comes from here, read as hostile input like
every chain read of the nodes. The settlement transaction is built from a settled ledger (`settle_call`) with the
calldata helpers of node/chain/transcript.py.
"""

from __future__ import annotations

from eth_utils import to_checksum_address

from node.chain import transcript as T
from node.chain import transcript_messages as tm
from node.jobs import chaindata
from node.jobs.sessions import job_from_record
from node.link.job import Ledger, TranscriptJob

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


def transcript_spec(w3, system, job_id: int, tokenizer, from_block: int | None = None, max_positions=None):
    """The TranscriptJob of an accepted transcript-mode job, from chain data: its request, the head of `JobAccepted`
    and the vocabulary the market recorded, under the domain every message of it is signed for (this chain, the
    deployment's TranscriptSettlement)."""
    if system.transcript is None:
        raise chaindata.ChainDataError("this deployment has no TranscriptSettlement: no transcript-mode jobs")
    market = system.market
    view = chaindata.job_view(market, job_id)
    if not view.get("transcript"):
        raise chaindata.ChainDataError(f"job {job_id} is not a transcript-mode job")
    record = chaindata.job_request(market, job_id, from_block=from_block)
    job = job_from_record(record, tokenizer, max_positions)
    accepted = market.events.JobAccepted.get_logs(argument_filters={"jobId": job_id}, from_block=from_block or 0)
    if not accepted:
        raise chaindata.ChainDataError(f"job {job_id} has not been accepted: no verifier head yet")
    return TranscriptJob(
        job=job,
        domain=tm.Domain(w3.eth.chain_id, system.transcript.address),
        drafter=to_checksum_address(record.drafter),
        verifier=to_checksum_address(record.verifier),
        head=bytes(accepted[-1].args["chainHead"]),
        vocab_size=int(view["vocabSize"]),
    )


def settle_call(transcript, ledger: Ledger):
    """`TranscriptSettlement.settle` of a job both parties settled over the link (`ledger` holds both signatures of
    its Settlement): the Settlement, the signatures, the salt, the last reveal and every cycle (data availability)."""
    s = ledger.settlement
    if s is None or set(ledger.settlement_sigs) != {"drafter", "verifier"}:
        raise ValueError(f"job {ledger.spec.job_id} is not settled by both parties yet")
    cycles = [T.Cycle.of(ledger.drafts[c][0], ledger.verifications[c][0]) for c in range(s.cycles)]
    sigs = ledger.settlement_sigs
    last_reveal = ledger.verifications[s.cycles - 1][0].reveal
    return T.settle_call(transcript, s, sigs["drafter"], sigs["verifier"], ledger.salt, last_reveal, cycles)


def settle_on_chain(node, ledger: Ledger) -> int:
    """Send the settlement from `node` (either party) once, under `job:{id}:settle`."""
    return node.transact(f"job:{ledger.spec.job_id}:settle", settle_call(node.system.transcript, ledger))


def force_evidence(w3, transcript, job_id: int, from_block: int = 0) -> tuple[dict, list[T.Cycle]]:
    """The Evidence and the cycles of the job's latest force move: its ForceEvidence log (the `forceMove` call as the
    contract read it, whoever sent it: an account, a contract wallet, an EIP-7702 account), read as the contract
    reads it (node/chain/calldata.py: a dirty padding byte does not hide it)."""
    moved = transcript.events.ForceMoved().get_logs(from_block=from_block, argument_filters={"jobId": job_id})
    if not moved:
        raise chaindata.ChainDataError(f"job {job_id} has no force move")
    try:
        args = T.force_move_call(w3, transcript, moved[-1].transactionHash, job_id)
        return args["e"], T.unpack_cycles(args["cycles"])
    except (LookupError, ValueError, KeyError) as exc:
        raise chaindata.ChainDataError(f"job {job_id}: the force move does not read back: {exc}") from None


def forced_draft(w3, transcript, job_id: int, from_block: int = 0) -> tuple[tm.Draft, bytes]:
    """The Draft (and its signature) of the job's latest force move: what a verifier forced by its drafter must
    answer, whether or not that Draft ever came over the link. Checked like a Draft from the link by whoever takes
    it in (`LinkServer.take_draft`)."""
    e, _ = force_evidence(w3, transcript, job_id, from_block)
    try:
        draft = tm.Draft.from_message(dict(e["draft"]))
        signature = tm.canonical_signature(bytes(e["draftSig"]))
    except (tm.MessageRejected, TypeError, ValueError) as exc:
        raise chaindata.ChainDataError(f"job {job_id}: the forced Draft does not parse: {exc}") from None
    return draft, signature
