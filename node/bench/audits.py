"""The watchdog benchmark's audits (scripts/bench_watchdog.py): one job's binding positions by kind (draft, target),
which of them a dispute would win, their inclusion probabilities under each weighting (node/audit_sampling.py) and
the watchdog's private draws over many audit seeds; exact and empirical P(caught) and the forwards an audit costs."""

from __future__ import annotations

import math

import numpy as np

from node import audit_sampling as A

GAMMA = 4  # proposals per cycle (the CLI's default); index γ is the outToken
KINDS = ("draft", "target")


def audit_seed(s: int, kind: str) -> bytes:
    from eth_hash.auto import keccak

    return keccak(f"verispec.bench-watchdog.audit:{kind}:{s}".encode())  # one private seed per kind of position


class JobAudit:
    """One job's positions by kind, their faults, weights and (per seed) the watchdog's private draws."""

    def __init__(self, job_id: int, record: dict, seeds: int):
        self.job_id, self.record = job_id, record
        self.pos = {kind: [p for p in record["positions"] if p["kind"] == kind] for kind in KINDS}
        self.faulty = {kind: np.array([p["faulty"] for p in self.pos[kind]], dtype=bool) for kind in KINDS}
        self.cycle = {kind: np.array([p["cycle"] for p in self.pos[kind]], dtype=int) for kind in KINDS}
        self.positions = {
            kind: [
                A.Position(p["cycle"], p["index"], p["q_entropy"], p["ratio"], p["uniform"], p["index"] == GAMMA)
                for p in self.pos[kind]
            ]
            for kind in KINDS
        }
        self.draws = {
            kind: np.array(
                [[A.draw_uniform(audit_seed(s, kind), job_id, p.cycle, p.index) for p in self.positions[kind]]
                 for s in range(seeds)]
            ).reshape(seeds, len(self.positions[kind]))
            for kind in KINDS
        }  # fmt: skip

    def pi(self, kind: str, rate: float, weighting: str) -> np.ndarray:
        weights = [A.weight(p, weighting) for p in self.positions[kind]]
        return np.array(A.inclusion_probabilities(weights, rate))

    def check_select(self, kind: str, rate: float, weighting: str) -> None:
        """The benchmark's vectorised draw is the module's own: seed 0's selection equals `select`."""
        picked = {
            (p.cycle, p.index)
            for p in A.select(self.positions[kind], rate, weighting, audit_seed(0, kind), self.job_id)
        }
        mine = self.draws[kind][0] < self.pi(kind, rate, weighting)
        assert picked == {(p.cycle, p.index) for p, m in zip(self.positions[kind], mine) if m}, (
            "draw differs from select"
        )

    def exact(self, rates: dict, weighting: str) -> float:
        """P(caught), each kind audited at rates[kind]: one minus the product of every faulty position's miss."""
        miss = 1.0
        for kind in KINDS:
            miss *= 1.0 - A.detection_probability(self.pi(kind, rates[kind], weighting)[self.faulty[kind]].tolist())
        return 1.0 - miss

    def evaluate(self, rates: dict, weighting: str) -> dict:
        """Exact and empirical P(caught) and forwards (cycles with an audited position), each kind at rates[kind]."""
        caught, forwards = np.zeros(self.draws["draft"].shape[0], dtype=bool), {}
        for kind in KINDS:
            pi = self.pi(kind, rates[kind], weighting)
            chosen = self.draws[kind] < pi
            caught |= (chosen & self.faulty[kind]).any(axis=1)
            by_cycle = [self.cycle[kind] == c for c in np.unique(self.cycle[kind])]
            forwards[kind] = sum(1.0 - float(np.prod(1.0 - pi[m])) for m in by_cycle)
            forwards[kind + "_empirical"] = float(sum(chosen[:, m].any(axis=1).mean() for m in by_cycle))
        return dict(exact=self.exact(rates, weighting), empirical=float(caught.mean()), forwards=forwards)


def summarize(audits: list[JobAudit], rates: dict, weighting: str) -> dict:
    results = [a.evaluate(rates, weighting) for a in audits]
    p = np.array([r["exact"] for r in results])
    seeds = audits[0].draws["draft"].shape[0]
    stderr = math.sqrt(float(np.sum(p * (1 - p))) * seeds) / (len(p) * seeds)
    return dict(
        exact=float(p.mean()),
        empirical=float(np.mean([r["empirical"] for r in results])),
        stderr=stderr,
        target_forwards=float(np.mean([r["forwards"]["target"] for r in results])),
        target_forwards_empirical=float(np.mean([r["forwards"]["target_empirical"] for r in results])),
        draft_forwards=float(np.mean([r["forwards"]["draft"] for r in results])),
        cycles=float(np.mean([a.record["cycles"] for a in audits])),
        per_job=p.tolist(),
    )


def fault_stats(audits: list[JobAudit]) -> dict:
    counts = {kind: [int(a.faulty[kind].sum()) for a in audits] for kind in KINDS}
    return dict(
        jobs=len(audits),
        jobs_with_fault=sum(1 for a in audits if any(a.faulty[k].any() for k in KINDS)),
        faulty_draft_positions=float(np.mean(counts["draft"])),
        faulty_target_positions=float(np.mean(counts["target"])),
        draft_positions=float(np.mean([len(a.pos["draft"]) for a in audits])),
        target_positions=float(np.mean([len(a.pos["target"]) for a in audits])),
        cycles=float(np.mean([a.record["cycles"] for a in audits])),
        rejection_rate=sum(a.record["rejected"] for a in audits) / max(1, sum(a.record["tested"] for a in audits)),
        reasons=sorted({p["reason"].split(" ")[0] for a in audits for p in a.record["positions"] if p["faulty"]}),
    )
