"""Time the target's LM head as transformers computes it against the engine's own layout, side by side.

    PYTHONPATH=$PWD .venv/bin/python scripts/bench_head.py [--pair smol] [--threads 1] [--repeats 9]

A verifier's pass feeds γ + 1 positions and needs the logits of all of them. transformers computes them as
hidden @ headᵀ; CachedLM(model, engine_head=True) (node/decoding/kv.py; off for nodes) computes
head @ hiddenᵀ on the CPU from 2 rows on, which MKL does far
faster for a vocabulary-wide head. For each row count the table gives the head alone in both layouts and the whole
cached forward (context of 100 tokens, then `rows` fed tokens) through CachedLM with and without the engine's head,
interleaved so that machine load hits both alike; medians in milliseconds.
"""

from __future__ import annotations

import argparse
import pathlib
import statistics
import sys
import time

import torch

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from node.decoding.kv import CachedLM  # noqa: E402
from node.decoding.loading import load_model  # noqa: E402
from node.decoding.pairs import PAIRS, get_pair  # noqa: E402

CONTEXT = list(range(1000, 1100))


def median_ms(fn, repeats: int) -> float:
    fn()  # warm
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def cached_forward(lm: CachedLM, rows: int):
    def run():
        lm.extend(list(range(2000, 2000 + rows)), keep=rows)
        lm.crop(len(CONTEXT))

    return run


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pair", choices=sorted(PAIRS), default="smol")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--rows", default="1,2,3,5,9", help="row counts (γ + 1), comma-separated")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    model = load_model(get_pair(args.pair).target, torch.device("cpu"), torch.float32)
    head = model.get_output_embeddings().weight
    print(f"{args.pair} target, head {tuple(head.shape)}, {args.threads} thread(s), medians of {args.repeats}\n")
    print(
        "| rows | head: hidden @ headᵀ ms | head: head @ hiddenᵀ ms | ratio | forward, transformers' head ms "
        "| forward, engine's head ms | ratio |"
    )
    print("|---|---|---|---|---|---|---|")
    with torch.inference_mode():
        theirs, ours = CachedLM(model), CachedLM(model, engine_head=True)
        theirs.extend(CONTEXT), ours.extend(CONTEXT)
        for rows in (int(r) for r in args.rows.split(",")):
            hidden = torch.randn(rows, head.shape[1])
            head_t = median_ms(lambda h=hidden: torch.nn.functional.linear(h, head), args.repeats)
            head_e = median_ms(lambda h=hidden: torch.mm(head, h.t()), args.repeats)
            forward_t = forward_e = 0.0
            for _ in range(2):  # alternate the two, twice, so that a change in load hits both
                forward_t += median_ms(cached_forward(theirs, rows), args.repeats) / 2
                forward_e += median_ms(cached_forward(ours, rows), args.repeats) / 2
            print(
                f"| {rows} | {head_t:.1f} | {head_e:.1f} | {head_t / head_e:.2f} | {forward_t:.1f} | "
                f"{forward_e:.1f} | {forward_t / forward_e:.2f} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
