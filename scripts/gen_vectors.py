"""Generate the shared protocol-math vectors in tests/vectors/specmath.json from node/protocol.py.

The contract tests replay every vector against the deployed SpecMath (through SpecMathHarness),
so the Python and Solidity implementations cannot drift apart silently. tests/vectors/transcript.json holds
transcript mode's (docs/protocol.md, "Transcript mode (v2)"): the state chain, the records root, and the
EIP-712 struct hashes, digests and signatures of every message type (eth-account's), replayed against
TranscriptTypesHarness by tests/test_transcript_messages.py.
Usage: python scripts/gen_vectors.py [--check]   (--check: fail if the committed file is stale)
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

from eth_account import Account
from eth_hash.auto import keccak

from node import protocol as P
from node.chain import transcript_messages as T

OUT = Path(__file__).resolve().parents[1] / "tests" / "vectors" / "specmath.json"
TRANSCRIPT_OUT = OUT.with_name("transcript.json")
SEED = 20261129
# the key that signs the message vectors: derived from a public string, it guards nothing
VECTOR_KEY = keccak(b"verispec.vectors.signer")


def _hex(b: bytes) -> str:
    return "0x" + b.hex()


def _rand_hash(rng: random.Random) -> bytes:
    return keccak(rng.getrandbits(256).to_bytes(32, "big"))


def _rand_salt(rng: random.Random) -> int:
    """A drafter salt (uint64), the extremes included now and then."""
    pick = rng.random()
    return 0 if pick < 0.1 else P.UINT64_MAX if pick < 0.2 else rng.getrandbits(64)


def _prob_pair(rng: random.Random, case: str) -> tuple[int, int]:
    """(q, p) for one proposal, shaped by the case the vector is meant to cover."""
    q = rng.randint(1, P.WAD)
    if case == "p>=q":
        return q, rng.randint(q, P.WAD)
    if case == "p<q":
        return q, rng.randint(0, q - 1)
    if case == "p=0":
        return q, 0
    if case == "q~WAD":
        return P.WAD - rng.randint(0, 10**6), rng.randint(0, P.WAD)
    # mixed: near-equal values make the uniform decide
    p = max(0, min(P.WAD, q + rng.randint(-q // 3, q // 3)))
    return q, p


def build(rng: random.Random) -> dict:
    vectors: dict[str, list] = {
        k: []
        for k in (
            "leaf",
            "uniform",
            "draftUniform",
            "acceptUniform",
            "residualUniform",
            "root",
            "rootReverts",
            "countAccepted",
            "countAcceptedReverts",
            "cycleRecord",
            "chainHash",
            "quantize",
            "invcdf",
            "residualSample",
        )
    }

    for _ in range(24):
        job, cycle, index = rng.getrandbits(256), rng.getrandbits(32), rng.getrandbits(32)
        token, q = rng.getrandbits(32), rng.randint(0, P.UINT64_MAX)
        vectors["leaf"].append(
            {
                "jobId": job,
                "cycle": cycle,
                "index": index,
                "token": token,
                "qWad": q,
                "expected": _hex(P.leaf(job, cycle, index, token, q)),
            }
        )
        h = _rand_hash(rng)
        vectors["uniform"].append({"h": _hex(h), "expected": P.uniform(h)})
        vectors["draftUniform"].append(
            {"jobId": job, "cycle": cycle, "index": index, "expected": P.draft_uniform(job, cycle, index)}
        )
        reveal, root, salt = _rand_hash(rng), _rand_hash(rng), _rand_salt(rng)
        vectors["acceptUniform"].append(
            {
                "reveal": _hex(reveal),
                "draftRoot": _hex(root),
                "index": index,
                "salt": salt,
                "expected": P.accept_uniform(reveal, root, index, salt),
            }
        )
        vectors["residualUniform"].append(
            {
                "reveal": _hex(reveal),
                "draftRoot": _hex(root),
                "salt": salt,
                "expected": P.residual_uniform(reveal, root, salt),
            }
        )
    for extreme in (b"\x00" * 32, b"\xff" * 32):
        vectors["uniform"].append({"h": _hex(extreme), "expected": P.uniform(extreme)})

    for width in list(range(1, 17)) + [31, 32, 33]:
        job, cycle = rng.getrandbits(64), rng.getrandbits(16)
        drafts = [(rng.getrandbits(16), rng.randint(1, P.WAD)) for _ in range(width)]
        tokens, q = [t for t, _ in drafts], [x for _, x in drafts]
        leaves = [P.leaf(job, cycle, i, t, x) for i, (t, x) in enumerate(drafts)]
        tree_root = P.root(leaves)
        assert tree_root == P.draft_root(job, cycle, tokens, q)
        # the draft (jobId, cycle, tokens, q) lets the calldata door (draftRootCalldata) replay the vector too
        vectors["root"].append(
            {
                "jobId": job,
                "cycle": cycle,
                "tokens": tokens,
                "q": q,
                "leaves": [_hex(x) for x in leaves],
                "expected": _hex(tree_root),
                "proofs": [[_hex(s) for s in P.proof(leaves, i)] for i in range(width)],
            }
        )

    cases = ("p>=q", "p<q", "p=0", "q~WAD", "mixed")
    for k in range(1, 17):
        for case in cases:
            for _ in range(2):
                pairs = [_prob_pair(rng, case if i % 2 == 0 else "mixed") for i in range(k)]
                q, p = [a for a, _ in pairs], [b for _, b in pairs]
                reveal, root, salt = _rand_hash(rng), _rand_hash(rng), _rand_salt(rng)
                vectors["countAccepted"].append(
                    {
                        "case": case,
                        "reveal": _hex(reveal),
                        "draftRoot": _hex(root),
                        "q": q,
                        "p": p,
                        "salt": salt,
                        "expected": P.count_accepted(reveal, root, q, p, salt),
                    }
                )
    reveal, root = _rand_hash(rng), _rand_hash(rng)
    for name, q, p in (
        ("SpecMathLengthMismatch", [P.WAD // 2] * 3, [P.WAD // 2] * 2),
        ("SpecMathZeroDraftProbability", [P.WAD // 2, 0], [1, 1]),
        ("SpecMathProbabilityAboveWad", [P.WAD + 1], [0]),
        ("SpecMathProbabilityAboveWad", [1], [P.WAD + 1]),
    ):
        vectors["countAcceptedReverts"].append(
            {"reveal": _hex(reveal), "draftRoot": _hex(root), "q": q, "p": p, "salt": 7, "error": name}
        )

    for k in (1, 4, 16):
        root = _rand_hash(rng)
        p = [rng.randint(0, P.WAD) for _ in range(k)]
        accepted, out = rng.randint(0, k), rng.getrandbits(32)
        vectors["cycleRecord"].append(
            {
                "draftRoot": _hex(root),
                "p": p,
                "accepted": accepted,
                "outToken": out,
                "expected": _hex(P.cycle_record_hash(root, p, accepted, out)),
            }
        )

    # Drafts the root rejects (Python raises ValueError): no proposals, and tokens / q of different lengths.
    for tokens, q, error in (([], [], "SpecMathEmptyTree"), ([5, 6], [P.WAD], "SpecMathLengthMismatch")):
        vectors["rootReverts"].append({"jobId": 7, "cycle": 0, "tokens": tokens, "q": q, "error": error})

    # Python-only primitives, for independent implementations to check against.
    for vocab in (2, 5, 17):
        raw = [rng.random() for _ in range(vocab)]
        probs = [x / sum(raw) for x in raw]
        w = P.quantize(probs)
        vectors["quantize"].append({"probs": probs, "expected": w})
        u = rng.randrange(P.WAD)
        vectors["invcdf"].append({"w": w, "u": u, "expected": P.invcdf(w, u)})
        other = P.quantize([x / sum(raw[::-1]) for x in raw[::-1]])
        if other != w:
            vectors["residualSample"].append({"p": w, "q": other, "u": u, "expected": P.residual_sample(w, other, u)})

    # The verifier's hash-chain link H (SpecMath.chainHash): a reveal's hash is the previous reveal.
    for value in [rng.getrandbits(256).to_bytes(32, "big") for _ in range(6)] + [b"\x00" * 32, b"\xff" * 32]:
        vectors["chainHash"].append({"value": _hex(value), "expected": _hex(P.hash_chain(value, 1))})
    return vectors


def _json(value):
    """A message value as JSON: bytes32 as 0x-hex, tuples as lists."""
    return _hex(value) if isinstance(value, bytes) else list(value) if isinstance(value, tuple) else value


def _random_p(rng: random.Random, gamma: int) -> tuple[list[int], int, int]:
    """A Verification's (p, accepted, outToken), the extremes included."""
    p = [rng.choice((0, P.WAD, rng.randint(0, P.WAD))) for _ in range(gamma)]
    return p, rng.randint(0, gamma), rng.choice((0, P.UINT32_MAX, rng.getrandbits(32)))


def _random_cycle(rng: random.Random, gamma: int) -> tuple[list[int], list[int], list[int], int, int]:
    """One cycle's (tokens, q, p, accepted, outToken), the extremes included."""
    tokens = [rng.choice((0, P.UINT32_MAX, rng.getrandbits(16))) for _ in range(gamma)]
    q = [rng.choice((1, P.WAD, rng.randint(1, P.WAD))) for _ in range(gamma)]
    return (tokens, q, *_random_p(rng, gamma))


def _messages(rng: random.Random) -> list:
    """Messages of every type, the extremes of every field included."""
    extremes_job, extremes_cycle = (0, 1, 2**256 - 1), (0, 1, P.UINT32_MAX)
    out: list = []
    for i in range(8):
        job = extremes_job[i] if i < 3 else rng.getrandbits(256)
        cycle = extremes_cycle[i] if i < 3 else rng.getrandbits(32)
        gamma = (1, P.MAX_GAMMA, 4)[i] if i < 3 else rng.randint(1, P.MAX_GAMMA)
        tokens = [rng.choice((0, P.UINT32_MAX, rng.getrandbits(16))) for _ in range(gamma)]
        q = [rng.choice((1, P.WAD, rng.randint(1, P.WAD))) for _ in range(gamma)]
        salt = (0, P.UINT64_MAX, 7)[i] if i < 3 else rng.getrandbits(64)
        prev = P.transcript_genesis(job, salt) if cycle == 0 else _rand_hash(rng)
        draft = T.Draft.build(job, cycle, prev, tokens, q, salt)
        p, accepted, out_token = _random_p(rng, gamma)
        out.append(draft)
        out.append(T.Verification.build(draft, p, _rand_hash(rng), accepted, out_token))
        out.append(T.Settlement(job, rng.choice((0, cycle)), _rand_hash(rng), rng.getrandbits(32)))
    return out


def build_transcript(rng: random.Random) -> dict:
    vectors: dict = {
        "typeStrings": {cls.PRIMARY: cls.type_string() for cls in T.MESSAGE_TYPES.values()},
        "genesis": [],
        "cycleLeaf": [],
        "stateChain": [],
        "messages": [],
    }
    for job, salt in [(0, 0), (2**256 - 1, P.UINT64_MAX)] + [(rng.getrandbits(256), _rand_salt(rng)) for _ in range(6)]:
        vectors["genesis"].append({"jobId": job, "salt": salt, "expected": _hex(P.transcript_genesis(job, salt))})
    for cycle in (0, 1, P.UINT32_MAX, rng.getrandbits(32)):
        gamma = rng.randint(1, P.MAX_GAMMA)
        packed = P.pack_cycle(*_random_cycle(rng, gamma))
        vectors["cycleLeaf"].append(
            {"cycle": cycle, "gamma": gamma, "packed": _hex(packed), "expected": _hex(P.cycle_leaf(cycle, packed))}
        )
    for length in (1, 2, 3, 5, 8, 13):
        job, salt, gamma = rng.getrandbits(64), _rand_salt(rng), rng.randint(1, P.MAX_GAMMA)
        genesis = P.transcript_genesis(job, salt)
        cycles = [_random_cycle(rng, gamma) for _ in range(length)]
        packed = [P.pack_cycle(*c) for c in cycles]
        leaves = [P.cycle_leaf(c, x) for c, x in enumerate(packed)]
        vectors["stateChain"].append(
            {
                "jobId": job,
                "salt": salt,
                "gamma": gamma,
                "genesis": _hex(genesis),
                "cycles": [dict(zip(("tokens", "q", "p", "accepted", "outToken"), c)) for c in cycles],
                "run": _hex(bytes([gamma]) + b"".join(packed)),
                "leaves": [_hex(x) for x in leaves],
                "states": [_hex(s) for s in P.state_chain(genesis, leaves)],
                "root": _hex(P.cycles_root(leaves)),
                "proofs": [[_hex(x) for x in P.cycle_proof(leaves, c)] for c in range(length)],
            }
        )
    signer = Account.from_key(VECTOR_KEY)
    domains = [
        T.Domain(31337, "0x" + "5f" * 20),
        T.Domain(1, "0x" + "00" * 19 + "01"),
        T.Domain(2**256 - 1, "0x" + "ff" * 20),
    ]
    for k, msg in enumerate(_messages(rng)):
        domain = domains[(k // len(T.MESSAGE_TYPES)) % len(domains)]  # every type under every domain
        vectors["messages"].append(
            {
                "type": msg.PRIMARY,
                "domain": domain.as_dict(),
                "message": {name: _json(value) for name, value in msg.message().items()},
                "structHash": _hex(T.struct_hash(domain, msg)),
                "domainSeparator": _hex(bytes(T.signable(domain, msg).header)),
                "digest": _hex(T.digest(domain, msg)),
                "signer": signer.address,
                "signature": _hex(T.sign(domain, msg, VECTOR_KEY)),
            }
        )
    return vectors


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if the committed vectors are stale")
    args = parser.parse_args()
    # the transcript vectors draw from their own generator, so adding them left specmath.json unchanged
    files = {
        OUT: json.dumps(build(random.Random(SEED)), indent=1) + "\n",
        TRANSCRIPT_OUT: json.dumps(build_transcript(random.Random(SEED + 1)), indent=1) + "\n",
    }
    if args.check:
        stale = [path for path, text in files.items() if not path.exists() or path.read_text() != text]
        for path in stale:
            print(f"{path} is stale: run python scripts/gen_vectors.py", file=sys.stderr)
        if not stale:
            print("the vectors are up to date")
        return 1 if stale else 0
    OUT.parent.mkdir(parents=True, exist_ok=True)
    for path, text in files.items():
        path.write_text(text)
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
