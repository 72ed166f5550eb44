"""Probes (docs/protocol.md "Soundness (v1.2)", contracts/ProbeScheduler.sol): the only jobs that move α windows.

v1.1 measured α on requester traffic, so whoever chose a job's prompt, its verifier or whether it finished steered
an honest drafter's window: a verifier let the jobs it disliked time out once the salt was on chain (235 of 747
aborted, the honest drafter α-slashed), a requester fed adversarial prompts, a drafter padded its window with
self-dealt jobs at the floor. Each test below plays one of those best responses against a deployment with probes
wired, with real transactions on anvil, and shows that it no longer moves the window.
"""

from __future__ import annotations

import pytest
from eth_abi import encode
from eth_hash.auto import keccak
from web3 import Web3

from node import protocol as P
from node.chain.deploy import deploy_system
from node.chain.enums import Role
from node.chain.params import BURN_ADDRESS, DEFAULT_PARAMS, PROBE_TREASURY
from tests.test_disputes import DRAFT_MODEL, EOS, ETHER, STAKE, TARGET_MODEL, VOCAB, WAD, run_cycle, send, submit_job

PROMPTS = [b"probe prompt %d: write a haiku about the sea" % i for i in range(5)]
PARAMS = DEFAULT_PARAMS.with_(treasury=PROBE_TREASURY, probe_tokens=8, probe_gamma=4, alpha_bucket_cycles=2)
VERIFIER_STAKES = [1 * ETHER, 2 * ETHER, 4 * ETHER]
HEAD_SEED = keccak(b"probe verifier seed")


class Probes:
    def __init__(self, w3):
        accounts = w3.eth.accounts
        self.w3 = w3
        self.deployer, self.requester, self.drafter, self.keeper = accounts[:4]
        self.verifiers = list(accounts[4:7])
        corpus = {TARGET_MODEL: (P.probe_corpus_root(PROMPTS), len(PROMPTS), EOS)}
        system = deploy_system(w3, self.deployer, PARAMS, corpora=corpus)
        self.registry, self.market, self.probes = system.registry, system.market, system.probes
        fn = self.registry.functions.registerDrafter(DRAFT_MODEL, TARGET_MODEL, WAD // 2, VOCAB)
        send(w3, fn, self.drafter, value=STAKE)
        for verifier, stake in zip(self.verifiers, VERIFIER_STAKES):
            send(w3, self.registry.functions.register(Role.Verifier, [TARGET_MODEL], [VOCAB]), verifier, value=stake)
        w3.eth.wait_for_transaction_receipt(
            w3.eth.send_transaction({"from": self.deployer, "to": self.probes.address, "value": ETHER})
        )

    def open(self):
        receipt = send(self.w3, self.probes.functions.openProbe(self.drafter), self.keeper)
        self.w3.provider.make_request("evm_mine", [])  # the seed block's hash exists from the next block on
        return self.probes.functions.probeCount().call(), receipt

    def expected_draw(self, probe_id):
        """The prompt index and verifier the contract must draw: from the seed block's hash, the verifier tree of
        the block before it (the three verifiers in registration order, weighted by stake), 16 tries."""
        probe = self.probes.functions.getProbe(probe_id).call()
        seed_block, attempts, excluded = probe[1], probe[3], probe[4]
        seed_hash = self.w3.eth.get_block(seed_block)["hash"]
        seed = int.from_bytes(keccak(encode(["bytes32", "uint256", "uint32"], [seed_hash, probe_id, attempts])))
        index = seed % len(PROMPTS)
        total = sum(VERIFIER_STAKES)  # the tree before the seed block: nothing staked since counts
        for j in range(16):
            point = int.from_bytes(keccak(encode(["uint256", "uint256"], [seed, j]))) % total
            holder = next(v for v, upto in zip(self.verifiers, _cumulative(VERIFIER_STAKES)) if point < upto)
            if holder != excluded:
                return index, holder
        raise AssertionError("no verifier in 16 tries")

    def start(self, probe_id):
        index, verifier = self.expected_draw(probe_id)
        fn = self.probes.functions.startProbe(probe_id, PROMPTS[index], P.probe_proof(PROMPTS, index))
        receipt = send(self.w3, fn, self.keeper)
        (started,) = self.probes.events.ProbeStarted().process_receipt(receipt)
        return started.args, index, verifier

    def accept(self, job_id, verifier):
        length = P.hash_chain_length(PARAMS.probe_tokens)
        send(self.w3, self.market.functions.acceptJob(job_id, P.hash_chain(HEAD_SEED, length)), verifier)
        return length

    def window(self):
        return self.market.functions.alphaWindowOf(self.drafter).call()

    def owed(self, who):
        return self.market.functions.owed(who).call()


def _cumulative(weights):
    total, out = 0, []
    for w in weights:
        total += w
        out.append(total)
    return out


def advance(w3, seconds):
    w3.provider.make_request("evm_increaseTime", [seconds])
    w3.provider.make_request("evm_mine", [])


@pytest.fixture(scope="module")
def probes_base(w3):
    snapshot = w3.provider.make_request("evm_snapshot", [])["result"]
    yield Probes(w3)
    w3.provider.make_request("evm_revert", [snapshot])


@pytest.fixture
def env(probes_base, chain):
    return probes_base


def test_a_probe_draws_its_prompt_and_verifier_from_the_seed_and_pays_its_keeper(env):
    w3, probes = env.w3, env.probes
    probe_id, opened = env.open()
    assert probes.functions.tips(env.keeper).call() == PARAMS.keeper_tip
    assert probes.functions.promptIndexOf(probe_id).call() == env.expected_draw(probe_id)[0]
    index, verifier = env.expected_draw(probe_id)
    wrong = (index + 1) % len(PROMPTS)
    bad = probes.functions.startProbe(probe_id, PROMPTS[wrong], P.probe_proof(PROMPTS, wrong))
    with pytest.raises(Exception, match="0x"):
        bad.call({"from": env.keeper})  # another corpus prompt than the drawn one: BadProbePrompt
    # the verifier that would gain from being drawn (or not) moves its stake after the seed: nothing changes
    send(w3, env.registry.functions.addStake(), env.verifiers[0], value=50 * ETHER)
    started, index, verifier = env.start(probe_id)
    job = env.market.functions.getJob(started.jobId).call()
    assert (started.verifier, started.promptIndex) == (verifier, index)
    assert (job[0], job[1], job[2]) == (probes.address, env.drafter, verifier)  # the scheduler requests it
    # one probe per drafter per interval, and never two at once
    with pytest.raises(Exception, match="0x"):
        probes.functions.openProbe(env.drafter).call({"from": env.keeper})  # ProbeNotDue
    advance(w3, PARAMS.probe_interval + 1)
    with pytest.raises(Exception, match="0x"):
        probes.functions.openProbe(env.drafter).call({"from": env.keeper})  # ProbePending: its job still runs
    assert opened["blockNumber"] == probes.functions.getProbe(probe_id).call()[1]


def test_regular_jobs_never_move_the_window_once_probes_are_wired(env):
    """The padding and adversarial-prompt best responses: a requester's (or the drafter's own) job at the
    reference settings and the price floor, settled, publishes its α (AlphaObserved) and leaves the window alone."""
    w3, m = env.w3, env.market
    before = env.window()
    price_token, price_pass = 10**12, PARAMS.alpha_price_floor
    request = (
        DRAFT_MODEL,
        TARGET_MODEL,
        env.drafter,
        env.verifiers[0],
        4,
        WAD,
        0,
        WAD,
        3,
        EOS,
        price_token,
        price_pass,
    )
    send(w3, m.functions.submitJob(request, b"adversarial"), env.requester, value=3 * (price_token + price_pass))
    job_id = m.functions.jobCount().call()
    assert m.functions.getJob(job_id).call()[8]  # alphaEligible: the reference settings at the floor (v1.1 counted it)
    length = env.accept(job_id, env.verifiers[0])
    run_cycle(w3, m, env.drafter, env.verifiers[0], job_id, HEAD_SEED, length)
    advance(w3, PARAMS.challenge_window + 1)
    receipt = send(w3, m.functions.finalize(job_id), env.keeper)
    assert not m.events.AlphaCyclesRecorded().process_receipt(receipt)
    (observed,) = m.events.AlphaObserved().process_receipt(receipt)
    assert (observed.args.jobId, observed.args.drafter, observed.args.cycles) == (job_id, env.drafter, 1)
    assert env.window() == before
    assert m.functions.alphaObservedOf(env.drafter).call()[0] == 1


def test_a_probe_enters_the_window(env):
    w3, m = env.w3, env.market
    probe_id, _ = env.open()
    started, _, verifier = env.start(probe_id)
    length = env.accept(started.jobId, verifier)
    cycle = 0
    while m.functions.jobStatus(started.jobId).call() == 2:  # Running
        run_cycle(w3, m, env.drafter, verifier, started.jobId, HEAD_SEED, length, cycle)
        cycle += 1
    advance(w3, PARAMS.challenge_window + 1)
    receipt = send(w3, m.functions.finalize(started.jobId), env.keeper)
    (recorded,) = m.events.AlphaCyclesRecorded().process_receipt(receipt)
    assert (recorded.args.drafter, recorded.args.cycles) == (env.drafter, cycle)
    assert env.window()[1] == cycle


def test_a_verifier_that_aborts_a_probe_is_slashed_burnt_and_another_is_drawn(env):
    """Selective abort: once the drafter's salt is on chain the verifier knows the probe's outcome and lets the
    deadline pass. Its timeout slash is burnt, the aborted cycles never enter the window, and the probe draws
    another verifier (never this one) and another prompt from a fresh seed."""
    w3, m, probes = env.w3, env.market, env.probes
    probe_id, _ = env.open()
    started, _, verifier = env.start(probe_id)
    env.accept(started.jobId, verifier)
    root = P.draft_root(started.jobId, 0, [11, 12, 13, 14], [WAD // 2, WAD // 3, WAD // 5, WAD // 7])  # fmt: skip
    fn = m.functions.commitFirstDraft(
        started.jobId, root, [11, 12, 13, 14], [WAD // 2, WAD // 3, WAD // 5, WAD // 7], 7
    )
    send(w3, fn, env.drafter)  # the salt is on chain: the verifier can now compute the cycle's outcome
    stake, burnt, window = env.registry.functions.stakeOf(verifier).call(), env.owed(BURN_ADDRESS), env.window()
    advance(w3, m.functions.commitTimeout().call() + m.functions.verifyTimeout().call() + 1)
    receipt = send(w3, m.functions.claimTimeout(started.jobId), env.keeper)
    (redrawn,) = probes.events.ProbeRedrawn().process_receipt(receipt)
    assert redrawn.args.abortedVerifier == verifier
    assert env.registry.functions.stakeOf(verifier).call() == stake - PARAMS.timeout_slash
    assert env.owed(BURN_ADDRESS) == burnt + PARAMS.timeout_slash
    assert env.window() == window
    second, _, other = env.start(probe_id)
    assert other != verifier and second.verifier == other and second.jobId != started.jobId


def test_a_drafter_that_lets_a_probe_time_out_enters_the_window_at_alpha_zero(env):
    """A drafter that can tell a probe from a regular job and declines the ones it expects to go badly (before its
    first commit, which a regular job does not slash) gains nothing: the probe enters its window at α = 0."""
    w3, m = env.w3, env.market
    probe_id, _ = env.open()
    started, _, verifier = env.start(probe_id)
    env.accept(started.jobId, verifier)
    advance(w3, m.functions.commitTimeout().call() + 1)
    receipt = send(w3, m.functions.claimTimeout(started.jobId), env.keeper)
    (recorded,) = m.events.AlphaCyclesRecorded().process_receipt(receipt)
    owed_tokens = PARAMS.probe_tokens
    assert (recorded.args.cycles, recorded.args.accepted, recorded.args.rejected) == (owed_tokens, 0, owed_tokens)


def test_a_drafter_at_capacity_still_gets_its_probe(env):
    """A drafter that keeps itself at capacity with self-dealt jobs cannot dodge probes (DrafterAtCapacity is for
    requesters' jobs only)."""
    w3, m = env.w3, env.market
    send(w3, m.functions.setCapacity(1), env.drafter)
    submit_job(w3, m, env.requester, env.drafter, env.verifiers[0], 3)
    assert m.functions.drafterLoad(env.drafter).call() == [1, 1]
    probe_id, _ = env.open()
    started, _, _ = env.start(probe_id)
    assert m.functions.drafterLoad(env.drafter).call() == [2, 1]
    assert Web3.to_checksum_address(m.functions.getJob(started.jobId).call()[0]) == env.probes.address


def test_a_drafter_pricing_itself_above_the_probe_price_still_gets_its_probe(env):
    """A drafter cannot dodge probes by declaring a min price above what a probe pays (`setMinPrice` binds only
    requesters' jobs)."""
    w3, m = env.w3, env.market
    send(w3, m.functions.setMinPrice(PARAMS.probe_price * 10), env.drafter)
    probe_id, _ = env.open()
    started, _, _ = env.start(probe_id)
    assert Web3.to_checksum_address(m.functions.getJob(started.jobId).call()[0]) == env.probes.address


def test_a_probed_window_in_breach_slashes_a_real_fraction_of_stake(env):
    """With probes wired nobody steers the window, so the α slash is alphaSlashBps of the stake, uncapped (v1.1
    capped it at N × floor × fee, 1.5e14 wei at the defaults, because requesters could farm it). Eight declined
    probes fill the window (8 buckets, one per settled job) at α = 0 against a claim of 0.5."""
    w3, m = env.w3, env.market
    stake = env.registry.functions.stakeOf(env.drafter).call()
    slashed = []
    for _ in range(8):
        probe_id, _ = env.open()
        started, _, verifier = env.start(probe_id)
        env.accept(started.jobId, verifier)
        advance(w3, m.functions.commitTimeout().call() + 1)
        receipt = send(w3, m.functions.claimTimeout(started.jobId), env.keeper)
        slashed += m.events.AlphaSlashed().process_receipt(receipt)
        advance(w3, PARAMS.probe_interval + 1)
    (slash,) = slashed
    assert slash.args.amount == stake * PARAMS.alpha_slash_bps // 10_000 > PARAMS.alpha_slash_cap
    assert env.registry.functions.stakeOf(env.drafter).call() == stake - slash.args.amount
