"""Where a cycle's wall time goes, from the nodes' probes (node.bench.probes): per node, milliseconds by exclusive
category per cycle and per own turn; per cycle, the four legs of the critical path."""

from __future__ import annotations

from collections import defaultdict


def clip_sum(intervals, lo: float, hi: float) -> dict[str, float]:
    out: dict[str, float] = defaultdict(float)
    for start, end, cat in intervals:
        s, e = max(start, lo), min(end, hi)
        if e > s:
            out[cat] += e - s
    return out


def exclusive(probe: dict, windows: list[tuple[float, float]]) -> tuple[dict[str, float], dict[str, float], float]:
    """Seconds by exclusive category inside `windows`: (parts, rpc by method, total wall)."""
    totals: dict[str, float] = defaultdict(float)
    wall = 0.0
    for lo, hi in windows:
        wall += hi - lo
        for cat, t in clip_sum(probe["intervals"], lo, hi).items():
            totals[cat] += t
    rpc = {c[4:]: t for c, t in totals.items() if c.startswith("rpc:")}
    web3 = sum(t for c, t in totals.items() if c.startswith("web3:"))
    store_w = sum(t for c, t in totals.items() if c.startswith("store-write:"))
    parts = {
        "engine": totals["engine"],
        "rpc round trips": sum(rpc.values()),
        "web3 python": max(0.0, web3 - sum(rpc.values())),
        "sign": totals["sign"],
        "store writes": store_w,
        "store reads": totals["store-read"],
        "idle wait": totals["idle"],
    }
    parts["other python"] = max(0.0, wall - sum(parts.values()))
    return parts, rpc, wall


def count_in(probe: dict, windows, prefix: str) -> dict[str, int]:
    out: dict[str, int] = defaultdict(int)
    for start, _, cat in probe["intervals"]:
        if cat.startswith(prefix) and any(lo <= start < hi for lo, hi in windows):
            out[cat[len(prefix) :]] += 1
    return out


def node_breakdown(
    probe: dict, windows: list[tuple[float, float]], cycles: int, turns: list[tuple[float, float]]
) -> dict:
    """ms per cycle by exclusive category over the jobs' windows, and ms per turn over the node's own turns
    (from noticing the other party's transaction to having sent its own: its share of the critical path)."""
    parts, rpc, _ = exclusive(probe, windows)
    tparts, trpc, _ = exclusive(probe, turns)
    per = lambda t: 1e3 * t / cycles  # noqa: E731
    per_turn = lambda t: 1e3 * t / max(1, len(turns))  # noqa: E731
    return {
        "ms_per_cycle": {k: per(v) for k, v in parts.items()},
        "rpc_ms_per_cycle": {k: per(v) for k, v in sorted(rpc.items(), key=lambda kv: -kv[1])},
        "rpc_calls_per_cycle": {k: v / cycles for k, v in count_in(probe, windows, "rpc:").items()},
        "store_writes_per_cycle": {k: v / cycles for k, v in count_in(probe, windows, "store-write:").items()},
        "turns": len(turns),
        "ms_per_turn": {k: per_turn(v) for k, v in tparts.items()},
        "rpc_ms_per_turn": {k: per_turn(v) for k, v in sorted(trpc.items(), key=lambda kv: -kv[1])},
        "rpc_calls_per_turn": {k: v / max(1, len(turns)) for k, v in count_in(probe, turns, "rpc:").items()},
        "store_writes_per_turn": {k: v / max(1, len(turns)) for k, v in count_in(probe, turns, "store-write:").items()},
    }


def cycle_legs(drafter: dict, verifier: dict, job_id: int, n_cycles: int, t0: float):
    """Per cycle: the four legs of the critical path, in ms, from the nodes' marks; and each node's turns
    (noticed the other's transaction -> sent its own) as (start, end) windows."""

    def sent(probe, suffix):
        return {
            m[2][0]: m[0]
            for m in probe["marks"]
            if m[1] == "sent" and m[2][0].startswith(f"job:{job_id}:") and m[2][0].endswith(suffix)
        }

    def seen(probe, name):
        out = {}
        for t, kind, detail in probe["marks"]:
            if kind == "event" and detail[0] == name and detail[1] == job_id:
                out.setdefault(detail[2], t)
        return out

    commits, verifies = sent(drafter, ":commit"), sent(verifier, ":verify")
    v_saw, d_saw = seen(verifier, "DraftCommitted"), seen(drafter, "CycleVerified")
    accept = sent(verifier, ":accept").get(f"job:{job_id}:accept")
    legs = defaultdict(list)
    turns = {"drafter": [], "verifier": []}
    for c in range(n_cycles):
        commit = commits.get(f"job:{job_id}:cycle:{c}:commit")
        verify = verifies.get(f"job:{job_id}:cycle:{c}:verify")
        if None in (commit, verify) or c not in v_saw:
            continue
        legs["verifier notices the draft"].append(1e3 * (v_saw[c] - commit))
        legs["verifier's turn (verify + send)"].append(1e3 * (verify - v_saw[c]))
        turns["verifier"].append((v_saw[c], verify))
        nxt = commits.get(f"job:{job_id}:cycle:{c + 1}:commit")
        if c in d_saw and nxt is not None:
            legs["drafter notices the verification"].append(1e3 * (d_saw[c] - verify))
            legs["drafter's turn (draft + send)"].append(1e3 * (nxt - d_saw[c]))
            turns["drafter"].append((d_saw[c], nxt))
    first = commits.get(f"job:{job_id}:cycle:0:commit")
    if accept is not None and first is not None:
        legs["start: submit -> accept sent"].append(1e3 * (accept - t0))
        legs["start: accept -> first commit sent"].append(1e3 * (first - accept))
    return dict(legs), turns
