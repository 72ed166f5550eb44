"""Gas of a transcript-mode job against the same job in per-cycle mode, on a local anvil chain of its own.

For jobs of 64, 256 and 1,024 tokens at γ = 4, T = 1, it runs the job both ways with the same cycles and prints
receipt gasUsed (21000 base + calldata + execution, or EIP-7623's calldata floor where that is higher):
  per-cycle   Σ over cycles of commitFirstDraft / commitDraft + submitVerification;
  transcript  TranscriptSettlement.settle: both signatures and every cycle's tokens, q, p, accepted and outToken in
              calldata, in the packed settlement encoding (contracts/lib/PackedCycles.sol), whose bytes the signed
              state chain hashes once a cycle (protocol.cycle_leaf): no draft root or v1 record is built at settle.
submitJob / submitTranscriptJob, acceptJob and finalize are the same transactions in both modes and are shown once.

The cycles are synthesized (the bundled pair's context is 512 positions, so it cannot decode 1,024 tokens): token ids
below the bundled vocabulary (768), never EOS; q uniform in [0.05, 0.95]; p ≥ q for half the proposals and p = v·q
(v uniform) otherwise, so a proposal is accepted with probability 0.75 (the bundled pair's measured α at T = 1 is
0.754, docs/benchmarks.md) and the accept count of each cycle is the v1 rule's own (protocol.count_accepted with the
real reveals and salt, not forced). The signatures are real (node/chain/transcript_messages.py), the cycle math is
node/protocol.py's, and every settled job is finalized.

Usage: PYTHONPATH=$PWD python scripts/gas_transcript.py [--json] [--lengths 64 256 1024]
"""

from __future__ import annotations

import argparse
import json
import random

from eth_hash.auto import keccak
from web3 import Web3

from node import protocol as P
from node.chain import transcript as TX
from node.chain import transcript_messages as T
from node.chain.anvil import running_anvil
from node.chain.deploy import deploy_system
from node.chain.keys import dev_account
from node.chain.params import WAD

GAMMA, EOS = 4, 2
LENGTHS = (64, 256, 1024)
ACCEPT_RATE = 0.75  # per proposal, by construction of p below
DRAFT_MODEL, TARGET_MODEL = keccak(b"gas.draft"), keccak(b"gas.target")
VOCAB = 768  # the bundled pair's tokenizer
SALT = 0x5A17_C0FF_EE15_0B0E
SEED = keccak(b"gas.seed")


def _send(w3, fn, sender, value=0):
    receipt = w3.eth.wait_for_transaction_receipt(fn.transact({"from": sender, "value": value}))
    if receipt.status != 1:
        raise RuntimeError(f"{fn.fn_name} failed")
    return receipt


def _token(rng: random.Random) -> int:
    t = rng.randrange(3, VOCAB)
    return t if t != EOS else t + 1


def _scaled(q: int, rng: random.Random) -> int:
    return q * rng.randrange(WAD) // WAD


def synth_cycles(job_id: int, length: int, reveals: list[bytes], seed: int) -> list[TX.Cycle]:
    """The job's cycles until it has emitted `length` tokens (the last one cut at maxTokens, as v1 cuts it)."""
    rng, cycles, emitted = random.Random(seed), [], 0
    while emitted < length:
        c = len(cycles)
        tokens = [_token(rng) for _ in range(GAMMA)]
        q = [rng.randrange(WAD // 20, WAD * 19 // 20) for _ in range(GAMMA)]
        p = [
            min(WAD, qi + rng.randrange(WAD // 10)) if rng.random() < 0.5 else qi * rng.randrange(WAD) // WAD
            for qi in q
        ]
        accepted = P.count_accepted(reveals[c], P.draft_root(job_id, c, tokens, q), q, p, SALT)
        cycles.append(TX.Cycle(tuple(tokens), tuple(q), tuple(p), accepted, _token(rng)))
        emitted += accepted + 1
    return cycles


def _tokens(calldata: bytes) -> int:
    """EIP-7623's calldata tokens: a zero byte is one, any other byte four."""
    zeros = calldata.count(0)
    return zeros + 4 * (len(calldata) - zeros)


def _floor(calldata: bytes) -> int:
    """EIP-7623's floor: 21000 + 10 per calldata token, what a transaction pays when that exceeds the standard cost."""
    return 21000 + 10 * _tokens(calldata)


def _standard(calldata: bytes) -> int:
    """The standard cost before execution: 21000 + 4 per calldata token (16 a nonzero byte, 4 a zero byte)."""
    return 21000 + 4 * _tokens(calldata)


def measure(lengths=LENGTHS) -> tuple[list[dict], int]:
    rows = []
    with running_anvil() as node:
        w3 = Web3(Web3.HTTPProvider(node.rpc_url, request_kwargs={"timeout": 60}))
        acc = w3.eth.accounts
        deployer, requester, drafter, verifier = acc[0], acc[1], acc[2], acc[3]
        system = deploy_system(w3, deployer)
        m, reg, ts = system.market.functions, system.registry.functions, system.transcript
        p = system.params
        _send(w3, reg.registerDrafter(DRAFT_MODEL, TARGET_MODEL, WAD // 2, VOCAB), drafter, p.min_drafter_stake)
        _send(w3, reg.register(2, [TARGET_MODEL], [VOCAB]), verifier, p.min_verifier_stake)
        domain = T.Domain(w3.eth.chain_id, ts.address)
        dkey, vkey = dev_account(2).key, dev_account(3).key
        for length in lengths:
            req = dict(
                draftModel=DRAFT_MODEL, targetModel=TARGET_MODEL, drafter=drafter, verifier=verifier, gamma=GAMMA,
                temperature=WAD, topK=0, topP=WAD, maxTokens=length, eosToken=EOS,
                pricePerAcceptedToken=10**12, pricePerPass=3 * 10**12,
            )  # fmt: skip
            escrow = length * (10**12 + 3 * 10**12)
            reveals = P.chain_reveals(SEED, length)
            # per-cycle mode (job ids differ, so each mode's cycles are synthesized for its own job id)
            _send(w3, m.submitJob(req, b"\x00\x01"), requester, escrow)
            job = m.jobCount().call()
            _send(w3, m.acceptJob(job, P.hash_chain(SEED, length)), verifier)
            per_cycle = 0
            for c, cyc in enumerate(synth_cycles(job, length, reveals, length)):
                tokens, q = list(cyc.tokens), list(cyc.q)
                root = P.draft_root(job, c, tokens, q)
                commit = (
                    m.commitFirstDraft(job, root, tokens, q, SALT) if c == 0 else m.commitDraft(job, c, root, tokens, q)
                )
                per_cycle += _send(w3, commit, drafter).gasUsed
                verify = m.submitVerification(job, c, tokens, q, list(cyc.p), reveals[c], cyc.out_token)
                per_cycle += _send(w3, verify, verifier).gasUsed
            # transcript mode
            submit = _send(w3, m.submitTranscriptJob(req, b"\x00\x01"), requester, escrow).gasUsed
            job = m.jobCount().call()
            accept = _send(w3, m.acceptJob(job, P.hash_chain(SEED, length)), verifier).gasUsed
            posted = synth_cycles(job, length, reveals, length)
            state = P.state_chain(P.transcript_genesis(job, SALT), TX.cycle_leaves(posted))[-1]
            out = TX.SettledTranscript(job, {}, SALT, reveals[len(posted) - 1], posted).output(EOS, length)
            settlement = T.Settlement(job, len(posted), state, len(out))
            call = TX.settle_call(
                ts, settlement, T.sign(domain, settlement, dkey), T.sign(domain, settlement, vkey), SALT,
                reveals[len(posted) - 1], posted,
            )  # fmt: skip
            receipt = _send(w3, call, verifier)
            calldata = bytes(w3.eth.get_transaction(receipt.transactionHash)["input"])
            accepted = sum(c.accepted for c in posted) / (GAMMA * len(posted))
            w3.provider.make_request("evm_increaseTime", [p.challenge_window + 1])
            w3.provider.make_request("evm_mine", [])
            finalize = _send(w3, m.finalize(job), requester).gasUsed
            rows.append(
                dict(tokens=length, cycles=len(posted), accept_rate=round(accepted, 3), per_cycle=per_cycle,
                     settle=receipt.gasUsed, calldata_bytes=len(calldata), floor=_floor(calldata),
                     standard=_standard(calldata), submit=submit,
                     accept=accept, finalize=finalize)
            )  # fmt: skip
        size = len(w3.eth.get_code(ts.address))
    return rows, size


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--lengths", type=int, nargs="+", default=list(LENGTHS), help="job lengths in tokens")
    args = parser.parse_args()
    rows, size = measure(args.lengths)
    if args.json:
        print(json.dumps({"rows": rows, "transcript_runtime_bytes": size}, indent=2))
        return 0
    print(
        f"γ = {GAMMA}, T = 1; synthesized cycles (real signatures, the v1 accept rule's own counts, 0.75 acceptance a "
        "proposal; 1,024 tokens is past the bundled pair's 512-position context); receipt gasUsed"
    )
    print(
        f"{'tokens':>6} {'cycles':>6} {'α':>5} {'per-cycle Σ':>12} {'settle':>10} {'calldata':>9} {'7623 floor':>10}"
        f" {'execution':>9} {'binds':>9} {'ratio':>6} {'settle/token':>12} {'floor/token':>11} {'per-cycle/token':>15}"
    )
    for r in rows:
        # gasUsed = max(standard + execution, floor): the execution shows only where the floor does not bind
        binds = "floor" if r["settle"] == r["floor"] else "execution"
        spent = r["settle"] - r["standard"] if binds == "execution" else r["floor"] - r["standard"]
        execution = f"{spent:,}" if binds == "execution" else f"≤ {spent:,}"
        per_token = (r["settle"] / r["tokens"], r["floor"] / r["tokens"], r["per_cycle"] / r["tokens"])
        print(
            f"{r['tokens']:>6} {r['cycles']:>6} {r['accept_rate']:>5.3f} {r['per_cycle']:>12,} {r['settle']:>10,} "
            f"{r['calldata_bytes']:>9,} {r['floor']:>10,} {execution:>9} {binds:>9} "
            f"{r['per_cycle'] / r['settle']:>5.1f}x {per_token[0]:>12,.0f} {per_token[1]:>11,.0f} "
            f"{per_token[2]:>15,.0f}"
        )
    print(
        "calldata: the settle transaction's bytes; 7623 floor: what EIP-7623's calldata floor alone charges (21000 + 10"
        " a token: 4 a nonzero byte, 1 a zero byte); execution: gasUsed − (21000 + 4 a token), the EVM's work; binds:"
        " which bound gasUsed is (the larger of standard + execution and the floor)"
    )
    r = rows[0]
    print(f"same in both modes: submit {r['submit']:,}, acceptJob {r['accept']:,}, finalize {r['finalize']:,}")
    print(f"TranscriptSettlement runtime: {size:,} bytes (EIP-170 limit 24,576)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
