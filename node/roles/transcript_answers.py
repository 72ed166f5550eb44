"""The drafter's side of an answered force (docs/protocol.md "Transcript mode (v2): contracts", attested states).

When the verifier answers the drafter's force at cycle k on chain (`ForceAnsweredVerification`), it signs nothing:
the chain attests S(k) instead. The drafter takes that answer in as the Verification of cycle k, with no signature
(an empty one marks it attested: its force evidence then posts no Verification of k, and the contract checks the
state against the attested one), and goes on from S(k): it drafts k + 1 on it, offers it over the link, and forces
again on the attested state if the verifier stays silent. An answer that ended the job is completed on chain
(`completeAnswered`) with every cycle, so the drafter is paid for each even if the verifier never signs a Settlement.

The event is hostile input (the contract checked the rule, but a node never trusts what it reads): each answer is
rebuilt into a Verification on the drafter's own Draft and state and run through the same accept-rule check as a
Verification from the link (`Ledger.checked_output`); one that fails it, or names another cycle, is not taken in.
"""

from __future__ import annotations

from node.chain import transcript as TX
from node.chain import transcript_messages as tm
from node.link.job import Ledger, RuleViolation

ATTESTED = b""  # the "signature" of a Verification the chain attested (an on-chain answer)


def is_attested(ledger: Ledger, cycle: int) -> bool:
    return cycle in ledger.verifications and ledger.verifications[cycle][1] == ATTESTED


def _answers(node, job_id: int) -> dict[int, dict]:
    logs = node.system.transcript.events.ForceAnsweredVerification().get_logs(
        from_block=node.start_block or 0, argument_filters={"jobId": job_id}
    )
    return {int(e.args["cycle"]): dict(e.args) for e in logs}  # (one answer per force, a force per cycle)


def take_answers(node, ledger: Ledger) -> int:
    """Take the verifier's on-chain answers to my forces into `ledger` as attested Verifications, from its next
    cycle on, while they follow the rule. Returns how many were taken (0: none new)."""
    job_id, taken = ledger.spec.job_id, 0
    answers = None
    while not ledger.done and ledger.next_cycle in ledger.drafts:
        c = ledger.next_cycle
        answers = _answers(node, job_id) if answers is None else answers
        if c not in answers:
            break
        a, draft = answers[c], ledger.drafts[c][0]
        try:
            p, accepted, out = tuple(int(x) for x in a["p"]), int(a["accepted"]), int(a["outToken"])
            reveal = bytes(a["reveal"])
            if len(p) != len(draft.tokens) or len(reveal) != 32:
                raise RuleViolation(f"an answer of {len(p)} p for a Draft of {len(draft.tokens)} proposals")
            v = tm.Verification.build(draft, p, reveal, accepted, out)
            output = ledger.checked_output(c, v)
        except (RuleViolation, ValueError, TypeError, KeyError) as exc:
            node.log.error("job %d: the on-chain answer of cycle %d is not one I can go on from: %s", job_id, c, exc)
            break
        ledger.verifications[c], ledger.outputs[c] = (v, ATTESTED), output
        node.log.warning("job %d: took the verifier's on-chain answer of cycle %d; going on from it", job_id, c)
        taken += 1
    return taken


def complete_answered(node, ledger: Ledger) -> int:
    """The job ended in an answered (attested) cycle and no Settlement is signed: `completeAnswered` with every
    cycle, once (`job:{id}:complete`)."""
    job_id = ledger.spec.job_id
    cycles = [TX.Cycle.of(ledger.drafts[c][0], ledger.verifications[c][0]) for c in range(ledger.next_cycle)]
    call = node.system.transcript.functions.completeAnswered(job_id, ledger.salt, TX.pack_cycles(cycles))
    node.log.warning("job %d: the verifier's on-chain answer ended the job; completing it", job_id)
    return node.transact(f"job:{job_id}:complete", call)


def ended_by_answer(ledger: Ledger) -> bool:
    """Whether the job ended in an attested cycle with no Settlement signed by both (then `complete_answered`)."""
    return ledger.done and is_attested(ledger, ledger.next_cycle - 1) and len(ledger.settlement_sigs) < 2


# ------------------------------------------------------------------ the verifier's side


def answered_draft(node, job_id: int, cycle: int) -> tuple[tm.Draft, bytes] | None:
    """The drafter's on-chain answer (ForceAnsweredDraft) of cycle `cycle`, as a Draft and its signature, or None.
    Hostile input like a Draft from the link: whoever takes it in checks it (`LinkServer.take_draft`)."""
    logs = node.system.transcript.events.ForceAnsweredDraft().get_logs(
        from_block=node.start_block or 0, argument_filters={"jobId": job_id}
    )
    for e in logs:
        a = e.args
        if int(a["cycle"]) != cycle:
            continue
        try:
            draft = tm.Draft.build(
                job_id, cycle, bytes(a["prevState"]), [int(t) for t in a["tokens"]], [int(x) for x in a["q"]],
                int(a["salt"]),
            )  # fmt: skip
            return draft, tm.canonical_signature(bytes(a["signature"]))
        except (tm.MessageRejected, TypeError, ValueError) as exc:
            node.log.error("job %d: the drafter's on-chain Draft of cycle %d does not parse: %s", job_id, cycle, exc)
    return None


def take_answered_draft(node, served) -> bool:
    """The drafter answered my force with its Draft on chain and went silent on the link: take that Draft in (checked
    and verified as the link would), so my next force reaches past the answered one. True when one was taken."""
    import asyncio

    from node.link.wire import LinkRefused

    job_id, c = served.spec.job_id, served.ledger.next_cycle
    if c in served.ledger.drafts:
        return False
    found = answered_draft(node, job_id, c)
    if found is None:
        return False
    server = node.link_server
    try:
        taking = server.take_draft(job_id, *found)
        loop = getattr(server, "loop", None)
        if loop is None:
            asyncio.run(taking)
        else:
            asyncio.run_coroutine_threadsafe(taking, loop).result(300)
    except LinkRefused as exc:
        node.log.error("job %d: the drafter's on-chain Draft of cycle %d is refused: %s", job_id, c, exc)
        return False
    node.log.warning("job %d: took the drafter's on-chain Draft of cycle %d", job_id, c)
    return True


# ------------------------------------------------------------------ the drafter forced with a Verification it never got


def take_forced_verification(node, link, force: dict) -> bool:
    """The verifier forced me at k = `force.cycles` with its Verification of cycle k-1 as the pending one, which
    never came over the link (a verifier may withhold it and force me with it: v2.1). Read it from the force's
    evidence (the ForceEvidence log), check it exactly as the link checks one (`DrafterLink.take_verification`:
    signature, my Draft's root, the state chain, the accept rule), store it, so that my Draft k on it answers the
    force. True when it was taken in."""
    from node.jobs.chaindata import ChainDataError
    from node.link.chain import force_evidence
    from node.link.wire import LinkRefused

    ledger, c = link.ledger, int(force["cycles"]) - 1
    job_id = ledger.spec.job_id
    if not force["slash"] or c < 0 or c in ledger.verifications or c != ledger.next_cycle or c not in ledger.drafts:
        return False
    try:
        e, _ = force_evidence(node.w3, node.system.transcript, job_id, node.start_block or 0)
        v = tm.Verification.from_message(dict(e["pending"]))
        sig = tm.canonical_signature(bytes(e["pendingSig"]))
        if v.cycle != c:
            raise ChainDataError(f"the force's Verification is of cycle {v.cycle}, not {c}")
        taken = link.take_verification(v, sig)
    except (ChainDataError, LinkRefused, tm.MessageRejected, TypeError, ValueError, KeyError) as exc:
        node.log.error("job %d: forced with a Verification of cycle %d I cannot take in: %s", job_id, c, exc)
        return False
    if taken:
        node.log.warning(
            "job %d: took the verifier's Verification of cycle %d from its force; drafting on it", job_id, c
        )
    return taken
