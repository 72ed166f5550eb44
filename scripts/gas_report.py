"""Gas report of verispec's contracts, measured on a local anvil chain of its own.

Deploys the system (node.chain.deploy.deploy_system) and reports receipt gasUsed (21000 base + calldata
+ execution) of:
  * one cycle, commitDraft + submitVerification, at γ = 1, 4, 8, 16 (steady state: the third cycle of a
    job, γ-1 of γ proposals accepted, full-width q, p, reveal and token ids), and cycle 0 (commitFirstDraft,
    which also commits the drafter's salt, + submitVerification);
  * gas per generated token at α = 0.6 and 0.8. A cycle emits n + 1 tokens (n accepted proposals, then the
    residual / bonus token). Under the geometric model (each proposal accepted with probability α until the
    first rejection) P(n) = α^n (1 - α) for n < γ, P(γ) = α^γ, and
    E[n + 1] = Ω(α, γ) = (1 - α^(γ+1)) / (1 - α) (node.protocol.expected_tokens_per_pass). Three figures:
      model     steady-state cycle gas / Ω;
      measured  Σ_n P(n)·gas(n) / Ω, with gas(n) measured for every accept count n = 0..γ (exact, no noise);
      sampled   Σ gas / Σ tokens over --cycles cycles with p_i = α·q_i, for which the contract's own accept
                rule (u_i·q_i < p_i·WAD) accepts each proposal iff its hash-chain uniform u_i < α, so that n is
                geometric (checks the model; at 100 cycles its noise is several per cent);
  * a job's fixed overhead: submitJob, acceptJob, the finishing cycle's extra gas (JobFinished and the
    α-window update; against a steady cycle), finalize, and the three withdrawals;
  * a full dispute (DraftReplay, the accused loses): openDispute, answer (which draws the referees), R commitVote,
    R revealVote, resolve.
Leaves, roots, proofs, hash-chain reveals, uniforms, accept counts and vote commitments come from node.protocol.

Usage: python scripts/gas_report.py [--json] [--cycles N]
"""

from __future__ import annotations

import argparse
import json
import sys

from eth_hash.auto import keccak
from web3 import Web3
from web3.logs import DISCARD

from node import protocol as P
from node.chain.anvil import running_anvil
from node.chain.deploy import deploy_system
from node.chain.enums import Verdict
from node.chain.params import ETHER, WAD

GAMMAS = (1, 4, 8, 16)
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
    """A deployed system with a registered drafter, verifier, challenger and five referees."""

    def __init__(self, w3: Web3):
        self.w3 = w3
        a = w3.eth.accounts
        self.requester, self.drafter, self.verifier, self.challenger = a[1:5]
        self.system = deploy_system(w3, a[0])
        self.market, self.disputes, self.params = self.system.market, self.system.disputes, self.system.params
        registry = self.system.registry.functions
        self.send(registry.registerDrafter(DRAFT_MODEL, TARGET_MODEL, WAD // 2, VOCAB), self.drafter, 5 * ETHER)
        self.send(registry.register(ROLE_VERIFIER, [TARGET_MODEL], [VOCAB]), self.verifier, 5 * ETHER)
        for referee in a[5:10]:
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

    def __init__(self, chain: Chain, gamma: int, max_tokens: int):
        self.chain, self.gamma, m = chain, gamma, chain.market.functions
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
            3 * 10**12,
        )
        self.submit_gas = chain.send(
            m.submitJob(request, bytes(range(1, 33))), chain.requester, max_tokens * 4 * 10**12
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


def job_overhead(chain: Chain, gamma: int = 4) -> dict:
    """A job of three full cycles (the third one finishes it at maxTokens), then settlement. The finishing cycle's
    extra is measured against the second (cycle 0 also commits the drafter's salt)."""
    Job(chain, gamma, gamma + 1).cycle(0, forced_p(gamma))  # an earlier finished job: the α window is open
    job = Job(chain, gamma, 3 * (gamma + 1))
    job.cycle(0, forced_p(gamma))
    first, last = job.cycle(1, forced_p(gamma)), job.cycle(2, forced_p(gamma))
    chain.advance(chain.params.challenge_window + 1)
    m = chain.market.functions
    gas = {
        "submitJob": job.submit_gas,
        "acceptJob": job.accept_gas,
        "finishExtra": last["total"] - first["total"],
        "finalize": chain.send(m.finalize(job.id), chain.requester).gasUsed,
    }
    gas["withdraw"] = {
        who: chain.send(m.withdraw(), getattr(chain, who)).gasUsed for who in ("requester", "drafter", "verifier")
    }
    gas["total"] = sum(v for k, v in gas.items() if k != "withdraw") + sum(gas["withdraw"].values())
    return gas


def dispute_gas(chain: Chain, gamma: int = 4, index: int = 1) -> dict:
    """A DraftReplay dispute on proposal `index` of a verified cycle; every referee votes AccusedCheated."""
    job = Job(chain, gamma, 8 * (gamma + 1))
    cyc = job.cycle(0, forced_p(2))
    leaves = [P.leaf(job.id, 0, i, t, x) for i, (t, x) in enumerate(zip(cyc["tokens"], cyc["q"]))]
    dm, verdict = chain.disputes.functions, Verdict.AccusedCheated
    record = (cyc["root"], cyc["p"], cyc["accepted"], OUT_TOKEN)
    leaf_proof = (cyc["tokens"][index], cyc["q"][index], P.proof(leaves, index))
    gas = {
        "openDispute": chain.send(
            dm.openDispute(job.id, 0, index, DRAFT_REPLAY, record, leaf_proof),
            chain.challenger,
            chain.params.dispute_bond,
        ).gasUsed
    }
    dispute_id = dm.disputeCount().call()
    gas["answer"] = chain.send(dm.answer(dispute_id, WAD // 3, [12, 40], [WAD // 3, WAD // 4]), chain.drafter).gasUsed
    referees = dm.refereesOf(dispute_id).call()
    salts = {r: keccak(b"salt" + bytes.fromhex(r[2:])) for r in referees}
    gas["commitVotes"] = [
        chain.send(dm.commitVote(dispute_id, P.vote_commitment(dispute_id, r, verdict, salts[r])), r).gasUsed
        for r in referees
    ]
    gas["revealVotes"] = [chain.send(dm.revealVote(dispute_id, verdict, salts[r]), r).gasUsed for r in referees]
    gas["resolve"] = chain.send(dm.resolve(dispute_id), chain.challenger).gasUsed
    gas["referees"] = len(referees)
    gas["total"] = (
        gas["openDispute"] + gas["answer"] + sum(gas["commitVotes"]) + sum(gas["revealVotes"]) + gas["resolve"]
    )
    return gas


def measure(n_cycles: int) -> dict:
    with running_anvil() as node:
        w3 = Web3(Web3.HTTPProvider(node.rpc_url, request_kwargs={"timeout": 60}))
        chain = Chain(w3)
        cycles = cycle_gas(chain)
        by_gamma = {row["gamma"]: row for row in cycles}
        report = {
            "cycle": cycles,
            "perToken": per_token_gas(chain, by_gamma, n_cycles),
            "jobOverhead": job_overhead(chain),
            "dispute": dispute_gas(chain),
        }
    goal = by_gamma[GOAL_GAMMA]["total"]
    report["goal"] = {"gamma": GOAL_GAMMA, "limit": GOAL_GAS, "total": goal, "met": goal <= GOAL_GAS}
    return report


def render(r: dict) -> str:
    n = "{:,}".format
    lines = [
        "Gas per cycle (commitDraft + submitVerification; receipt gasUsed, 21000 base and calldata included;",
        "steady state, γ-1 of γ proposals accepted)",
        "",
        "| γ | commitDraft | submitVerification | cycle total | cycle 0: commitFirstDraft | cycle 0 total |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    lines += [
        f"| {c['gamma']} | {n(c['commitDraft'])} | {n(c['submitVerification'])} | {n(c['total'])} "
        f"| {n(c['firstCycle']['commitFirstDraft'])} | {n(c['firstCycle']['total'])} |"
        for c in r["cycle"]
    ]
    lines += [
        "",
        "Gas per generated token (a cycle emits n + 1 tokens, n geometric: E[n + 1] = Ω(α,γ) = "
        "(1 - α^(γ+1)) / (1 - α);",
        "model = cycle gas / Ω; measured = Σ P(n)·gas(n) / Ω with gas(n) measured for each n; "
        f"sampled = Σ gas / Σ tokens over {r['perToken'][0]['sampledCycles']} cycles of the contract's "
        "own geometric draws)",
        "",
        "| γ | α | Ω | tokens/cycle sampled | gas/token model | gas/token measured | gas/token sampled |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    lines += [
        f"| {t['gamma']} | {t['alpha']} | {t['tokensPerCycleModel']:.2f} | {t['tokensPerCycleSampled']:.2f} "
        f"| {n(t['gasPerTokenModel'])} | {n(t['gasPerTokenMeasured'])} | {n(t['gasPerTokenSampled'])} |"
        for t in r["perToken"]
    ]
    j = r["jobOverhead"]
    lines += [
        "",
        "Fixed overhead of a job (γ = 4)",
        "",
        "| step | gas |",
        "|---|---:|",
        f"| submitJob (32-byte prompt) | {n(j['submitJob'])} |",
        f"| acceptJob | {n(j['acceptJob'])} |",
        f"| finishing cycle's extra (JobFinished, α window) | {n(j['finishExtra'])} |",
        f"| finalize | {n(j['finalize'])} |",
    ]
    lines += [f"| withdraw ({who}) | {n(g)} |" for who, g in j["withdraw"].items()]
    lines += [f"| **total** | **{n(j['total'])}** |"]
    d = r["dispute"]
    lines += [
        "",
        f"A full dispute (DraftReplay, R = {d['referees']} referees, the accused loses)",
        "",
        "| step | gas |",
        "|---|---:|",
        f"| openDispute | {n(d['openDispute'])} |",
        f"| answer (incl. referee draw) | {n(d['answer'])} |",
        f"| commitVote × {d['referees']} | {n(sum(d['commitVotes']))} |",
        f"| revealVote × {d['referees']} | {n(sum(d['revealVotes']))} |",
        f"| resolve | {n(d['resolve'])} |",
        f"| **total** | **{n(d['total'])}** |",
    ]
    g = r["goal"]
    lines += [
        "",
        f"Goal: γ={g['gamma']} cycle ≤ {g['limit'] // 1000}k: {'met' if g['met'] else 'not met'} ({n(g['total'])} gas)",
    ]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the report as one JSON object")
    parser.add_argument("--cycles", type=int, default=100, help="sampled cycles per (γ, α) (default 100)")
    args = parser.parse_args()
    if args.cycles < 1:
        parser.error("--cycles must be at least 1")
    report = measure(args.cycles)
    print(json.dumps(report, indent=1) if args.json else render(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
