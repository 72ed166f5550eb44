"""Gas of the protocol's paths on a chain of its own (receipt gasUsed): a cycle at each γ, a job's fixed overhead and
finalize's α update, and a dispute with and without one appeal. scripts/gas_report.py reports them all; scripts/
bench_security.py measures the paths protocol v1.1 changed with the same functions. Leaves, roots, proofs, reveals,
uniforms, accept counts and vote commitments come from node.protocol."""

from __future__ import annotations

from eth_hash.auto import keccak
from web3 import Web3
from web3.logs import DISCARD

from node import protocol as P
from node.chain.deploy import deploy_system
from node.chain.enums import DisputeStatus, Verdict
from node.chain.params import ETHER, WAD

GAMMAS = (1, 4, 8, 16)
COUNTS = ("referees", "appealReferees")  # dispute entries that count seats, not gas
REFEREES = 16  # registered referees: round 0 takes R = 3, an appeal 2R + 1 = 7 fresh ones (draws skip earlier panels)
REPORT_CAPACITY = 1000  # concurrent jobs the report's drafter declares (it never finishes most of them)
ALPHAS = (0.6, 0.8)
GOAL_GAMMA, GOAL_GAS = 4, 110_000
DRAFT_MODEL = keccak(b"verispec.gas-report.draft-model")
TARGET_MODEL = keccak(b"verispec.gas-report.target-model")
ROLE_VERIFIER, ROLE_REFEREE = 2, 3
DRAFT_REPLAY = 0
EOS, OUT_TOKEN = 2, 777  # proposals and outToken are never EOS, so no job ends early
VOCAB = 2**20  # registered for both models; every proposal below is in range


def forced_p(n: int):
    """p values (full width) for which the accept rule accepts exactly n proposals: p_i ≥ q_i always accepts,
    p_n = ⌊u_n·q_n / WAD⌋ rejects."""

    def p(reveal: bytes, root: bytes, q: list[int], salt: int) -> list[int]:
        return [
            min(WAD, x + WAD // 7 + 12345)
            if i < n
            else P.accept_uniform(reveal, root, i, salt) * x // WAD
            if i == n
            else WAD // 3 + 987654321 * i
            for i, x in enumerate(q)
        ]

    return p


def alpha_p(alpha: float):
    """p_i = α·q_i: proposal i is accepted iff u_i·q_i < p_i·WAD, i.e. iff u_i < α (up to rounding)."""
    a = round(alpha * WAD)
    return lambda reveal, root, q, salt: [x * a // WAD for x in q]


class Chain:
    """A deployed system with a registered drafter, verifier, challenger and REFEREES referees (impersonated accounts
    of their own, so that the report needs no more than anvil's default dev accounts)."""

    def __init__(self, w3: Web3):
        self.w3 = w3
        a = w3.eth.accounts
        self.requester, self.drafter, self.verifier, self.challenger = a[1:5]
        self.system = deploy_system(w3, a[0])
        self.market, self.disputes, self.params = self.system.market, self.system.disputes, self.system.params
        registry = self.system.registry.functions
        self.send(registry.registerDrafter(DRAFT_MODEL, TARGET_MODEL, WAD // 2, VOCAB), self.drafter, 5 * ETHER)
        self.send(registry.register(ROLE_VERIFIER, [TARGET_MODEL], [VOCAB]), self.verifier, 5 * ETHER)
        # the report keeps many of its measured jobs open at once on its one drafter: it declares room for them
        # (v1.2 capacity; a declared capacity also keeps the drafter's load slot non-zero between jobs)
        self.send(self.market.functions.setCapacity(REPORT_CAPACITY), self.drafter)
        self.referees = []
        for i in range(REFEREES):
            referee = w3.to_checksum_address(keccak(b"verispec.gas-report.referee" + bytes([i]))[:20])
            w3.provider.make_request("anvil_impersonateAccount", [referee])
            w3.provider.make_request("anvil_setBalance", [referee, hex(10 * ETHER)])
            self.referees.append(referee)
            self.send(
                registry.register(ROLE_REFEREE, [DRAFT_MODEL, TARGET_MODEL], [VOCAB, VOCAB]),
                referee,
                self.params.min_referee_stake,
            )

    def send(self, fn, sender: str, value: int = 0) -> dict:
        # an explicit gas limit skips eth_estimateGas (gasUsed does not depend on it)
        tx = fn.transact({"from": sender, "value": value, "gas": 10_000_000})
        receipt = self.w3.eth.wait_for_transaction_receipt(tx)
        assert receipt.status == 1, fn.fn_name
        return receipt

    def advance(self, seconds: int) -> None:
        self.w3.provider.make_request("evm_increaseTime", [seconds])
        self.w3.provider.make_request("evm_mine", [])


class Job:
    """One accepted job (α-eligible sampling settings), driven cycle by cycle with a real hash chain."""

    def __init__(self, chain: Chain, gamma: int, max_tokens: int, price_per_pass: int | None = None):
        self.chain, self.gamma, m = chain, gamma, chain.market.functions
        # the α price floor by default (3e12 wei, the requester's default price per pass): the job's cycles count
        price_per_pass = chain.params.alpha_price_floor if price_per_pass is None else price_per_pass
        request = (
            DRAFT_MODEL,
            TARGET_MODEL,
            chain.drafter,
            chain.verifier,
            gamma,
            WAD,
            0,
            WAD,
            max_tokens,
            EOS,
            10**12,
            price_per_pass,
        )
        self.submit_gas = chain.send(
            m.submitJob(request, bytes(range(1, 33))), chain.requester, max_tokens * (10**12 + price_per_pass)
        ).gasUsed
        self.id = m.jobCount().call()
        self.seed = keccak(b"verispec.gas-report.seed" + self.id.to_bytes(32, "big"))
        length = P.hash_chain_length(max_tokens)
        self.reveals = P.chain_reveals(self.seed, length)
        self.salt = int.from_bytes(keccak(b"verispec.gas-report.salt" + self.id.to_bytes(32, "big"))[:8], "big")
        self.accept_gas = chain.send(m.acceptJob(self.id, P.hash_chain(self.seed, length)), chain.verifier).gasUsed

    def draft(self, cycle: int) -> tuple[list[int], list[int]]:
        """γ proposals with realistic, full-width draft probabilities."""
        tokens = [1000 + 3701 * cycle + 1187 * i for i in range(self.gamma)]
        q = [WAD * (30 + 7 * ((cycle + i) % 9)) // 100 + 123456789 * (i + 1) for i in range(self.gamma)]
        return tokens, q

    def cycle(self, cycle: int, p_of) -> dict:
        """Commit and verify one cycle; returns both gas figures, the accept count and the cycle's data."""
        chain, m = self.chain, self.chain.market.functions
        tokens, q = self.draft(cycle)
        root, reveal = P.draft_root(self.id, cycle, tokens, q), self.reveals[cycle]
        p = p_of(reveal, root, q, self.salt)
        accepted = P.count_accepted(reveal, root, q, p, self.salt)
        if cycle == 0:  # the first draft carries the drafter's salt
            commit = chain.send(m.commitFirstDraft(self.id, root, tokens, q, self.salt), chain.drafter)
        else:
            commit = chain.send(m.commitDraft(self.id, cycle, root, tokens, q), chain.drafter)
        verify = chain.send(m.submitVerification(self.id, cycle, tokens, q, p, reveal, OUT_TOKEN), chain.verifier)
        (event,) = chain.market.events.CycleVerified().process_receipt(verify, errors=DISCARD)
        assert event.args.accepted == accepted, "the contract's accept count differs from node.protocol's"
        return {
            "commitDraft": commit.gasUsed,
            "submitVerification": verify.gasUsed,
            "total": commit.gasUsed + verify.gasUsed,
            "accepted": accepted,
            "tokens": tokens,
            "q": q,
            "p": p,
            "root": root,
        }


def cycle_gas(chain: Chain) -> list[dict]:
    rows = []
    for gamma in GAMMAS:
        job = Job(chain, gamma, max_tokens=4 * (gamma + 1))
        runs = [job.cycle(c, forced_p(gamma - 1)) for c in range(3)]
        first, last = runs[0], runs[-1]
        rows.append(
            {
                "gamma": gamma,
                **{k: last[k] for k in ("commitDraft", "submitVerification", "total")},
                "firstCycle": {"commitFirstDraft": first["commitDraft"], "total": first["total"]},
            }
        )
    return rows


def geometric(alpha: float, gamma: int) -> list[float]:
    """P(n accepted) for n = 0..γ under the geometric model."""
    return [alpha**n * (1 - alpha) for n in range(gamma)] + [alpha**gamma]


def per_token_gas(chain: Chain, cycles: dict[int, dict], n_cycles: int) -> list[dict]:
    rows = []
    for gamma in GAMMAS:
        job = Job(chain, gamma, max_tokens=(gamma + 2) * (gamma + 1))  # never finishes
        job.cycle(0, forced_p(gamma - 1))  # warm-up: every later cycle is in the steady state
        by_count = [job.cycle(n + 1, forced_p(n))["total"] for n in range(gamma + 1)]
        for alpha in ALPHAS:
            omega = P.expected_tokens_per_pass(alpha, gamma)
            expected = sum(pn * gas for pn, gas in zip(geometric(alpha, gamma), by_count))
            sampler = Job(chain, gamma, max_tokens=n_cycles * (gamma + 1) + 1)
            runs = [sampler.cycle(c, alpha_p(alpha)) for c in range(n_cycles)]
            tokens = sum(r["accepted"] + 1 for r in runs)
            rows.append(
                {
                    "gamma": gamma,
                    "alpha": alpha,
                    "tokensPerCycleModel": round(omega, 3),
                    "tokensPerCycleSampled": round(tokens / n_cycles, 3),
                    "sampledCycles": n_cycles,
                    "gasPerTokenModel": round(cycles[gamma]["total"] / omega),
                    "gasPerTokenMeasured": round(expected / omega),
                    "gasPerTokenSampled": round(sum(r["total"] for r in runs) / tokens),
                }
            )
    return rows


def finished_job(chain: Chain, gamma: int, price_per_pass: int | None = None) -> tuple[Job, dict, dict]:
    """A job of three full cycles (the third one finishes it at maxTokens): (job, second cycle, third cycle)."""
    job = Job(chain, gamma, 3 * (gamma + 1), price_per_pass)
    job.cycle(0, forced_p(gamma))
    return job, job.cycle(1, forced_p(gamma)), job.cycle(2, forced_p(gamma))


def job_overhead(chain: Chain, gamma: int = 4) -> tuple[dict, dict]:
    """A job's fixed overhead and finalize's α-window update: (overhead, finalize side by side).

    An earlier counted job is finalized first, so the α window, the treasury's balance and the parties' balances
    are non-zero (the steady state; the first counted job of a deployment pays those fresh slots once). Then a
    counted job (pricePerPass = the α price floor) and an uncounted one (a third of it, below the floor) are
    finished and finalized one after the other in the same state; the difference is what finalize spends on α
    (the window update, AlphaCyclesRecorded, the α fee to the treasury and AlphaFeePaid). The finishing cycle's
    extra is measured against the second cycle (cycle 0 also commits the drafter's salt)."""
    m, floor = chain.market.functions, chain.params.alpha_price_floor
    warm, _, _ = finished_job(chain, gamma)
    job, second, last = finished_job(chain, gamma)
    uncounted, _, _ = finished_job(chain, gamma, floor // 3)
    chain.advance(chain.params.challenge_window + 1)
    chain.send(m.finalize(warm.id), chain.requester)
    counted_gas = chain.send(m.finalize(job.id), chain.requester).gasUsed
    uncounted_gas = chain.send(m.finalize(uncounted.id), chain.requester).gasUsed
    gas = {
        "submitJob": job.submit_gas,
        "acceptJob": job.accept_gas,
        "finishExtra": last["total"] - second["total"],
        "finalize": counted_gas,
    }
    gas["withdraw"] = {
        who: chain.send(m.withdraw(), getattr(chain, who)).gasUsed for who in ("requester", "drafter", "verifier")
    }
    gas["total"] = sum(v for k, v in gas.items() if k != "withdraw") + sum(gas["withdraw"].values())
    finalize = {
        "counted": counted_gas,
        "uncounted": uncounted_gas,
        "alphaUpdate": counted_gas - uncounted_gas,
        "cycles": 3,
        "pricePerPassCounted": floor,
        "pricePerPassUncounted": floor // 3,
    }
    return gas, finalize


def disputed_cycle(chain: Chain, gamma: int, index: int) -> tuple[int, dict]:
    """Opens a DraftReplay dispute on proposal `index` of a fresh job's verified cycle 0: (dispute id, gas)."""
    job = Job(chain, gamma, 8 * (gamma + 1))
    cyc = job.cycle(0, forced_p(2))
    leaves = [P.leaf(job.id, 0, i, t, x) for i, (t, x) in enumerate(zip(cyc["tokens"], cyc["q"]))]
    record = (cyc["root"], cyc["p"], cyc["accepted"], OUT_TOKEN)
    leaf_proof = (cyc["tokens"][index], cyc["q"][index], P.proof(leaves, index))
    dm = chain.disputes.functions
    receipt = chain.send(
        dm.openDispute(job.id, 0, index, DRAFT_REPLAY, record, leaf_proof), chain.challenger, chain.params.dispute_bond
    )
    return dm.disputeCount().call(), {"openDispute": receipt.gasUsed}


def vote(chain: Chain, dispute_id: int, verdict: Verdict) -> tuple[list[str], list[int], list[int]]:
    """Every referee of the current round commits, then reveals, `verdict`: (referees, commit gas, reveal gas)."""
    dm = chain.disputes.functions
    referees = dm.refereesOf(dispute_id).call()
    salts = {r: keccak(b"salt" + bytes.fromhex(r[2:])) for r in referees}
    commits = [
        chain.send(dm.commitVote(dispute_id, P.vote_commitment(dispute_id, r, verdict, salts[r])), r).gasUsed
        for r in referees
    ]
    reveals = [chain.send(dm.revealVote(dispute_id, verdict, salts[r]), r).gasUsed for r in referees]
    return referees, commits, reveals


def status_of(chain: Chain, dispute_id: int) -> DisputeStatus:
    names = [
        c["name"]
        for c in next(e for e in chain.disputes.abi if e.get("name") == "getDispute")["outputs"][0]["components"]
    ]
    return DisputeStatus(dict(zip(names, chain.disputes.functions.getDispute(dispute_id).call()))["status"])


def dispute_gas(chain: Chain, gamma: int = 4, index: int = 1, appeal: bool = False) -> dict:
    """The v1.1 dispute on proposal `index` of a verified cycle, every referee voting AccusedCheated (the accused
    loses): round 0 decided by `resolve` (Appealable), then either the finishing `resolve` after appealPeriod, or
    the drafter's appeal (bond × 2) to 2R + 1 fresh seats, their votes and the final `resolve`."""
    dm, verdict = chain.disputes.functions, Verdict.AccusedCheated
    dispute_id, gas = disputed_cycle(chain, gamma, index)
    # the accused's answer draws round 0's panel (the opening block's hash is visible from the next block on)
    gas["answer"] = chain.send(dm.answer(dispute_id, WAD // 3, [12, 40], [WAD // 3, WAD // 4]), chain.drafter).gasUsed
    referees, gas["commitVotes"], gas["revealVotes"] = vote(chain, dispute_id, verdict)
    gas["resolve"] = chain.send(dm.resolve(dispute_id), chain.challenger).gasUsed
    assert status_of(chain, dispute_id) == DisputeStatus.Appealable
    gas["referees"] = len(referees)
    if appeal:
        bond = dm.appealBond(1).call()
        assert bond == 2 * chain.params.dispute_bond
        gas["appeal"] = chain.send(dm.appeal(dispute_id), chain.drafter, bond).gasUsed
        gas["drawReferees"] = chain.send(dm.drawReferees(dispute_id), chain.challenger).gasUsed
        second, gas["appealCommitVotes"], gas["appealRevealVotes"] = vote(chain, dispute_id, verdict)
        assert not set(second) & set(referees), "an appeal panel excludes the earlier one"
        gas["appealReferees"] = len(second)
    else:
        chain.advance(chain.params.appeal_period + 1)
    gas["finalResolve"] = chain.send(dm.resolve(dispute_id), chain.challenger).gasUsed
    assert status_of(chain, dispute_id) == DisputeStatus.Resolved
    gas["total"] = sum(v if isinstance(v, int) else sum(v) for k, v in gas.items() if k not in COUNTS)
    return gas
