"""Gas of a transcript-mode job against the same job in per-cycle mode, on a local anvil chain of its own.

For jobs of 8, 32 and 64 tokens at γ = 4 (every cycle accepts 2 of 4 proposals, so it emits 3 tokens; full-width
token ids, q and p as the nodes post them), it runs the job both ways with the same cycles and prints receipt
gasUsed (21000 base + calldata + execution):
  per-cycle   Σ over cycles of commitFirstDraft / commitDraft + submitVerification;
  transcript  TranscriptSettlement.settle: both signatures, every cycle's tokens, q, p and record in calldata.
submitJob / submitTranscriptJob, acceptJob and finalize are the same transactions in both modes and are shown once.
Signed messages come from node/chain/transcript_messages.py, the cycle math from node/protocol.py.

Usage: PYTHONPATH=$PWD python scripts/gas_transcript.py [--json]
"""

from __future__ import annotations

import argparse
import json

from eth_hash.auto import keccak
from web3 import Web3

from node import protocol as P
from node.chain import transcript as TX
from node.chain import transcript_messages as T
from node.chain.anvil import running_anvil
from node.chain.deploy import deploy_system
from node.chain.keys import dev_account
from node.chain.params import WAD

GAMMA, ACCEPT, OUT = 4, 2, 777
LENGTHS = (8, 32, 64)
DRAFT_MODEL, TARGET_MODEL = keccak(b"gas.draft"), keccak(b"gas.target")
VOCAB = 2**24
SALT = 0x5A17_C0FF_EE15_0B0E
SEED = keccak(b"gas.seed")


def _send(w3, fn, sender, value=0):
    receipt = w3.eth.wait_for_transaction_receipt(fn.transact({"from": sender, "value": value}))
    if receipt.status != 1:
        raise RuntimeError(f"{fn.fn_name} failed")
    return receipt


def _cycle(job_id: int, c: int, reveal: bytes) -> tuple[list[int], list[int], list[int]]:
    tokens = [1000 + 3701 * c + 1187 * i for i in range(GAMMA)]
    q = [WAD * (30 + 7 * ((c + i) % 9)) // 100 + 123456789 * (i + 1) for i in range(GAMMA)]
    root = P.draft_root(job_id, c, tokens, q)
    p = [min(WAD, qi + WAD // 7 + 12345) for qi in q[:ACCEPT]]
    p.append(P.accept_uniform(reveal, root, ACCEPT, SALT) * q[ACCEPT] // WAD)
    p += [WAD // 3 + 987654321 * i for i in range(ACCEPT + 1, GAMMA)]
    assert P.count_accepted(reveal, root, q, p, SALT) == ACCEPT
    return tokens, q, p


def measure() -> list[dict]:
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
        for length in LENGTHS:
            req = dict(
                draftModel=DRAFT_MODEL, targetModel=TARGET_MODEL, drafter=drafter, verifier=verifier, gamma=GAMMA,
                temperature=WAD, topK=0, topP=WAD, maxTokens=length, eosToken=2,
                pricePerAcceptedToken=10**12, pricePerPass=3 * 10**12,
            )  # fmt: skip
            escrow = length * (10**12 + 3 * 10**12)
            reveals = P.chain_reveals(SEED, length)
            cycles = -(-length // (ACCEPT + 1))
            # per-cycle mode
            _send(w3, m.submitJob(req, b"\x00\x01"), requester, escrow)
            job = m.jobCount().call()
            _send(w3, m.acceptJob(job, P.hash_chain(SEED, length)), verifier)
            per_cycle = 0
            for c in range(cycles):
                tokens, q, pv = _cycle(job, c, reveals[c])
                root = P.draft_root(job, c, tokens, q)
                commit = (
                    m.commitFirstDraft(job, root, tokens, q, SALT) if c == 0 else m.commitDraft(job, c, root, tokens, q)
                )
                per_cycle += _send(w3, commit, drafter).gasUsed
                per_cycle += _send(w3, m.submitVerification(job, c, tokens, q, pv, reveals[c], OUT), verifier).gasUsed
            # transcript mode
            submit = _send(w3, m.submitTranscriptJob(req, b"\x00\x01"), requester, escrow).gasUsed
            job = m.jobCount().call()
            accept = _send(w3, m.acceptJob(job, P.hash_chain(SEED, length)), verifier).gasUsed
            state, posted = P.transcript_genesis(job, SALT), []
            for c in range(cycles):
                tokens, q, pv = _cycle(job, c, reveals[c])
                cyc = TX.Cycle(tuple(tokens), tuple(q), tuple(pv), ACCEPT, OUT)
                state = P.next_state(state, cyc.record_hash(job, c))
                posted.append(cyc)
            settlement = T.Settlement(job, cycles, state, length)
            call = TX.settle_call(
                ts, settlement, T.sign(domain, settlement, dkey), T.sign(domain, settlement, vkey), SALT,
                reveals[cycles - 1], posted,
            )  # fmt: skip
            settle = _send(w3, call, verifier).gasUsed
            w3.provider.make_request("evm_increaseTime", [p.challenge_window + 1])
            w3.provider.make_request("evm_mine", [])
            finalize = _send(w3, m.finalize(job), requester).gasUsed
            rows.append(
                dict(tokens=length, cycles=cycles, per_cycle=per_cycle, settle=settle, submit=submit,
                     accept=accept, finalize=finalize)
            )  # fmt: skip
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    rows = measure()
    if parser.parse_args().json:
        print(json.dumps(rows, indent=2))
        return 0
    print(f"γ = {GAMMA}, {ACCEPT} of {GAMMA} accepted a cycle (3 tokens); receipt gasUsed")
    print(f"{'tokens':>6} {'cycles':>6} {'per-cycle Σ':>12} {'settle':>9} {'ratio':>6} {'settle/token':>12}"
          f" {'per-cycle/token':>15}")  # fmt: skip
    for r in rows:
        print(
            f"{r['tokens']:>6} {r['cycles']:>6} {r['per_cycle']:>12,} {r['settle']:>9,} "
            f"{r['per_cycle'] / r['settle']:>5.1f}x {r['settle'] / r['tokens']:>12,.0f} "
            f"{r['per_cycle'] / r['tokens']:>15,.0f}"
        )  # fmt: skip
    r = rows[0]
    print(f"same in both modes: submit {r['submit']:,}, acceptJob {r['accept']:,}, finalize {r['finalize']:,}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
