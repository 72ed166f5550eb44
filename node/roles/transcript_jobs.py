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

Force moves (docs/protocol.md "Transcript mode (v2): contracts"), both ways, after `--link-silence` seconds:
- A silent verifier (no progress over the link) is forced by the drafter: its pending Draft and the last co-signed
  state (`forceMove`, `job:{id}:force:{k}`), claimed after the deadline (`claimForce`) unless the verifier answers.
  A Verification the accept rule refutes is never counter-signed: the drafter keeps it as evidence and forces the
  same way, so the verifier must answer Draft k on chain, where the contract re-runs the rule. The answer signs no
  state but the chain attests S(k): the drafter takes it in and goes on from it (node/roles/transcript_answers.py),
  forcing again on the attested state if the verifier stays silent, or completing the job if the answer ended it.
- A silent drafter is forced by the verifier (the link's silence watch wakes the job): Draft k, Verification k-1
  and its own Verification k (`job:{id}:force-drafter:{k+1}`), claimed after `commitTimeout`; with no Draft at all,
  a force with no evidence (the drafter is not slashed).
- Each answers a force against it from its store: the verifier with its Verification of the forced Draft (read
  from the force's calldata and verified first when it never came over the link), the drafter with its Draft on
  the forced state (drafted by its link, which resumes from the welcome's Verification).
- Both watch TranscriptSettlement's force events (the end of a job comes with the market's JobFinished): a force
  against a node, the verifier's on-chain answer (the drafter goes on from the attested state at once, not at its
  force's deadline) and the drafter's on-chain Draft wake the job as they are mined. An event only wakes it: what
  to do is read again from the chain and every answer is checked as above before it is acted on.
Not built: rule challenges of settled jobs from the nodes.
"""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import dataclass

from node.chain.enums import JobStatus
from node.jobs.sessions import chain_head, verifier_seed
from node.roles.schedule import JOB
from node.roles.transcript_answers import (
    complete_answered,
    ended_by_answer,
    is_attested,
    take_answered_draft,
    take_answers,
    take_forced_verification,
)

RECHECK_S = 2  # chain seconds between rechecks of a job running over the link (its end marks it dirty anyway)
DEFAULT_SILENCE_S = 120.0  # `serve --link-silence`


@dataclass
class LinkRun:
    """A drafter's link run of one job: the worker thread, its DrafterLink, and how it ended."""

    link: object
    thread: threading.Thread
    result: object = None
    error: BaseException | None = None
    forced: bool = False  # the verifier forced this drafter on chain: answer as soon as the Draft exists


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
        if job_id in getattr(node, "silent_jobs", ()):  # a misbehaviour (`signwrong`) that went silent on the job
            node.schedule.defer_until(JOB, job_id, node.chain_time() + 3600)
            return 0
        force = force_of(node, job_id)
        if force is not None and force["silent"] != node.address:  # mine, against a silent drafter
            return _claim_or_wait(node, job_id, force)
        if force is not None:
            sent = answer_force(node, job_id, force)
            if sent:
                return sent
        if node.link_server is None:
            node.log.error("job %d: a transcript job I accepted, but I serve no link (restart with --listen)", job_id)
        elif job_id not in node.link_server.jobs:
            open_on_link(node, job_id)
        else:
            served = node.link_server.jobs[job_id]
            if force is None and served.holds_settlement:  # the drafter posts it; past --link-silence, I do
                if served.drafter_silence() <= link_silence(node):
                    return 0  # (the silence watch wakes it)
                from node.link.chain import settle_on_chain

                node.log.warning("job %d: the drafter has not posted our Settlement; posting it", job_id)
                return settle_on_chain(node, served.ledger)
            if force is None and _owes_force(node, served) and served.drafter_silence() > link_silence(node):
                take_answered_draft(node, served)  # its on-chain answer to my last force, if it never came over
                sent = force_drafter(node, served.ledger)
                if sent:
                    return sent
        if force is None:  # (a force against me is looked at again on the wall clock: its deadline is near)
            node.schedule.defer_until(JOB, job_id, node.chain_time() + RECHECK_S)  # the silence watch wakes it
        return 0
    served = node.link_server.jobs.get(job_id) if node.link_server is not None else None
    if served is not None:
        served.ended = True  # (its silence watch stops)
    return _finish(node, job_id, view)


def _owes_force(node, served) -> bool:
    """The drafter owes the next move (`awaits_drafter`), and this verifier forces for it (not `nosign` at the end)."""
    from node.roles.behaviors import stalls_at_end

    return served.awaits_drafter and not (served.ledger.done and stalls_at_end(node.behavior))


def link_silence(node) -> float:
    """Seconds without a word from the other party over the link before this node forces it (`--link-silence`)."""
    return float(getattr(node, "link_silence_s", DEFAULT_SILENCE_S))


def open_on_link(node, job_id: int) -> None:
    """Serve the accepted job on the node's LinkServer, from the server's own event loop (its jobs are that loop's)."""
    from node.roles.behaviors import link_verifier_options

    spec, seed = spec_of(node, job_id), verifier_seed(node.account.key, job_id)
    server = node.link_server
    options = link_verifier_options(node.behavior)  # {} when honest
    loop = getattr(server, "loop", None)
    if loop is None:
        server.open_job(spec, seed, **options)
    else:

        async def _open():
            return server.open_job(spec, seed, **options)

        asyncio.run_coroutine_threadsafe(_open(), loop).result(60)
    if server.on_silent is None:  # a drafter silent past --link-silence wakes the job here: then it is forced

        def wake(silent_job: int) -> None:
            node.schedule.mark_dirty(JOB, silent_job)

        server.watch_silence(link_silence(node), wake)
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
    if force is not None and force["silent"] != node.address:  # mine, against a silent verifier
        return _claim_or_wait(node, job_id, force)
    run = node.link_runs.get(job_id)
    if force is not None:  # the verifier forced me: answer with my Draft on its state, from the store
        from node.link.job import Ledger

        link = run.link if run is not None else _drafter_link(node, job_id)
        if link is not None and take_forced_verification(node, link, force):
            link.draft_next()  # Draft k on the Verification the force posted (never a second one: the link's lock)
        ledger = link.ledger if link is not None else Ledger.load(spec_of(node, job_id), node.store, "drafter")
        sent = answer_verifier_force(node, ledger, force)
        if sent:
            return sent
        if run is None:  # (a restart: the link takes the verifier's last Verification in and drafts on it)
            return _start_link(node, job_id, forced=True)
        run.forced = True  # each cycle taken in over the link wakes the job: the answer goes out once it exists
    if run is None:
        return _start_link(node, job_id)
    if run.result is None and run.error is None:  # not `thread.is_alive()`: its last act, mark_dirty, comes first
        if not run.forced:  # (forced: rechecked on the wall clock, the deadline is on chain)
            node.schedule.defer_until(JOB, job_id, node.chain_time() + RECHECK_S)
        return 0
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
        ledger = run.link.ledger
        if _answered_on_chain(node, job_id, ledger.next_cycle):
            # the verifier signed no state on its answer, but the chain attested S(k): go on from it (a new link run
            # takes the answer in, drafts k + 1 on it, and forces again on the attested state if need be)
            if take_answers(node, ledger):
                node.link_runs.pop(job_id)
                return _start_link(node, job_id)
            if not run.forced:  # an answer that fails my rule check (it passed the contract's): said once
                node.log.error(
                    "job %d: the verifier answered my force at cycle %d on chain with a Verification I cannot "
                    "go on from; waiting",
                    job_id,
                    ledger.next_cycle,
                )
                run.forced = True
            node.schedule.defer_until(JOB, job_id, node.chain_time() + 3600)
            return 0
        node.log.error("job %d: the verifier broke the accept rule: %s (evidence kept)", job_id, run.result.refused)
        node.schedule.defer_until(JOB, job_id, node.chain_time() + RECHECK_S)
        return force_verifier(node, ledger)
    return _post_settlement(node, run.link.ledger)


def _post_settlement(node, ledger) -> int:
    """Send the Settlement both signed (`settle_on_chain`), unless this drafter's misbehaviour withholds it."""
    from node.link.chain import settle_on_chain
    from node.roles.behaviors import posts_settlement

    if not posts_settlement(node.behavior):  # `nopost`: co-signed, never posted (the verifier posts it)
        node.schedule.defer_until(JOB, ledger.spec.job_id, node.chain_time() + 3600)
        return 0
    return settle_on_chain(node, ledger)


def _drafter_link(node, job_id: int):
    """The job's DrafterLink (its ledger loaded from the store), or None while the verifier has no endpoint."""
    from node.link.chain import EndpointError, endpoint_of
    from node.link.drafter import DrafterLink
    from node.link.wire import Limits
    from node.roles.behaviors import link_drafter_options

    spec = spec_of(node, job_id)
    try:
        url = endpoint_of(node.system.registry, spec.verifier)
    except EndpointError as exc:
        node.log.warning("job %d: %s; waiting for it", job_id, exc)
        return None
    silence = link_silence(node)
    limits = Limits(idle_timeout_s=silence)
    options = link_drafter_options(node.behavior, node.draft_model, node.bias_policy)  # {} when honest
    # both nodes start on the same JobAccepted, so the first hello often comes a few ms before the verifier serves
    # the job: retry soon (the delay doubles up to 2 s), the first token waits for it (scripts/bench_e2e.py TTFT)
    link = DrafterLink(
        node.account,
        node.store,
        node.draft_model,
        spec,
        url,
        limits,
        give_up_after_s=silence,
        retry_delay_s=0.02,
        **options,
    )
    take_answers(node, link.ledger)  # the verifier's on-chain answers to my forces, as the cycles' Verifications
    return link


def _start_link(node, job_id: int, forced: bool = False) -> int:
    link = _drafter_link(node, job_id)
    if link is None:
        node.schedule.defer_until(JOB, job_id, node.chain_time() + RECHECK_S)
        return 0
    if len(link.ledger.settlement_sigs) == 2:  # settled over the link before a restart: no need to reconnect
        return _post_settlement(node, link.ledger)
    if ended_by_answer(link.ledger):  # the verifier's on-chain answer ended the job: nothing to sign
        return complete_answered(node, link.ledger)

    def main():
        try:
            run.result = asyncio.run(link.run())
        except BaseException as exc:  # handed to the node loop
            run.error = exc
        finally:
            node.schedule.mark_dirty(JOB, job_id)

    def on_cycle(cycle, tokens):
        if run.forced:
            node.schedule.mark_dirty(JOB, job_id)

    run = LinkRun(link, threading.Thread(target=main, name=f"link-job-{job_id}", daemon=True), forced=forced)
    link.on_cycle = on_cycle
    node.link_runs[job_id] = run
    run.thread.start()
    node.log.info("job %d: drafting over the link to %s", job_id, link.uri)
    return 1


# ------------------------------------------------------------------ force moves (docs/protocol.md, liveness)


def _ts(node):
    return node.system.transcript.functions


def force_of(node, job_id: int) -> dict | None:
    """The job's pending force move (TranscriptSettlement.forceOf), None when there is none."""
    raw = _ts(node).forceOf(job_id).call()
    names = ("state", "pendingRoot", "cyclesRoot", "salt", "deadline", "cycles", "emitted", "rejected", "outCut")
    force = dict(zip((*names, "silent", "slash"), raw))
    return None if int(force["silent"], 16) == 0 else force


def force_verifier(node, ledger) -> int:
    """Post the drafter's pending Draft k (sent, never answered) and the co-signed state S(k-1): `forceMove`. Once
    the job ended and the verifier never signed the Settlement: the force with the final Verification, which
    completes the job at once (`force_final`)."""
    from node.chain import transcript as TX

    k, job_id = ledger.next_cycle, ledger.spec.job_id
    if ledger.done:
        return force_final(node, ledger)
    if k not in ledger.drafts:
        return 0  # nothing pending of mine to force with
    draft, sig = ledger.drafts[k]
    last, last_sig = ledger.verifications[k - 1] if k else (None, b"")
    cycles = [TX.Cycle.of(ledger.drafts[c][0], ledger.verifications[c][0]) for c in range(k)]
    node.log.warning("job %d: the verifier is silent at cycle %d; posting a force move", job_id, k)
    call = TX.force_call(node.system.transcript, job_id, TX.evidence(draft, sig, last, last_sig), cycles)
    return node.transact(f"job:{job_id}:force:{k}", call)


def force_final(node, ledger) -> int:
    """The verifier sent its last Verification and never signed the Settlement: force with that Verification (its
    signature in the evidence, checked by the rule on chain), which ends the job there (ForceCompleted): every cycle
    is paid as settled. 0 when a Settlement is signed by both, or the last cycle is attested (`complete_answered`)."""
    from node.chain import transcript as TX

    job_id, n = ledger.spec.job_id, ledger.next_cycle
    if len(ledger.settlement_sigs) == 2 or not n or is_attested(ledger, n - 1):
        return 0
    k = n - 1
    draft, sig = ledger.drafts[k]
    last, last_sig = ledger.verifications[k - 1] if k else (None, b"")
    evidence = TX.evidence(draft, sig, last, last_sig, *ledger.verifications[k])
    cycles = [TX.Cycle.of(ledger.drafts[c][0], ledger.verifications[c][0]) for c in range(k)]
    node.log.warning("job %d: the verifier never signed the Settlement; forcing with its final Verification", job_id)
    return node.transact(f"job:{job_id}:force-final:{n}", _ts(node).forceMove(job_id, evidence, TX.pack_cycles(
        cycles, ledger.spec.job.gamma)))  # fmt: skip


def _answered_on_chain(node, job_id: int, cycle: int) -> bool:
    """Whether the verifier answered a force of this job at `cycle` on chain (ForceAnsweredVerification)."""
    logs = node.system.transcript.events.ForceAnsweredVerification().get_logs(
        from_block=node.start_block or 0, argument_filters={"jobId": job_id}
    )
    return any(int(e.args["cycle"]) == cycle for e in logs)


def _take_forced_draft(node, served, k: int) -> bool:
    """The drafter forced me with a Draft k that never came over the link: read it from the force's calldata and
    take it in as the link would (checked, stored, verified), so the force is answered like any other."""
    from node.jobs.chaindata import ChainDataError
    from node.link.chain import forced_draft
    from node.link.wire import LinkRefused

    job_id, server = served.spec.job_id, node.link_server
    try:
        draft, sig = forced_draft(node.w3, node.system.transcript, job_id, node.start_block or 0)
        if draft.cycle != k:
            raise ChainDataError(f"the forced Draft is of cycle {draft.cycle}, the force of cycle {k}")
        taking = server.take_draft(job_id, draft, sig)
        loop = getattr(server, "loop", None)
        if loop is None:
            asyncio.run(taking)
        else:
            asyncio.run_coroutine_threadsafe(taking, loop).result(300)
    except (ChainDataError, LinkRefused) as exc:
        node.log.error("job %d: forced at cycle %d with a Draft I cannot verify: %s", job_id, k, exc)
        return False
    node.log.warning("job %d: took the forced Draft of cycle %d from the chain", job_id, k)
    return True


def _claim_or_wait(node, job_id: int, force: dict) -> int:
    """My force against a silent party: claim it after its deadline (an answer deletes it), else wait for that."""
    if node.chain_time() > force["deadline"]:
        return node.transact(f"job:{job_id}:claim-force:{force['cycles']}", _ts(node).claimForce(job_id))
    node.schedule.defer_until(JOB, job_id, force["deadline"] + 1)
    return 0


def force_drafter(node, ledger) -> int:
    """The verifier's force against a silent drafter: the latest co-signed state S(k-1) (Draft k, Verification
    k-1) and its own Verification k, which the drafter owes a Draft on; with no Draft at all, a force with no
    evidence (the drafter never consented: not slashed). A final Verification completes the job at once."""
    from node.chain import transcript as TX

    job_id = ledger.spec.job_id
    if not ledger.drafts:
        node.log.warning("job %d: the drafter never sent Draft 0; forcing it with no evidence", job_id)
        call = TX.force_call(node.system.transcript, job_id, TX.no_draft_evidence(), [], gamma=ledger.spec.job.gamma)
        return node.transact(f"job:{job_id}:force-drafter:0", call)
    k = ledger.next_cycle - 1  # the last cycle verified: the drafter owes Draft k+1 (or its Settlement)
    if k < 0:
        return 0
    draft, draft_sig = ledger.drafts[k]
    last, last_sig = ledger.verifications[k - 1] if k else (None, b"")
    evidence = TX.evidence(draft, draft_sig, last, last_sig, *ledger.verifications[k])
    cycles = [TX.Cycle.of(ledger.drafts[c][0], ledger.verifications[c][0]) for c in range(k)]
    node.log.warning("job %d: the drafter is silent after cycle %d; posting a force move", job_id, k)
    call = TX.force_call(node.system.transcript, job_id, evidence, cycles)
    return node.transact(f"job:{job_id}:force-drafter:{k + 1}", call)


def answer_verifier_force(node, ledger, force: dict) -> int:
    """The verifier forced this drafter after cycle k-1 (`force.cycles` = k): answer with my stored Draft k on the
    forced state (signed before, over the link or not; never a second Draft of k)."""
    from node import protocol as P
    from node.chain import transcript as TX

    job_id, k = ledger.spec.job_id, int(force["cycles"])
    if node.chain_time() > force["deadline"] or k not in ledger.drafts:
        return 0  # (not drafted yet: the link takes Verification k-1 in and drafts it)
    draft, sig = ledger.drafts[k]
    expected = bytes(force["state"]) if force["slash"] else P.transcript_genesis(job_id, draft.salt)
    if draft.prev_state != expected:
        node.log.error("job %d: forced at a state my Draft %d is not on: I cannot answer", job_id, k)
        return 0
    node.log.warning("job %d: answering the verifier's force with my Draft of cycle %d", job_id, k)
    return node.transact(f"job:{job_id}:answer-force:{k}", _ts(node).answerForce(job_id, TX.draft_answer(draft, sig)))


def answer_force(node, job_id: int, force: dict) -> int:
    """A force posted against this verifier: answer it with its stored Verification of the pending Draft."""
    from node.chain import transcript as TX

    if force["silent"] != node.address or node.chain_time() > force["deadline"]:
        return 0
    served = node.link_server.jobs.get(job_id) if node.link_server is not None else None
    k = int(force["cycles"])
    if served is None:
        return 0  # opened on the link first (the caller), then answered at the next look
    ledger = served.ledger
    if k in ledger.verifications and ledger.drafts[k][0].draft_root != bytes(force["pendingRoot"]):
        # forced with another Draft of a cycle whose first Draft I verified: the drafter signed both. A force at the
        # later state (that Draft, co-signed, and my Verification of it) supersedes its force (ForcePending rule)
        node.log.error("job %d: forced with a second Draft of cycle %d; forcing back with the first", job_id, k)
        return force_drafter(node, ledger)
    if k not in ledger.verifications and not _take_forced_draft(node, served, k):
        return 0
    from node.roles.behaviors import goes_silent, rule_answer

    v, _ = served.ledger.verifications[k]
    cycle = rule_answer(node.behavior, served.spec, served.ledger.drafts[k][0], v)  # v's own when honest
    node.log.warning("job %d: answering the drafter's force at cycle %d", job_id, k)
    call = _ts(node).answerForce(job_id, TX.verification_answer(cycle, v.reveal))
    sent = node.transact(f"job:{job_id}:answer-force:{k}", call)
    if goes_silent(node.behavior):  # the misbehaviour: nothing more from this verifier on the job
        node.__dict__.setdefault("silent_jobs", set()).add(job_id)
        node.link_server.jobs.pop(job_id, None)
    return sent


# ------------------------------------------------------------------ TranscriptSettlement's events (the node's poller)


def _my_job(node, event) -> int | None:
    """The job of a TranscriptSettlement event when it is a transcript job this node tracks, else None (the poller
    reads every job's events, and a job's events come from either party)."""
    job_id = int(event.args["jobId"])
    if not node.schedule.tracked(JOB, job_id) or not is_transcript(node, job_id):
        return None
    return job_id


def on_force_moved(node, event) -> None:
    """A force move of one of my jobs, against me or mine: look at the job now, not at its next recheck (a force
    against me is answered from the store; mine is waited on, and answered or claimed)."""
    job_id = _my_job(node, event)
    if job_id is not None and node.address in (event.args["forcer"], event.args["silent"]):
        node.schedule.mark_dirty(JOB, job_id)


def on_verification_answer(node, event) -> None:
    """The verifier answered my force on chain: the job goes on from the attested state as soon as the answer is
    mined, not at the force's deadline. The event only wakes the job; `drafter_work` reads the answer again from the
    chain, for the job's next cycle only, and checks it on its own Draft by the rule (`take_answers`) before acting."""
    job_id = _my_job(node, event) if node.role == "drafter" else None
    if job_id is not None:
        node.schedule.mark_dirty(JOB, job_id)


def on_draft_answer(node, event) -> None:
    """The drafter answered my force with its Draft on chain: it is alive, so it has `--link-silence` again to go on
    over the link before this verifier takes that Draft from the chain and forces it again (`verifier_work`); the
    job is looked at now."""
    job_id = _my_job(node, event) if node.role == "verifier" else None
    if job_id is None:
        return
    server = node.link_server
    served = server.jobs.get(job_id) if server is not None else None
    if served is not None:
        served.heard = time.monotonic()
    node.schedule.mark_dirty(JOB, job_id)
