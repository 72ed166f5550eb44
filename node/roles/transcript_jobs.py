"""Transcript-mode jobs (docs/protocol.md "Transcript mode (v2)") in the serving nodes.

A transcript job's cycles never touch the chain: the node loop only accepts it (verifier: acceptJob with its
hash-chain head, as in per-cycle mode), runs it over the link (node/link) and settles it (drafter:
`TranscriptSettlement.settle` with both signatures), then finalizes it after the challenge window like any job.

- The verifier opens each accepted job on its `LinkServer` (`serve verifier --listen`); without one it refuses
  transcript jobs, a refusal that depends on its configuration (`refusal_config` holds whether it listens), so a
  restart with `--listen` decides them again.
- The drafter runs `DrafterLink` in a worker thread with its own event loop (the node's chain loop never waits on
  the link), against the endpoint the verifier published in the registry. When the link settles, it sends the
  settlement under `job:{id}:settle` (once, whatever restarts: TxSender keys). After kill -9 the link resumes from
  the store (every signed message is there before it is acted on), and a job already settled over the link is
  settled on chain without reconnecting.

A silent verifier (no progress over the link for `link_silence_s`) is forced: the drafter posts its pending Draft
and the last co-signed state (`forceMove`, `job:{id}:force:{k}`), and claims it after the deadline (`claimForce`)
unless the verifier answers. A verifier answers a force posted against it from its store (`answerForce` with its
stored Verification of the pending Draft). A Verification the accept rule refutes is never counter-signed: the
drafter keeps it in its store as evidence and forces the same way, so the verifier must answer Draft k on chain,
where the contract re-runs the rule. Not built yet: the verifier's own force against a silent drafter, and rule
challenges of settled jobs from the nodes.
"""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass

from node.chain.enums import JobStatus
from node.roles.jobs import chain_head, verifier_seed
from node.roles.schedule import JOB

RECHECK_S = 2  # chain seconds between rechecks of a job running over the link (its end marks it dirty anyway)


@dataclass
class LinkRun:
    """A drafter's link run of one job: the worker thread, its DrafterLink, and how it ended."""

    link: object
    thread: threading.Thread
    result: object = None
    error: BaseException | None = None


def is_transcript(node, job_id: int) -> bool:
    """Whether a job is a transcript-mode job (`getJob().transcript`: fixed at submission, so read once)."""
    known = node.transcript_ids
    if job_id not in known:
        view = node.job_view(job_id)
        known[job_id] = bool(view.get("transcript")) if hasattr(view, "get") else False
    return known[job_id]


def spec_of(node, job_id: int):
    from node.link.chain import transcript_spec

    return transcript_spec(node.w3, node.system, job_id, node.tokenizer, node.start_block, node.max_positions)


def serve(node, record) -> None:
    """Track a taken transcript job (recorded active, with the other party) outside `node.jobs`: the per-cycle
    work (speculation, cycle-0 drafting) never sees it."""
    other = "verifier" if node.role == "drafter" else "drafter"
    node.store.save_job(record.job_id, node.role, "active", {other: getattr(record, other), "mode": "transcript"})
    node.schedule.track(JOB, record.job_id)
    node.log.info("job %d: a transcript-mode job, run over the link", record.job_id)


def _finish(node, job_id: int, view) -> int:
    """After the job left Running: finalize after the window (PartyNode.settle), retire once finalized."""
    if view["status"] in (JobStatus.Finalized, JobStatus.None_):
        node.transcript_ids.pop(job_id, None)
        return node.retire_job(job_id)
    if view["status"] == JobStatus.Open:  # past the accept deadline: the requester cancels it
        node.schedule.defer_until(JOB, job_id, node.chain_time() + 3600)
        return 0
    return node.settle(job_id, view)


# ------------------------------------------------------------------ the verifier


def verifier_work(node, job_id: int) -> int:
    view = node.job_view(job_id)
    status = view["status"]
    node.schedule.set_active(job_id, status == JobStatus.Running)
    if status == JobStatus.Open and node.chain_time() <= view["deadline"]:
        if node.link_server is None:
            node.refuse(job_id, "a transcript-mode job: this verifier serves them only with --listen HOST:PORT")
            return 0
        if int(view["vocabSize"]) != node.vocab_size:
            node.refuse(job_id, f"its vocabulary is {int(view['vocabSize'])}, my target model's {node.vocab_size}")
            return 0
        _, job = node.rebuild_job(job_id)
        limits = node.link_server.limits  # what the link would refuse to open must not be accepted (then forced)
        if job.max_new_tokens > limits.max_tokens or job.gamma > limits.max_gamma:
            node.refuse(job_id, f"{job.max_new_tokens} tokens, γ {job.gamma}: over my link's limits")
            return 0
        head = chain_head(node.account.key, job_id, job.max_new_tokens)
        return node.transact(f"job:{job_id}:accept", node.market.functions.acceptJob(job_id, head))
    if status == JobStatus.Running:
        sent = answer_force(node, job_id)
        if sent:
            return sent
        if node.link_server is None:
            node.log.error("job %d: a transcript job I accepted, but I serve no link (restart with --listen)", job_id)
        elif job_id not in node.link_server.jobs:
            open_on_link(node, job_id)
        node.schedule.defer_until(JOB, job_id, node.chain_time() + RECHECK_S)
        return 0
    return _finish(node, job_id, view)


def open_on_link(node, job_id: int) -> None:
    """Serve the accepted job on the node's LinkServer, from the server's own event loop (its jobs are that loop's)."""
    spec, seed = spec_of(node, job_id), verifier_seed(node.account.key, job_id)
    server = node.link_server
    loop = getattr(server, "loop", None)
    if loop is None:
        server.open_job(spec, seed)
    else:

        async def _open():
            return server.open_job(spec, seed)

        asyncio.run_coroutine_threadsafe(_open(), loop).result(60)
    node.log.info("job %d: served on the transcript link", job_id)


# ------------------------------------------------------------------ the drafter


def drafter_work(node, job_id: int) -> int:
    view = node.job_view(job_id)
    status = view["status"]
    node.schedule.set_active(job_id, status in (JobStatus.Open, JobStatus.Running))
    if status == JobStatus.Open:
        return 0  # JobAccepted marks it dirty
    if status != JobStatus.Running:
        return _finish(node, job_id, view)
    force = force_of(node, job_id)
    if force is not None:  # mine, against a silent verifier: claim it after its deadline (an answer deletes it)
        if node.chain_time() > force["deadline"]:
            return node.transact(f"job:{job_id}:claim-force:{force['cycles']}", _ts(node).claimForce(job_id))
        node.schedule.defer_until(JOB, job_id, force["deadline"] + 1)
        return 0
    run = node.link_runs.get(job_id)
    if run is None:
        return _start_link(node, job_id)
    if run.thread.is_alive():
        node.schedule.defer_until(JOB, job_id, node.chain_time() + RECHECK_S)
        return 0
    from node.link.chain import settle_on_chain

    if run.error is not None and "no progress" in str(run.error):
        sent = force_verifier(node, run.link.ledger)
        if sent:
            node.link_runs.pop(job_id)  # after an answer, the job goes on over the link
            return sent
    if run.error is not None:
        node.log.error("job %d: the link failed: %s; trying again", job_id, run.error)
        node.link_runs.pop(job_id)
        node.schedule.defer_until(JOB, job_id, node.chain_time() + RECHECK_S)
        return 0
    if run.result.refused is not None:  # never counter-signed: the verifier must answer Draft k on chain, by the rule
        node.log.error("job %d: the verifier broke the accept rule: %s (evidence kept)", job_id, run.result.refused)
        node.schedule.defer_until(JOB, job_id, node.chain_time() + RECHECK_S)
        return force_verifier(node, run.link.ledger)
    return settle_on_chain(node, run.link.ledger)


def _start_link(node, job_id: int) -> int:
    from node.link.chain import EndpointError, endpoint_of, settle_on_chain
    from node.link.drafter import DrafterLink
    from node.link.wire import Limits

    spec = spec_of(node, job_id)
    try:
        url = endpoint_of(node.system.registry, spec.verifier)
    except EndpointError as exc:
        node.log.warning("job %d: %s; waiting for it", job_id, exc)
        node.schedule.defer_until(JOB, job_id, node.chain_time() + RECHECK_S)
        return 0
    silence = node.link_silence_s
    limits = Limits(idle_timeout_s=silence)
    link = DrafterLink(
        node.account, node.store, node.draft_model, spec, url, limits, give_up_after_s=silence, retry_delay_s=0.1
    )
    if len(link.ledger.settlement_sigs) == 2:  # settled over the link before a restart: no need to reconnect
        return settle_on_chain(node, link.ledger)

    def main():
        try:
            run.result = asyncio.run(link.run())
        except BaseException as exc:  # handed to the node loop
            run.error = exc
        finally:
            node.schedule.mark_dirty(JOB, job_id)

    run = LinkRun(link, threading.Thread(target=main, name=f"link-job-{job_id}", daemon=True))
    node.link_runs[job_id] = run
    run.thread.start()
    node.log.info("job %d: drafting over the link to %s", job_id, url)
    return 1


# ------------------------------------------------------------------ force moves (docs/protocol.md, liveness)


def _ts(node):
    return node.system.transcript.functions


def force_of(node, job_id: int) -> dict | None:
    """The job's pending force move (TranscriptSettlement.forceOf), None when there is none."""
    raw = _ts(node).forceOf(job_id).call()
    names = ("state", "pendingRoot", "recordsRoot", "salt", "deadline", "cycles", "emitted", "rejected", "outCut")
    force = dict(zip((*names, "silent", "slash"), raw))
    return None if int(force["silent"], 16) == 0 else force


def force_verifier(node, ledger) -> int:
    """Post the drafter's pending Draft k (sent, never answered) and the co-signed state S(k-1): `forceMove`."""
    from node.chain import transcript as TX

    k, job_id = ledger.next_cycle, ledger.spec.job_id
    if ledger.done or k not in ledger.drafts:
        return 0  # nothing pending of mine to force with
    draft, sig = ledger.drafts[k]
    last, last_sig = ledger.verifications[k - 1] if k else (None, b"")
    cycles = [TX.Cycle.of(ledger.drafts[c][0], ledger.verifications[c][0]) for c in range(k)]
    node.log.warning("job %d: the verifier is silent at cycle %d; posting a force move", job_id, k)
    call = TX.force_call(node.system.transcript, job_id, TX.evidence(draft, sig, last, last_sig), cycles)
    return node.transact(f"job:{job_id}:force:{k}", call)


def answer_force(node, job_id: int) -> int:
    """A force posted against this verifier: answer it with its stored Verification of the pending Draft."""
    from node.chain import transcript as TX

    force = force_of(node, job_id)
    if force is None or force["silent"] != node.address or node.chain_time() > force["deadline"]:
        return 0
    served = node.link_server.jobs.get(job_id) if node.link_server is not None else None
    k = int(force["cycles"])
    if served is None or k not in served.ledger.verifications:
        node.log.error("job %d: forced at cycle %d, which I have not verified: I cannot answer", job_id, k)
        return 0
    v, _ = served.ledger.verifications[k]
    cycle = TX.Cycle.of(served.ledger.drafts[k][0], v)
    node.log.warning("job %d: answering the drafter's force at cycle %d", job_id, k)
    call = _ts(node).answerForce(job_id, TX.verification_answer(cycle, v.reveal))
    return node.transact(f"job:{job_id}:answer-force:{k}", call)
