#!/usr/bin/env python
"""`make demo`: the whole system end to end on a local chain — the same as `verispec demo [OPTIONS]`.

Starts anvil with 1 s blocks (`--block-time`), deploys the contracts, runs three drafters (honest, biased, cosign),
two verifiers (honest, overaccept) serving transcript jobs, three referees and a watchdog as separate `verispec serve`
processes; streams an honest transcript job; the watchdog node rule-challenges the colluding pair's co-signed wrong
cycle (both slashed) and pulls and disputes a biased drafter's cycle (the referees convict it); then the settlement and
each job's and dispute's gas. Stops everything it started, also on Ctrl-C.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from node.cli import app

if __name__ == "__main__":
    app(args=["demo", *sys.argv[1:]], prog_name="demo.py")
