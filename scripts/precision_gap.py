"""How far a replay on other hardware or in another dtype lands from an fp32 CPU replay, in WAD probability.

    .venv/bin/python scripts/precision_gap.py            # the real pair (smol), CPU: fp32 and bf16 against fp32
    .venv/bin/python scripts/precision_gap.py --pair tiny          # the bundled tiny pair
    python scripts/precision_gap.py --json               # on a GPU machine the cuda rows are added

A referee or watchdog replays a position and calls a claim faithful when it is
within the tolerance (scorer.default_tolerance_wad: 1e-4 WAD for fp32) of its
own replay. This measures, for both models of the pair, the largest gap over
every vocabulary entry and at the sampled token, at every position of real
generations, between each (device, dtype, replay order) and one fp32 forward
on CPU — the numbers that decide which precisions may commit values
(node/jobs/models.py: float32 only).
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys

import numpy as np
import torch

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from node import protocol  # noqa: E402
from node.decoding import SpeculativeDecoder  # noqa: E402
from node.decoding.distributions import SamplingParams, quantized  # noqa: E402
from node.decoding.kv import CachedLM  # noqa: E402
from node.decoding.loading import load_model, load_tokenizer  # noqa: E402
from node.decoding.pairs import PAIRS, PairError, get_pair  # noqa: E402
from node.decoding.scorer import default_tolerance_wad  # noqa: E402

PROMPTS = ["def __init__(self, ", "import os\nimport sys\n", "class Buffer:\n    "]


def wad_rows(model, ids: list[int], stepwise: bool = False) -> np.ndarray:
    """WAD rows at every position of `ids`: one forward over all of them, or (stepwise) one token at a time
    through a KV cache, as a decoding node computes them (another reduction order, same hardware)."""
    with torch.inference_mode():
        if not stepwise:
            logits = model(torch.tensor([ids], device=model.device)).logits[0]
        else:
            lm = CachedLM(model)
            logits = torch.cat([lm.extend(ids[:1])] + [lm.extend([t]) for t in ids[1:]])
    return quantized(logits, SamplingParams())


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pair", choices=list(PAIRS), default=None, help="a named pair (default: smol, the real one)")
    parser.add_argument("--target", default=None, help="a target checkpoint (overrides the pair's)")
    parser.add_argument("--draft", default=None, help="a draft checkpoint (overrides the pair's)")
    parser.add_argument("--tokens", type=int, default=200, help="generated tokens per prompt")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    args = parser.parse_args()
    try:
        pair = get_pair(args.pair, check=not (args.target and args.draft))
    except PairError as exc:
        parser.error(str(exc))
    args.target, args.draft = args.target or str(pair.target), args.draft or str(pair.draft)
    torch.set_num_threads(1)
    paths = {"target": args.target, "draft": args.draft}
    cpu = torch.device("cpu")
    reference = {name: load_model(path, cpu, torch.float32) for name, path in paths.items()}
    tokenizer = load_tokenizer(args.target)
    engine = SpeculativeDecoder(reference["target"], reference["draft"], gamma=4)
    texts = [tokenizer(p)["input_ids"] for p in PROMPTS]
    sequences = [
        ids + engine.generate(ids, args.tokens, job_id=i, verifier_seed=bytes(32)).tokens for i, ids in enumerate(texts)
    ]
    expected = {name: [wad_rows(model, ids) for ids in sequences] for name, model in reference.items()}

    variants = [(cpu, torch.float32, True), (cpu, torch.bfloat16, False)]  # (device, dtype, stepwise)
    if torch.cuda.is_available():
        cuda = torch.device("cuda")
        variants += [(cuda, torch.float32, False), (cuda, torch.float32, True), (cuda, torch.bfloat16, False)]
    rows = []
    for device, dtype, stepwise in variants:
        for name, path in paths.items():
            model = reference[name] if (device, dtype) == (cpu, torch.float32) else load_model(path, device, dtype)
            vocab_gap = token_gap = 0
            for ids, want in zip(sequences, expected[name]):
                gap = np.abs(wad_rows(model, ids, stepwise) - want)
                vocab_gap = max(vocab_gap, int(gap.max()))
                token_gap = max(token_gap, int(gap[np.arange(len(ids) - 1), ids[1:]].max()))
            rows.append(
                dict(
                    model=name,
                    device=device.type,
                    dtype=str(dtype).replace("torch.", ""),
                    replay="token by token" if stepwise else "one forward",
                    positions=sum(len(s) for s in sequences),
                    max_gap=vocab_gap / protocol.WAD,
                    max_gap_at_token=token_gap / protocol.WAD,
                    within_fp32_tolerance=vocab_gap <= default_tolerance_wad(torch.float32),
                )
            )
    if args.json:
        print(json.dumps(dict(fp32_tolerance=default_tolerance_wad(torch.float32) / protocol.WAD, rows=rows), indent=1))
        return
    print(
        f"gap to an fp32 CPU replay of {args.target} and {args.draft}, {len(sequences)} generations of {args.tokens} "
        "tokens; "
        f"fp32 tolerance {default_tolerance_wad(torch.float32) / protocol.WAD:.0e}"
    )
    print("| model | device | dtype | replay | max gap (any token) | max gap (sampled token) | within fp32 tolerance |")
    print("|---|---|---|---|---:|---:|---|")
    for r in rows:
        print(
            f"| {r['model']} | {r['device']} | {r['dtype']} | {r['replay']} | {r['max_gap']:.1e} "
            f"| {r['max_gap_at_token']:.1e} "
            f"| {'yes' if r['within_fp32_tolerance'] else 'no'} |"
        )


if __name__ == "__main__":
    main()
