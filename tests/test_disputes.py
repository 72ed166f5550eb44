"""DisputeManager (docs/protocol.md §6, docs/disputes.md) on a real anvil with the real registry and market.

One module-level deployment (`deploy_system`) with registered parties, three jobs and one verified
cycle each; every test runs inside the `chain` snapshot, so tests never see each other's changes.
Leaves, roots, proofs, record hashes and vote commitments all come from `node.protocol`.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from eth_abi import encode
from eth_hash.auto import keccak
from web3.exceptions import ContractCustomError
from web3.logs import DISCARD

from node import protocol as P
from node.chain.deploy import deploy_system
from node.chain.enums import DisputeKind, DisputeStatus, JobStatus, Outcome, PositionState, Role, Verdict
from node.chain.params import DEFAULT_PARAMS

WAD = P.WAD
ETHER = 10**18

# enums of DisputeManager, under the short names these tests use (the values come from node/chain/enums.py)
DRAFT, TARGET = DisputeKind
S_NONE, S_AWAIT, S_VOTING, S_RESOLVED = DisputeStatus
V_NONE, V_FAITHFUL, V_CHEATED = Verdict
O_NONE, O_ACCUSED_LOST, O_CHALLENGER_LOST, O_VOID, O_SILENT = Outcome
POS_FREE, POS_OPEN, POS_PROVEN = PositionState
# enums of the registry / market
ROLE_VERIFIER, ROLE_REFEREE = Role.Verifier, Role.Referee
JOB_OPEN, JOB_RUNNING, JOB_FINISHED, JOB_FINALIZED = list(JobStatus)[1:]

DRAFT_MODEL = keccak(b"verispec.test.draft-model")
TARGET_MODEL = keccak(b"verispec.test.target-model")
PARAMS = DEFAULT_PARAMS  # the deployment defaults: R = 3, bond 0.1 ETH, 1 h phases
GAMMA = 4
TOKENS = [11, 12, 13, 14]
Q = [WAD // 2, WAD // 3, WAD // 5, WAD // 7]
PVALS = [WAD, WAD, 0, WAD // 2]  # accept, accept, reject: accepted = 2 (p[3] binds nothing)
OUT_TOKEN = 77
EOS = 50_000
STAKE = 5 * ETHER
VOCAB = 2**24  # both models' registered vocabulary
SALT = 0x0123_4567_89AB_CDEF  # the drafter's salt of every job


@dataclass
class Cycle:
    job_id: int
    cycle: int
    root: bytes
    accepted: int
    leaves: list

    def record(self, p=None, accepted=None, out_token=OUT_TOKEN, root=None):
        return (
            root or self.root,
            list(PVALS if p is None else p),
            self.accepted if accepted is None else accepted,
            out_token,
        )

    def leaf_proof(self, index, token=None, q=None, proof=None):
        if index >= GAMMA:
            return (0, 0, [])
        return (
            TOKENS[index] if token is None else token,
            Q[index] if q is None else q,
            P.proof(self.leaves, index) if proof is None else proof,
        )


@dataclass
class World:
    w3: object
    registry: object
    market: object
    dm: object
    deployer: str
    requester: str
    drafter: str
    verifier: str
    challenger: str
    outsider: str
    referees: list
    running: Cycle  # job 1: running, cycle 0 verified
    finished: Cycle  # job 2: finished after its one cycle (challenge window open)
    open_job: int  # job 3: submitted, never accepted


# ------------------------------------------------------------------ chain helpers


def send(w3, fn, sender, value=0):
    """Estimated against the pending block, where it will run (what the nodes' TxSender does too)."""
    gas = fn.estimate_gas({"from": sender, "value": value}, block_identifier="pending")
    receipt = w3.eth.wait_for_transaction_receipt(fn.transact({"from": sender, "value": value, "gas": gas}))
    assert receipt.status == 1
    return receipt


def advance(w3, seconds):
    w3.provider.make_request("evm_increaseTime", [seconds])
    w3.provider.make_request("evm_mine", [])


def now(w3):
    return w3.eth.get_block("latest")["timestamp"]


def error_data(contract, name, *args):
    entry = next(e for e in contract.abi if e.get("type") == "error" and e["name"] == name)
    types = [i["type"] for i in entry["inputs"]]
    selector = keccak(f"{name}({','.join(types)})".encode())[:4]
    return "0x" + (selector + encode(types, list(args))).hex()


def expect_revert(contract, fn, sender, name, *args, value=0):
    """The transaction reverts with custom error `name(args)` (exact data when args are given)."""
    with pytest.raises(ContractCustomError) as raised:
        fn.transact({"from": sender, "value": value})
    data = raised.value.data
    expected = error_data(contract, name, *args)
    if args:
        assert data == expected, (name, data, expected)
    else:
        assert data[:10] == expected[:10], (name, data, expected)


def run_cycle(w3, market, drafter, verifier, job_id, seed, length, cycle=0):
    root = P.draft_root(job_id, cycle, TOKENS, Q)
    if cycle == 0:  # the first draft carries the drafter's salt
        send(w3, market.functions.commitFirstDraft(job_id, root, TOKENS, Q, SALT), drafter)
    else:
        send(w3, market.functions.commitDraft(job_id, cycle, root, TOKENS, Q), drafter)
    reveal = P.chain_reveal(seed, length, cycle)
    accepted = P.count_accepted(reveal, root, Q, PVALS, SALT)
    send(w3, market.functions.submitVerification(job_id, cycle, TOKENS, Q, PVALS, reveal, OUT_TOKEN), verifier)
    assert market.functions.cycleRecordHash(job_id, cycle).call() == P.cycle_record_hash(
        root, PVALS, accepted, OUT_TOKEN
    )
    return Cycle(
        job_id, cycle, root, accepted, [P.leaf(job_id, cycle, i, t, q) for i, (t, q) in enumerate(zip(TOKENS, Q))]
    )


def submit_job(w3, world_market, requester, drafter, verifier, max_tokens):
    price_token, price_pass = 10**12, 3 * 10**12
    request = (DRAFT_MODEL, TARGET_MODEL, drafter, verifier, GAMMA, 0, 0, WAD, max_tokens, EOS, price_token, price_pass)
    escrow = max_tokens * (price_token + price_pass)
    send(w3, world_market.functions.submitJob(request, b"\x01\x02\x03"), requester, value=escrow)
    return world_market.functions.jobCount().call()


def deploy_world(w3, params=PARAMS, referees=7):
    accounts = w3.eth.accounts
    deployer, requester, drafter, verifier, challenger, outsider = accounts[:6]
    refs = list(accounts[6 : 6 + referees])
    system = deploy_system(w3, deployer, params)
    registry, market, dm = system.registry, system.market, system.disputes
    send(w3, registry.functions.registerDrafter(DRAFT_MODEL, TARGET_MODEL, WAD // 2, VOCAB), drafter, value=STAKE)
    send(w3, registry.functions.register(ROLE_VERIFIER, [TARGET_MODEL], [VOCAB]), verifier, value=STAKE)
    # The requester and the challenger are registered referees too: the draw must skip them as parties.
    for account in [requester, challenger, *refs]:
        send(
            w3,
            registry.functions.register(ROLE_REFEREE, [DRAFT_MODEL, TARGET_MODEL], [VOCAB, VOCAB]),
            account,
            value=params.min_referee_stake,
        )

    seed = keccak(b"verifier seed")
    cycles = []
    for max_tokens in (64, 3):
        job_id = submit_job(w3, market, requester, drafter, verifier, max_tokens)
        length = P.hash_chain_length(max_tokens)
        send(w3, market.functions.acceptJob(job_id, P.hash_chain(seed, length)), verifier)
        cycles.append(run_cycle(w3, market, drafter, verifier, job_id, seed, length))
    open_job = submit_job(w3, market, requester, drafter, verifier, 8)
    world = World(
        w3,
        registry,
        market,
        dm,
        deployer,
        requester,
        drafter,
        verifier,
        challenger,
        outsider,
        refs,
        cycles[0],
        cycles[1],
        open_job,
    )
    assert market.functions.jobStatus(world.running.job_id).call() == JOB_RUNNING
    assert market.functions.jobStatus(world.finished.job_id).call() == JOB_FINISHED
    assert market.functions.jobStatus(open_job).call() == JOB_OPEN
    assert world.running.accepted == 2
    return world


@pytest.fixture(scope="module")
def world_base(w3):
    snapshot = w3.provider.make_request("evm_snapshot", [])["result"]
    world = deploy_world(w3)
    yield world
    w3.provider.make_request("evm_revert", [snapshot])


@pytest.fixture
def world(world_base, chain):
    return world_base


# ------------------------------------------------------------------ dispute helpers


def open_dispute(world, cyc=None, index=1, kind=DRAFT, sender=None, draw=True, **record_changes):
    """Opens a dispute; unless `draw` is False an outsider then draws its referees (the next block)."""
    cyc = cyc or world.running
    fn = world.dm.functions.openDispute(
        cyc.job_id, cyc.cycle, index, kind, cyc.record(**record_changes), cyc.leaf_proof(index)
    )
    receipt = send(world.w3, fn, sender or world.challenger, value=PARAMS.dispute_bond)
    dispute_id = world.dm.functions.disputeCount().call()
    if draw:
        draw_referees(world, dispute_id)
    return dispute_id, receipt


def draw_referees(world, dispute_id, sender=None):
    return send(world.w3, world.dm.functions.drawReferees(dispute_id), sender or world.outsider)


def dispute(world, dispute_id):
    names = [
        c["name"] for c in next(e for e in world.dm.abi if e.get("name") == "getDispute")["outputs"][0]["components"]
    ]
    return dict(zip(names, world.dm.functions.getDispute(dispute_id).call()))


def accused_of(world, dispute_id):
    return dispute(world, dispute_id)["accused"]


def answer(world, dispute_id, sender=None):
    fn = world.dm.functions.answer(dispute_id, WAD // 3, [12, 40], [WAD // 3, WAD // 4])
    return send(world.w3, fn, sender or accused_of(world, dispute_id))


def salt_of(referee):
    return keccak(b"salt" + bytes.fromhex(referee[2:]))


def commit(world, dispute_id, referee, verdict):
    commitment = P.vote_commitment(dispute_id, referee, verdict, salt_of(referee))
    return send(world.w3, world.dm.functions.commitVote(dispute_id, commitment), referee)


def reveal(world, dispute_id, referee, verdict):
    return send(world.w3, world.dm.functions.revealVote(dispute_id, verdict, salt_of(referee)), referee)


def panel(world, dispute_id):
    return world.dm.functions.refereesOf(dispute_id).call()


def answered_dispute(world, index, kind):
    """A dispute on the running cycle's position `index`, drawn and answered: (dispute id, its referees)."""
    dispute_id, _ = open_dispute(world, index=index, kind=kind)
    refs = panel(world, dispute_id)
    answer(world, dispute_id)
    return dispute_id, refs


def credits(world, account):
    return world.dm.functions.credits(account).call()


def stake(world, account):
    return world.registry.functions.stakeOf(account).call()


def locks(world, account):
    return world.registry.functions.accountOf(account).call()[2]


def job_view(world, job_id):
    names = [
        c["name"] for c in next(e for e in world.market.abi if e.get("name") == "getJob")["outputs"][0]["components"]
    ]
    return dict(zip(names, world.market.functions.getJob(job_id).call()))


def snapshot_state(world, accounts):
    """Everything a failed call must leave untouched (read in one JSON-RPC batch)."""
    w3, dm, registry = world.w3, world.dm, world.registry
    count = dm.functions.disputeCount().call()
    calls = [dm.functions.getDispute(i) for i in range(1, count + 1)]
    calls += [dm.functions.ballotOf(i, r) for i in range(1, count + 1) for r in world.referees]
    calls += [dm.functions.credits(a) for a in accounts]
    calls += [registry.functions.accountOf(a) for a in accounts]  # stake and locks
    calls += [
        dm.functions.positionState(c.job_id, c.cycle, i, k)
        for c in (world.running, world.finished)
        for i in range(GAMMA + 1)
        for k in (DRAFT, TARGET)
    ]
    calls += [world.market.functions.getJob(j) for j in (1, 2, 3)]
    with w3.batch_requests() as batch:
        for call in calls:
            batch.add(call)
        batch.add(w3.eth.get_balance(dm.address))
        results = batch.execute()
    return {"count": count, "state": list(results)}


def everyone(world):
    return [world.requester, world.drafter, world.verifier, world.challenger, world.outsider, *world.referees]


def check_solvent(world):
    """The contract holds exactly the credited balances plus the bonds of unresolved disputes."""
    dm = world.dm
    count = dm.functions.disputeCount().call()
    open_bonds = sum(PARAMS.dispute_bond for i in range(1, count + 1) if dispute(world, i)["status"] != S_RESOLVED)
    credited = sum(credits(world, a) for a in everyone(world))
    assert world.w3.eth.get_balance(dm.address) == credited + open_bonds


def withdraw_exact(world, account):
    """withdraw() pays exactly the credit (balance change = credit - gas) and zeroes it."""
    w3 = world.w3
    amount = credits(world, account)
    before = w3.eth.get_balance(account)
    receipt = send(w3, world.dm.functions.withdraw(), account)
    fee = receipt["gasUsed"] * receipt["effectiveGasPrice"]
    assert w3.eth.get_balance(account) == before + amount - fee
    assert credits(world, account) == 0
    return amount


def split(pool, n):
    share = pool // n
    return [share + pool - share * n] + [share] * (n - 1)


def events(world, receipt, name):
    logs = {**receipt, "logs": [log for log in receipt["logs"] if log["address"] == world.dm.address]}
    return [e["args"] for e in getattr(world.dm.events, name)().process_receipt(logs, errors=DISCARD)]


# ------------------------------------------------------------------ happy paths


def test_draft_replay_accused_loses_unanimously(world):
    w3, dm = world.w3, world.dm
    before = {a: (stake(world, a), locks(world, a)) for a in everyone(world)}
    dispute_id, receipt = open_dispute(world, index=1, kind=DRAFT, draw=False)
    [opened] = events(world, receipt, "DisputeOpened")
    assert (opened["jobId"], opened["cycle"], opened["index"], opened["kind"]) == (world.running.job_id, 0, 1, DRAFT)
    assert (opened["accused"], opened["modelId"]) == (world.drafter, DRAFT_MODEL)
    assert (opened["token"], opened["claimedValue"]) == (TOKENS[1], Q[1])
    # no panel yet: it is drawn from the hash of the opening block, unknown when the challenger sent the tx
    assert panel(world, dispute_id) == [] and not events(world, receipt, "RefereesDrawn")
    d = dispute(world, dispute_id)
    assert (d["drawBlock"], d["poolSize"], d["drawn"]) == (receipt["blockNumber"], len(world.referees) + 2, 0)
    assert all(locks(world, r) == 0 for r in world.referees)
    receipt = draw_referees(world, dispute_id)
    refs = panel(world, dispute_id)
    assert len(refs) == 3 and len(set(refs)) == 3 and set(refs) <= set(world.referees)
    assert events(world, receipt, "RefereesDrawn")[0]["referees"] == refs
    assert locks(world, world.drafter) == before[world.drafter][1] + 1
    assert all(locks(world, r) == 1 for r in refs)
    assert job_view(world, world.running.job_id)["openDisputes"] == 1
    assert dm.functions.positionState(world.running.job_id, 0, 1, DRAFT).call() == POS_OPEN
    check_solvent(world)

    receipt = answer(world, dispute_id)
    [answered] = events(world, receipt, "Answered")
    assert answered["answerHash"] == P.answer_hash(WAD // 3, [12, 40], [WAD // 3, WAD // 4])
    assert dispute(world, dispute_id)["answerHash"] == answered["answerHash"]
    for r in refs:
        commit(world, dispute_id, r, V_CHEATED)
    for r in refs:  # reveals open early: every drawn referee committed
        reveal(world, dispute_id, r, V_CHEATED)
    assert dm.functions.canResolve(dispute_id).call()  # early: everyone revealed
    receipt = send(w3, dm.functions.resolve(dispute_id), world.outsider)

    d = dispute(world, dispute_id)
    assert (d["status"], d["outcome"], d["cheatedVotes"], d["faithfulVotes"]) == (S_RESOLVED, O_ACCUSED_LOST, 3, 0)
    taken = PARAMS.accused_slash
    assert events(world, receipt, "DisputeResolved")[0]["accusedSlashed"] == taken
    assert stake(world, world.drafter) == STAKE - taken
    reward = min(taken, PARAMS.dispute_bond // 2)
    rest = taken - reward
    assert credits(world, world.challenger) == PARAMS.dispute_bond + rest // 2
    assert credits(world, world.requester) == rest - rest // 2
    assert [credits(world, r) for r in refs] == split(reward, 3)
    assert all(stake(world, r) == PARAMS.min_referee_stake for r in refs)  # nobody penalized
    check_solvent(world)
    # market: dispute closed, drafter forfeits, the running job stops
    job = job_view(world, world.running.job_id)
    assert job["openDisputes"] == 0 and job["drafterForfeited"] and job["status"] == JOB_FINISHED
    # everyone unlocked
    assert locks(world, world.drafter) == before[world.drafter][1]
    assert all(locks(world, r) == 0 for r in refs)
    assert dm.functions.positionState(world.running.job_id, 0, 1, DRAFT).call() == POS_PROVEN
    for account in [world.challenger, world.requester, *refs]:
        withdraw_exact(world, account)
    assert w3.eth.get_balance(dm.address) == 0


def test_draft_replay_challenger_loses_unanimously(world):
    dm = world.dm
    challenger_balance = world.w3.eth.get_balance(world.challenger)
    dispute_id, receipt = open_dispute(world, index=0, kind=DRAFT)
    fee = receipt["gasUsed"] * receipt["effectiveGasPrice"]
    assert world.w3.eth.get_balance(world.challenger) == challenger_balance - PARAMS.dispute_bond - fee
    refs = panel(world, dispute_id)
    answer(world, dispute_id)
    for r in refs:
        commit(world, dispute_id, r, V_FAITHFUL)
    for r in refs:
        reveal(world, dispute_id, r, V_FAITHFUL)
    send(world.w3, dm.functions.resolve(dispute_id), world.outsider)
    d = dispute(world, dispute_id)
    assert (d["outcome"], d["faithfulVotes"]) == (O_CHALLENGER_LOST, 3)
    reward = PARAMS.dispute_bond * 5000 // 10000
    assert dm.functions.refereeReward().call() == reward
    assert credits(world, world.drafter) == PARAMS.dispute_bond - reward
    assert [credits(world, r) for r in refs] == split(reward, 3)
    assert credits(world, world.challenger) == 0
    assert stake(world, world.drafter) == STAKE
    job = job_view(world, world.running.job_id)
    assert job["openDisputes"] == 0 and not job["drafterForfeited"] and job["status"] == JOB_RUNNING
    assert dm.functions.positionState(world.running.job_id, 0, 0, DRAFT).call() == POS_FREE
    check_solvent(world)
    for account in [world.drafter, *refs]:
        withdraw_exact(world, account)
    assert world.w3.eth.get_balance(dm.address) == 0
    # the position can be disputed again (a new panel, a new bond)
    open_dispute(world, index=0, kind=DRAFT, sender=world.outsider)


def test_target_replay_accused_loses_with_a_minority_referee(world):
    dispute_id, receipt = open_dispute(world, index=2, kind=TARGET)  # the rejected position binds
    [opened] = events(world, receipt, "DisputeOpened")
    assert (opened["accused"], opened["modelId"]) == (world.verifier, TARGET_MODEL)
    assert (opened["token"], opened["claimedValue"]) == (TOKENS[2], PVALS[2])
    refs = panel(world, dispute_id)
    answer(world, dispute_id)
    votes = [V_CHEATED, V_FAITHFUL, V_CHEATED]
    for r, v in zip(refs, votes):
        commit(world, dispute_id, r, v)
    for r, v in zip(refs, votes):
        reveal(world, dispute_id, r, v)
    receipt = send(world.w3, world.dm.functions.resolve(dispute_id), world.outsider)
    assert dispute(world, dispute_id)["outcome"] == O_ACCUSED_LOST
    penalty = PARAMS.referee_penalty
    assert [dict(e) for e in events(world, receipt, "RefereePenalized")] == [
        {"disputeId": dispute_id, "referee": refs[1], "taken": penalty}
    ]
    assert stake(world, refs[1]) == PARAMS.min_referee_stake - penalty
    assert not world.registry.functions.isActive(refs[1], ROLE_REFEREE, TARGET_MODEL).call()
    taken = PARAMS.accused_slash
    assert stake(world, world.verifier) == STAKE - taken
    reward = PARAMS.dispute_bond // 2
    rest = taken - reward
    majority = split(reward + penalty, 2)
    assert [credits(world, r) for r in refs] == [majority[0], 0, majority[1]]
    assert credits(world, world.challenger) == PARAMS.dispute_bond + rest // 2
    assert credits(world, world.requester) == rest - rest // 2
    job = job_view(world, world.running.job_id)
    assert job["verifierForfeited"] and not job["drafterForfeited"] and job["status"] == JOB_FINISHED
    check_solvent(world)
    for account in [world.challenger, world.requester, refs[0], refs[2]]:
        withdraw_exact(world, account)
    assert world.w3.eth.get_balance(world.dm.address) == 0


def test_target_replay_out_token_challenger_loses_with_a_silent_referee(world):
    index = GAMMA  # the outToken position
    dispute_id, receipt = open_dispute(world, index=index, kind=TARGET)
    [opened] = events(world, receipt, "DisputeOpened")
    assert (opened["token"], opened["claimedValue"]) == (OUT_TOKEN, 0)
    refs = panel(world, dispute_id)
    answer(world, dispute_id)
    for r in refs:
        commit(world, dispute_id, r, V_FAITHFUL)
    reveal(world, dispute_id, refs[0], V_FAITHFUL)
    reveal(world, dispute_id, refs[2], V_FAITHFUL)
    assert not world.dm.functions.canResolve(dispute_id).call()  # refs[1] may still reveal
    expect_revert(
        world.dm,
        world.dm.functions.resolve(dispute_id),
        world.outsider,
        "TooEarlyToResolve",
        dispute(world, dispute_id)["revealDeadline"],
    )
    advance(world.w3, PARAMS.vote_commit_period + PARAMS.vote_reveal_period + 10)
    send(world.w3, world.dm.functions.resolve(dispute_id), world.outsider)
    assert dispute(world, dispute_id)["outcome"] == O_CHALLENGER_LOST
    penalty, reward = PARAMS.referee_penalty, PARAMS.dispute_bond // 2
    majority = split(reward + penalty, 2)
    assert [credits(world, r) for r in refs] == [majority[0], 0, majority[1]]
    assert stake(world, refs[1]) == PARAMS.min_referee_stake - penalty
    assert credits(world, world.verifier) == PARAMS.dispute_bond - reward
    assert stake(world, world.verifier) == STAKE
    check_solvent(world)


def test_dispute_on_a_finished_job_blocks_finalize_until_closed(world):
    w3, market = world.w3, world.market
    job_id = world.finished.job_id
    dispute_id, _ = open_dispute(world, cyc=world.finished, index=0, kind=DRAFT)
    answer(world, dispute_id)
    refs = panel(world, dispute_id)
    for r in refs:
        commit(world, dispute_id, r, V_FAITHFUL)
    for r in refs:
        reveal(world, dispute_id, r, V_FAITHFUL)
    advance(w3, PARAMS.challenge_window + 10)
    with pytest.raises(ContractCustomError):  # DisputesOpen
        market.functions.finalize(job_id).transact({"from": world.outsider})
    send(w3, world.dm.functions.resolve(dispute_id), world.outsider)
    send(w3, market.functions.finalize(job_id), world.outsider)
    assert market.functions.jobStatus(job_id).call() == JOB_FINALIZED
    # a finalized job can no longer be disputed
    fn = world.dm.functions.openDispute(job_id, 0, 1, DRAFT, world.finished.record(), world.finished.leaf_proof(1))
    before = snapshot_state(world, everyone(world))
    expect_revert(world.dm, fn, world.outsider, "JobNotDisputable", job_id, JOB_FINALIZED, value=PARAMS.dispute_bond)
    assert snapshot_state(world, everyone(world)) == before


# ------------------------------------------------------------------ timeouts and void outcomes


def test_answer_timeout_accused_loses(world):
    dm = world.dm
    dispute_id, _ = open_dispute(world, index=1, kind=DRAFT)
    refs = panel(world, dispute_id)
    deadline = dispute(world, dispute_id)["answerDeadline"]
    expect_revert(dm, dm.functions.claimAnswerTimeout(dispute_id), world.outsider, "AnswerPeriodNotOver", deadline)
    advance(world.w3, PARAMS.answer_period + 10)
    expect_revert(dm, dm.functions.answer(dispute_id, 1, [1], [1]), world.drafter, "AnswerPeriodOver", deadline)
    receipt = send(world.w3, dm.functions.claimAnswerTimeout(dispute_id), world.outsider)
    [resolved] = events(world, receipt, "DisputeResolved")
    assert (resolved["outcome"], resolved["accusedSlashed"]) == (O_SILENT, PARAMS.accused_slash)
    taken = PARAMS.accused_slash
    assert credits(world, world.challenger) == PARAMS.dispute_bond + taken // 2
    assert credits(world, world.requester) == taken - taken // 2
    assert all(credits(world, r) == 0 and stake(world, r) == PARAMS.min_referee_stake for r in refs)
    assert all(locks(world, r) == 0 for r in refs)
    job = job_view(world, world.running.job_id)
    assert job["drafterForfeited"] and job["status"] == JOB_FINISHED and job["openDisputes"] == 0
    assert dm.functions.positionState(world.running.job_id, 0, 1, DRAFT).call() == POS_PROVEN
    expect_revert(
        dm, dm.functions.claimAnswerTimeout(dispute_id), world.outsider, "DisputeWrongStatus", dispute_id, S_RESOLVED
    )
    check_solvent(world)
    withdraw_exact(world, world.challenger)
    withdraw_exact(world, world.requester)
    assert world.w3.eth.get_balance(dm.address) == 0


def test_commit_timeout_without_votes_is_void(world):
    dm = world.dm
    dispute_id, refs = answered_dispute(world, index=1, kind=TARGET)
    expect_revert(
        dm,
        dm.functions.resolve(dispute_id),
        world.outsider,
        "TooEarlyToResolve",
        dispute(world, dispute_id)["revealDeadline"],
    )
    advance(world.w3, PARAMS.vote_commit_period + 10)
    expect_revert(
        dm,
        dm.functions.commitVote(dispute_id, b"\x01" * 32),
        refs[0],
        "CommitPeriodOver",
        dispute(world, dispute_id)["commitDeadline"],
    )
    assert dm.functions.canResolve(dispute_id).call()  # nobody committed, so nobody can reveal
    receipt = send(world.w3, dm.functions.resolve(dispute_id), world.outsider)
    assert dispute(world, dispute_id)["outcome"] == O_VOID
    penalty = PARAMS.referee_penalty
    assert len(events(world, receipt, "RefereePenalized")) == 3
    # bond back, plus the no-shows' penalties (there is no revealer to give them to)
    assert credits(world, world.challenger) == PARAMS.dispute_bond + 3 * penalty
    assert stake(world, world.verifier) == STAKE and credits(world, world.verifier) == 0
    assert all(stake(world, r) == PARAMS.min_referee_stake - penalty for r in refs)
    job = job_view(world, world.running.job_id)
    assert job["openDisputes"] == 0 and not job["verifierForfeited"] and job["status"] == JOB_RUNNING
    assert dm.functions.positionState(world.running.job_id, 0, 1, TARGET).call() == POS_FREE
    check_solvent(world)


def test_commit_deadline_with_partial_commits_resolves_once_committers_revealed(world):
    dm = world.dm
    dispute_id, refs = answered_dispute(world, index=1, kind=DRAFT)
    commit(world, dispute_id, refs[0], V_CHEATED)
    commit(world, dispute_id, refs[1], V_CHEATED)
    expect_revert(
        dm,
        dm.functions.revealVote(dispute_id, V_CHEATED, salt_of(refs[0])),
        refs[0],
        "RevealPeriodNotOpen",
        dispute(world, dispute_id)["commitDeadline"],
    )
    advance(world.w3, PARAMS.vote_commit_period + 10)
    reveal(world, dispute_id, refs[0], V_CHEATED)
    assert not dm.functions.canResolve(dispute_id).call()
    reveal(world, dispute_id, refs[1], V_CHEATED)
    assert dm.functions.canResolve(dispute_id).call()  # before the reveal deadline
    send(world.w3, dm.functions.resolve(dispute_id), world.outsider)
    assert dispute(world, dispute_id)["outcome"] == O_ACCUSED_LOST  # 2 of 3 drawn is a strict majority
    penalty, reward = PARAMS.referee_penalty, PARAMS.dispute_bond // 2
    majority = split(reward + penalty, 2)
    assert [credits(world, r) for r in refs] == [majority[0], majority[1], 0]
    check_solvent(world)


def test_reveal_timeout_without_reveals_is_void(world):
    dm = world.dm
    dispute_id, refs = answered_dispute(world, index=0, kind=TARGET)
    for r in refs:
        commit(world, dispute_id, r, V_CHEATED)
    assert not dm.functions.canResolve(dispute_id).call()
    advance(world.w3, PARAMS.vote_commit_period + PARAMS.vote_reveal_period + 10)
    expect_revert(
        dm,
        dm.functions.revealVote(dispute_id, V_CHEATED, salt_of(refs[0])),
        refs[0],
        "RevealPeriodOver",
        dispute(world, dispute_id)["revealDeadline"],
    )
    send(world.w3, dm.functions.resolve(dispute_id), world.outsider)
    assert dispute(world, dispute_id)["outcome"] == O_VOID
    penalty = PARAMS.referee_penalty
    assert credits(world, world.challenger) == PARAMS.dispute_bond + 3 * penalty
    assert stake(world, world.verifier) == STAKE
    check_solvent(world)


def test_tie_is_void_and_revealers_share_the_no_show_penalty(world):
    dm = world.dm
    dispute_id, refs = answered_dispute(world, index=1, kind=DRAFT)
    commit(world, dispute_id, refs[0], V_CHEATED)
    commit(world, dispute_id, refs[1], V_FAITHFUL)
    commit(world, dispute_id, refs[2], V_CHEATED)
    advance(world.w3, PARAMS.vote_commit_period + 10)
    reveal(world, dispute_id, refs[0], V_CHEATED)
    reveal(world, dispute_id, refs[1], V_FAITHFUL)
    advance(world.w3, PARAMS.vote_reveal_period)
    send(world.w3, dm.functions.resolve(dispute_id), world.outsider)
    d = dispute(world, dispute_id)
    assert (d["outcome"], d["cheatedVotes"], d["faithfulVotes"]) == (O_VOID, 1, 1)
    penalty = PARAMS.referee_penalty
    assert credits(world, world.challenger) == PARAMS.dispute_bond
    assert [credits(world, r) for r in refs] == split(penalty, 2) + [0]
    assert [stake(world, r) for r in refs] == [PARAMS.min_referee_stake] * 2 + [PARAMS.min_referee_stake - penalty]
    assert stake(world, world.drafter) == STAKE
    check_solvent(world)


# ------------------------------------------------------------------ open: every revert leaves state unchanged


def test_open_reverts(world):
    dm, c = world.dm, world.running
    job, bond = c.job_id, PARAMS.dispute_bond
    who = everyone(world)

    def check(index, kind, record, leaf, name, *args, sender=None, value=bond, job_id=job, cycle=0):
        before = snapshot_state(world, who)
        fn = dm.functions.openDispute(job_id, cycle, index, kind, record, leaf)
        expect_revert(dm, fn, sender or world.challenger, name, *args, value=value)
        assert snapshot_state(world, who) == before

    check(1, DRAFT, c.record(), c.leaf_proof(1), "WrongBond", bond - 1, bond, value=bond - 1)
    check(1, DRAFT, c.record(), c.leaf_proof(1), "WrongBond", 0, bond, value=0)
    check(1, DRAFT, c.record(), c.leaf_proof(1), "JobNotDisputable", world.open_job, JOB_OPEN, job_id=world.open_job)
    check(1, DRAFT, c.record(), c.leaf_proof(1), "JobNotDisputable", 99, 0, job_id=99)
    check(1, DRAFT, c.record(), c.leaf_proof(1), "CycleNotVerified", job, 1, cycle=1)
    stored = P.cycle_record_hash(c.root, PVALS, 2, OUT_TOKEN)
    for changes in ({"p": [WAD, WAD, 1, WAD // 2]}, {"accepted": 3}, {"out_token": 78}, {"root": b"\x01" * 32}):
        record = c.record(**changes)
        check(1, DRAFT, record, c.leaf_proof(1), "RecordMismatch", stored, P.cycle_record_hash(*record))
    check(GAMMA + 1, TARGET, c.record(), c.leaf_proof(GAMMA), "IndexOutOfRange", GAMMA + 1, GAMMA)
    check(3, DRAFT, c.record(), c.leaf_proof(3), "PositionDoesNotBind", 3, 2)
    check(3, TARGET, c.record(), c.leaf_proof(3), "PositionDoesNotBind", 3, 2)
    check(GAMMA, DRAFT, c.record(), c.leaf_proof(GAMMA), "OutTokenNeedsTargetReplay")
    check(1, DRAFT, c.record(), c.leaf_proof(1, token=99), "InvalidProof")
    check(1, DRAFT, c.record(), c.leaf_proof(1, q=Q[1] + 1), "InvalidProof")
    check(1, DRAFT, c.record(), c.leaf_proof(1, proof=P.proof(c.leaves, 2)), "InvalidProof")
    check(1, DRAFT, c.record(), c.leaf_proof(0), "InvalidProof")  # a valid leaf of another index
    check(1, DRAFT, c.record(), c.leaf_proof(1), "ChallengerIsAccused", sender=world.drafter)
    check(1, TARGET, c.record(), c.leaf_proof(1), "ChallengerIsAccused", sender=world.verifier)

    # one running dispute per position; a proven position cannot be punished twice
    before = snapshot_state(world, who)
    dispute_id, _ = open_dispute(world, index=1, kind=DRAFT)
    assert snapshot_state(world, who) != before  # (the snapshot does see a successful open)
    check(1, DRAFT, c.record(), c.leaf_proof(1), "PositionUnderDispute", job, 0, 1, DRAFT, sender=world.outsider)
    open_dispute(world, index=1, kind=TARGET, sender=world.outsider)  # another kind is another position
    advance(world.w3, PARAMS.answer_period + 10)
    send(world.w3, dm.functions.claimAnswerTimeout(dispute_id), world.outsider)
    check(1, DRAFT, c.record(), c.leaf_proof(1), "PositionAlreadyProven", job, 0, 1, DRAFT, sender=world.outsider)


def test_non_payable_paths_and_withdraw_reverts(world):
    dm = world.dm
    expect_revert(dm, dm.functions.withdraw(), world.outsider, "NothingToWithdraw")
    with pytest.raises(ContractCustomError) as raised:  # receive() takes ETH only from the registry
        world.w3.eth.send_transaction({"from": world.outsider, "to": dm.address, "value": 1})
    assert raised.value.data == error_data(dm, "OnlyRegistry")
    assert world.w3.eth.get_balance(dm.address) == 0


# ------------------------------------------------------------------ answer and votes: reverts


def test_answer_reverts(world):
    dm = world.dm
    dispute_id, _ = open_dispute(world, index=1, kind=DRAFT)
    who = everyone(world)

    def check(sender, args, name, *error_args):
        before = snapshot_state(world, who)
        expect_revert(dm, dm.functions.answer(dispute_id, *args), sender, name, *error_args)
        assert snapshot_state(world, who) == before

    check(world.verifier, (1, [1], [1]), "NotAccused")
    check(world.challenger, (1, [1], [1]), "NotAccused")
    check(world.drafter, (1, [], []), "BadTopK", 0)
    check(world.drafter, (1, list(range(17)), [1] * 17), "BadTopK", 17)
    check(world.drafter, (1, [1, 2], [1]), "TopKLengthMismatch", 2, 1)
    check(world.drafter, (WAD + 1, [1], [1]), "ProbabilityAboveWad", WAD + 1)
    check(world.drafter, (1, [1, 2], [WAD, 1]), "ProbabilityAboveWad", WAD + 1)
    expect_revert(dm, dm.functions.answer(99, 1, [1], [1]), world.drafter, "DisputeWrongStatus", 99, S_NONE)
    # the full top-16 is accepted; a second answer is not
    send(world.w3, dm.functions.answer(dispute_id, WAD, list(range(16)), [WAD // 16] * 16), world.drafter)
    check(world.drafter, (1, [1], [1]), "DisputeWrongStatus", dispute_id, S_VOTING)


def test_vote_reverts(world):
    dm = world.dm
    dispute_id, _ = open_dispute(world, index=1, kind=DRAFT)
    refs = panel(world, dispute_id)
    outsiders = [r for r in world.referees if r not in refs] + [world.requester, world.challenger]
    who = everyone(world)

    def check(fn, sender, name, *args):
        before = snapshot_state(world, who)
        expect_revert(dm, fn, sender, name, *args)
        assert snapshot_state(world, who) == before

    c0 = P.vote_commitment(dispute_id, refs[0], V_CHEATED, salt_of(refs[0]))
    check(
        dm.functions.commitVote(dispute_id, c0), refs[0], "DisputeWrongStatus", dispute_id, S_AWAIT
    )  # before the answer
    answer(world, dispute_id)
    for o in outsiders:  # drawn referees only (also: registered referees that were not drawn, and parties)
        check(dm.functions.commitVote(dispute_id, c0), o, "NotDrawnReferee")
    check(dm.functions.commitVote(dispute_id, bytes(32)), refs[0], "EmptyCommitment")
    commit(world, dispute_id, refs[0], V_CHEATED)
    check(dm.functions.commitVote(dispute_id, c0), refs[0], "AlreadyCommitted")  # double vote
    c1 = P.vote_commitment(dispute_id, refs[1], V_FAITHFUL, salt_of(refs[1]))
    check(dm.functions.commitVote(dispute_id, c1), refs[0], "AlreadyCommitted")
    # copying another referee's commitment gains nothing: it is bound to the committer's address
    send(world.w3, dm.functions.commitVote(dispute_id, c0), refs[1])
    check(dm.functions.revealVote(dispute_id, V_CHEATED, salt_of(refs[0])), refs[2], "NotCommitted")
    commit(world, dispute_id, refs[2], V_FAITHFUL)  # all committed: reveals open
    check(dm.functions.revealVote(dispute_id, V_CHEATED, salt_of(refs[0])), outsiders[0], "NotDrawnReferee")
    check(dm.functions.revealVote(dispute_id, V_NONE, salt_of(refs[0])), refs[0], "InvalidVerdict")
    check(dm.functions.revealVote(dispute_id, V_FAITHFUL, salt_of(refs[0])), refs[0], "WrongReveal")
    check(dm.functions.revealVote(dispute_id, V_CHEATED, salt_of(refs[1])), refs[0], "WrongReveal")
    reveal(world, dispute_id, refs[0], V_CHEATED)
    check(dm.functions.revealVote(dispute_id, V_CHEATED, salt_of(refs[0])), refs[0], "AlreadyRevealed")
    check(dm.functions.revealVote(dispute_id, V_CHEATED, salt_of(refs[0])), refs[1], "WrongReveal")  # the copy
    reveal(world, dispute_id, refs[2], V_FAITHFUL)
    assert world.dm.functions.ballotOf(dispute_id, refs[0]).call() == (c0, True, V_CHEATED)
    advance(world.w3, PARAMS.vote_commit_period + PARAMS.vote_reveal_period + 10)
    send(world.w3, dm.functions.resolve(dispute_id), world.outsider)
    check(dm.functions.resolve(dispute_id), world.outsider, "DisputeWrongStatus", dispute_id, S_RESOLVED)
    check(dm.functions.commitVote(dispute_id, c0), refs[0], "DisputeWrongStatus", dispute_id, S_RESOLVED)
    check(
        dm.functions.revealVote(dispute_id, V_CHEATED, salt_of(refs[0])),
        refs[0],
        "DisputeWrongStatus",
        dispute_id,
        S_RESOLVED,
    )
    # refs[1] (copied, never revealed) is penalized; 1 cheated vs 1 faithful of 3 drawn: void
    assert dispute(world, dispute_id)["outcome"] == O_VOID
    assert stake(world, refs[1]) == PARAMS.min_referee_stake - PARAMS.referee_penalty
    check_solvent(world)


def test_resolve_reverts_before_the_vote(world):
    dm = world.dm
    dispute_id, _ = open_dispute(world, index=1, kind=DRAFT)
    expect_revert(dm, dm.functions.resolve(dispute_id), world.outsider, "DisputeWrongStatus", dispute_id, S_AWAIT)
    expect_revert(dm, dm.functions.resolve(77), world.outsider, "DisputeWrongStatus", 77, S_NONE)
    expect_revert(dm, dm.functions.claimAnswerTimeout(77), world.outsider, "DisputeWrongStatus", 77, S_NONE)
    answer(world, dispute_id)
    expect_revert(
        dm, dm.functions.claimAnswerTimeout(dispute_id), world.outsider, "DisputeWrongStatus", dispute_id, S_VOTING
    )


# ------------------------------------------------------------------ referee draw


def test_draw_excludes_parties_and_takes_fewer_when_fewer_are_eligible(world):
    registry = world.registry
    # requester and challenger are registered referees but never drawn
    for i, kind in enumerate((DRAFT, TARGET)):
        dispute_id, _ = open_dispute(world, index=i, kind=kind)
        refs = panel(world, dispute_id)
        assert world.requester not in refs and world.challenger not in refs and len(refs) == 3
    # leave 2 eligible referees: a panel of 2
    for r in world.referees[2:]:
        send(world.w3, registry.functions.requestUnbond(), r)
    dispute_id, _ = open_dispute(world, index=2, kind=DRAFT)
    assert sorted(panel(world, dispute_id)) == sorted(world.referees[:2])
    assert dispute(world, dispute_id)["drawn"] == 2


def test_draw_skips_inactive_referees_and_a_dispute_nobody_can_referee_is_void(world):
    dm, registry = world.dm, world.registry
    for r in world.referees[3:]:
        send(world.w3, registry.functions.requestUnbond(), r)
    dispute_id, _ = open_dispute(world, index=1, kind=TARGET)
    refs = panel(world, dispute_id)
    assert sorted(refs) == sorted(world.referees[:3])
    answer(world, dispute_id)
    advance(world.w3, PARAMS.vote_commit_period + 10)
    send(world.w3, dm.functions.resolve(dispute_id), world.outsider)  # nobody voted: all penalized below minimum
    assert all(not registry.functions.isActive(r, ROLE_REFEREE, TARGET_MODEL).call() for r in refs)
    assert registry.functions.refereeCount(TARGET_MODEL).call() == 5  # still listed, but inactive

    # listed referees let a dispute open; when none is eligible at the draw, it ends Void and nobody loses
    challenger_credit, drafter_locks = credits(world, world.challenger), locks(world, world.verifier)
    dispute_id, _ = open_dispute(world, index=0, kind=TARGET, draw=False)
    receipt = draw_referees(world, dispute_id)
    [resolved] = events(world, receipt, "DisputeResolved")
    assert (resolved["outcome"], resolved["accusedSlashed"]) == (O_VOID, 0)
    assert panel(world, dispute_id) == [] and dispute(world, dispute_id)["status"] == S_RESOLVED
    assert credits(world, world.challenger) == challenger_credit + PARAMS.dispute_bond
    assert locks(world, world.verifier) == drafter_locks
    assert dm.functions.positionState(world.running.job_id, 0, 0, TARGET).call() == POS_FREE
    check_solvent(world)


def test_open_needs_a_registered_referee(world):
    c = world.running
    for account in [world.requester, world.challenger, *world.referees]:
        send(world.w3, world.registry.functions.requestUnbond(), account)
    assert world.registry.functions.refereeCount(TARGET_MODEL).call() == 0
    before = snapshot_state(world, everyone(world))
    fn = world.dm.functions.openDispute(c.job_id, 0, 0, TARGET, c.record(), c.leaf_proof(0))
    expect_revert(world.dm, fn, world.outsider, "NoEligibleReferees", TARGET_MODEL, value=PARAMS.dispute_bond)
    assert snapshot_state(world, everyone(world)) == before


def test_the_draw_waits_for_the_seed_block_and_is_rescheduled_once_its_hash_is_gone(world):
    w3, dm = world.w3, world.dm
    dispute_id, receipt = open_dispute(world, index=1, kind=DRAFT, draw=False)
    seed_block = receipt["blockNumber"]
    # evaluated at the opening block itself the hash does not exist yet
    with pytest.raises(ContractCustomError) as raised:
        dm.functions.drawReferees(dispute_id).call({"from": world.outsider}, block_identifier=seed_block)
    assert raised.value.data == error_data(dm, "DrawTooEarly", seed_block)
    w3.provider.make_request("anvil_mine", [hex(300)])  # the seed block's hash leaves the 256-block window
    expect_revert(
        dm, dm.functions.answer(dispute_id, WAD // 3, [12], [WAD // 3]), world.drafter, "PanelNotDrawn", seed_block
    )
    receipt = draw_referees(world, dispute_id)
    [rescheduled] = events(world, receipt, "DrawRescheduled")
    assert rescheduled["drawBlock"] == receipt["blockNumber"] == dispute(world, dispute_id)["drawBlock"]
    assert panel(world, dispute_id) == [] and not events(world, receipt, "RefereesDrawn")
    receipt = answer(world, dispute_id)  # the next block: the accused's answer draws from the new seed block
    refs = events(world, receipt, "RefereesDrawn")[0]["referees"]
    assert len(refs) == 3 and refs == panel(world, dispute_id)
    assert dispute(world, dispute_id)["status"] == S_VOTING
    assert all(locks(world, r) == 1 for r in refs)
    who = everyone(world)
    before = snapshot_state(world, who)
    expect_revert(dm, dm.functions.drawReferees(dispute_id), world.outsider, "DisputeWrongStatus", dispute_id, S_VOTING)
    expect_revert(dm, dm.functions.drawReferees(99), world.outsider, "DisputeWrongStatus", 99, S_NONE)
    assert snapshot_state(world, who) == before


def test_draw_reverts_once_drawn(world):
    dispute_id, _ = open_dispute(world, index=1, kind=DRAFT)
    before = snapshot_state(world, everyone(world))
    expect_revert(world.dm, world.dm.functions.drawReferees(dispute_id), world.challenger, "AlreadyDrawn", dispute_id)
    assert snapshot_state(world, everyone(world)) == before


def test_referees_registered_after_the_seed_block_are_never_drawn(world):
    """Knowing the seed block's hash, nobody can steer the draw by joining: the old referees leave (their slots
    are refilled by swap-and-pop) and fresh accounts register into the same list slots after the seed block."""
    w3, registry = world.w3, world.registry
    dispute_id, receipt = open_dispute(world, index=1, kind=DRAFT, draw=False)
    for r in world.referees:
        send(w3, registry.functions.requestUnbond(), r)
    fresh = []
    for i in range(len(world.referees)):
        account = w3.to_checksum_address("0x" + keccak(b"late referee %d" % i)[:20].hex())
        w3.provider.make_request("anvil_impersonateAccount", [account])
        w3.provider.make_request("anvil_setBalance", [account, hex(10 * ETHER)])
        send(
            w3,
            registry.functions.register(ROLE_REFEREE, [DRAFT_MODEL], [VOCAB]),
            account,
            value=PARAMS.min_referee_stake,
        )
        fresh.append(account)
    listed = [
        registry.functions.refereeAt(DRAFT_MODEL, i).call() for i in range(dispute(world, dispute_id)["poolSize"])
    ]
    assert set(fresh) <= set(listed)  # inside the slots the draw ranges over, and active
    assert all(registry.functions.isActive(a, ROLE_REFEREE, DRAFT_MODEL).call() for a in fresh)
    assert all(registry.functions.registeredBlock(a).call() > receipt["blockNumber"] for a in fresh)
    receipt = draw_referees(world, dispute_id)
    assert events(world, receipt, "DisputeResolved")[0]["outcome"] == O_VOID  # only the parties were left
    assert panel(world, dispute_id) == []

    # the same fresh accounts are eligible for a dispute opened after they registered
    dispute_id, _ = open_dispute(world, index=0, kind=DRAFT)
    assert len(panel(world, dispute_id)) == 3 and set(panel(world, dispute_id)) <= set(fresh)


def test_draw_samples_a_large_pool_without_scanning_it(world):
    w3, registry = world.w3, world.registry
    extra = []
    for i in range(16):  # 9 listed + 16 = 25 > 4R + 8 = 20: the sampled path
        account = w3.to_checksum_address("0x" + keccak(b"extra referee %d" % i)[:20].hex())
        w3.provider.make_request("anvil_impersonateAccount", [account])
        w3.provider.make_request("anvil_setBalance", [account, hex(10 * ETHER)])
        send(
            w3,
            registry.functions.register(ROLE_REFEREE, [DRAFT_MODEL], [VOCAB]),
            account,
            value=PARAMS.min_referee_stake,
        )
        extra.append(account)
    assert registry.functions.refereeCount(DRAFT_MODEL).call() == 25
    eligible = set(world.referees) | set(extra)
    seen = set()
    for index in range(3):
        dispute_id, _ = open_dispute(world, index=index, kind=DRAFT, draw=False)
        receipt = draw_referees(world, dispute_id)
        refs = panel(world, dispute_id)
        assert len(refs) == 3 and len(set(refs)) == 3 and set(refs) <= eligible
        seen |= set(refs)
        assert receipt["gasUsed"] < 1_000_000
    assert len(seen) > 3  # different draws for different disputes


# ------------------------------------------------------------------ misc


def test_vote_commitment_mirror_and_constructor_checks(world, artifacts):
    dm = world.dm
    salt = keccak(b"x")
    for verdict in (V_FAITHFUL, V_CHEATED):
        assert dm.functions.voteCommitment(7, world.outsider, verdict, salt).call() == P.vote_commitment(
            7, world.outsider, verdict, salt
        )
    art = artifacts["DisputeManager"]
    factory = world.w3.eth.contract(abi=art["abi"], bytecode=art["bytecode"])
    good = [world.registry.address, world.market.address, 1, 60, 60, 60, 3, 1, 1]

    def bad(position, value, name, *args):
        params = list(good)
        params[position] = value
        with pytest.raises(ContractCustomError) as raised:
            factory.constructor(*params).transact({"from": world.deployer})
        assert raised.value.data == error_data(dm, name, *args)

    bad(0, "0x" + "00" * 20, "DisputeZeroAddress")
    bad(1, "0x" + "00" * 20, "DisputeZeroAddress")
    bad(2, 0, "InvalidParameter", "bond", 0)
    bad(3, 0, "InvalidParameter", "answerPeriod", 0)
    bad(4, 366 * 86400, "InvalidParameter", "commitPeriod", 366 * 86400)
    bad(5, 0, "InvalidParameter", "revealPeriod", 0)
    bad(6, 0, "InvalidParameter", "refereeCount", 0)
    bad(6, 16, "InvalidParameter", "refereeCount", 16)


def _full_dispute_gas(world, kind, index):
    dispute_id, receipt = open_dispute(world, index=index, kind=kind, draw=False)
    gas = {"open": receipt["gasUsed"]}
    gas["answer"] = answer(world, dispute_id)["gasUsed"]  # the accused's answer draws the referees
    refs = panel(world, dispute_id)
    gas["commits"] = sum(commit(world, dispute_id, r, V_CHEATED)["gasUsed"] for r in refs)
    gas["reveals"] = sum(reveal(world, dispute_id, r, V_CHEATED)["gasUsed"] for r in refs)
    gas["resolve"] = send(world.w3, world.dm.functions.resolve(dispute_id), world.outsider)["gasUsed"]
    gas["total"] = sum(gas.values())
    gas["R"] = len(refs)
    return gas


def test_gas_of_a_full_dispute(world):
    gas = _full_dispute_gas(world, DRAFT, 1)
    print(f"\nfull dispute gas (R={gas['R']}): {gas}")
    assert gas["R"] == 3 and gas["total"] < 1_500_000


def test_gas_of_a_full_dispute_with_five_referees(w3, chain):
    params = PARAMS.with_(referee_count=5)
    world5 = deploy_world(w3, params, referees=9)
    gas = _full_dispute_gas(world5, TARGET, 2)
    print(f"\nfull dispute gas (R={gas['R']}): {gas}")
    assert gas["R"] == 5 and gas["total"] < 2_500_000
