"""Load benchmark: many concurrent jobs on one anvil, served by several drafters, verifiers and referees.

    PYTHONPATH=$PWD .venv/bin/python scripts/bench_load.py --pair tiny --jobs 20 --tokens 32   # transcript mode
    PYTHONPATH=$PWD .venv/bin/python scripts/bench_load.py --pair tiny --jobs 20 --mode onchain
    PYTHONPATH=$PWD .venv/bin/python scripts/bench_load.py --pair tiny --jobs 20 --mode both   # one after the other
    PYTHONPATH=$PWD .venv/bin/python scripts/bench_load.py --pair tiny --jobs 20 --block-time 1 --json

One fresh anvil (node.chain.anvil.running_anvil: deployed and registered with instant mining, then `--block-time`
b s between blocks when b > 0), `--drafters` (3) drafters (dev accounts 2, 3, 4), `--verifiers` (3) verifiers (5,
6, 7; each with its transcript link on loopback, `serve verifier --listen`) and `--referees` (5) referees (8...12),
every one a real `verispec serve` OS process (node.processes: its own interpreter, torch, models, store and RPC
connection, `--threads 1`). A requester in this process (dev account 1) then runs two phases on the same nodes (for
`--mode both`: the transcript mode's two, then the per-cycle mode's):

  * alone: one job, nothing else running;
  * concurrent: `--jobs` (20) jobs submitted at once (all transactions sent before any receipt is read), job k
    served by drafter k mod D and verifier (k + k div D) mod V, so that every drafter meets every verifier.

Each job runs to the end of its life: decoding, its settlement (transcript) or last cycle (per cycle), the
challenge window passed (evm_increaseTime) and its finalization by the nodes. The requester sees a job's progress
as a user would: in transcript mode (the default) through each verifier's token stream (node.link.requester,
node.bench.transcript.follow_streams), in per-cycle mode (`--mode onchain`) as `CycleVerified` logs arriving
(eth_getLogs every 50 ms). One table, both phases side by side:

  jobs/min (jobs ÷ the phase's wall time, first submit sent -> last token), tokens/s in total (all tokens ÷ that
  wall time) and per job (a job's tokens ÷ its submit sent -> its last token; p50 and min), cycle latency p50 /
  p99 (the gap between two consecutive cycles of a job as the requester sees them), TTFT p50 (submit sent ->
  first cycle), stalls (a job with a gap of more than `--stall-s` s without progress, or unfinished at
  `--job-timeout`), reverted node transactions (every node's store, receipts read back: lost races), and slashes
  of honest parties (every party here is honest: any `Slashed` or `AlphaSlashed` event is one).

Outputs are spot-checked: the first and the last job of each phase are re-run by the engine in this process
(SpeculativeDecoder with the job's id, verifier seed and the drafter's salt from chain data) and must equal what
the chain recorded token for token. `--json` prints the report as one JSON object.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys

os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")  # before transformers is imported (and inherited)
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

from node.bench.harness import DEFAULT_PROMPT, use_pair
from node.bench.load import print_load_table, run_load
from node.chain.anvil import check_block_time
from node.decoding.pairs import PairError


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    parser.add_argument(
        "--mode", choices=["transcript", "onchain", "both"], default="transcript", help="both: one after the other"
    )
    parser.add_argument("--jobs", type=int, default=20, help="concurrent jobs of the second phase")
    parser.add_argument("--tokens", type=int, default=32, help="maxTokens of each job (no EOS: exactly this many)")
    parser.add_argument("--gamma", type=int, default=4)
    parser.add_argument("--pair", default=None, help="smol | tiny (default: $VERISPEC_PAIR, else smol)")
    parser.add_argument("--drafters", type=int, default=3)
    parser.add_argument("--verifiers", type=int, default=3)
    parser.add_argument("--referees", type=int, default=5)
    parser.add_argument("--block-time", type=int, default=0, help="seconds between blocks (0: a block per tx)")
    parser.add_argument("--stall-s", type=float, default=30.0, help="a job this long without progress stalled")
    parser.add_argument("--job-timeout", type=float, default=900.0)
    parser.add_argument("--finalize-timeout", type=float, default=120.0)
    parser.add_argument("--prompt", default=DEFAULT_PROMPT)
    parser.add_argument("--check-all", action="store_true", help="re-run every job on the engine, not two a phase")
    args = parser.parse_args(argv)
    args.modes = ["transcript", "onchain"] if args.mode == "both" else [args.mode]
    if args.jobs < 1 or args.tokens < 1 or min(args.drafters, args.verifiers) < 1 or args.referees < 0:
        parser.error("--jobs, --tokens, --drafters and --verifiers must be positive, --referees not negative")
    try:
        args.block_time = check_block_time(str(args.block_time))
        args.pair = use_pair(args.pair)
    except (ValueError, PairError) as exc:
        parser.error(str(exc))
    # the engine's settings node.bench.harness.build_engine reads
    args.threads, args.device, args.temperature, args.top_k, args.top_p = 1, "cpu", 1.0, 0, 1.0
    logging.basicConfig(level=logging.ERROR)
    report = run_load(args)
    if args.json:
        print(json.dumps(report, indent=1, default=str))
    else:
        print_load_table(report)
    phases = [report[m][p] for m in args.modes for p in ("alone", "concurrent")]
    ok = all(not p["stalled"] and not p["honest_slashes"] and p["all_finalized"] for p in phases)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
