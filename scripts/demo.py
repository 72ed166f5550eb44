#!/usr/bin/env python
"""`make demo`: the whole system end to end on a local chain — the same as `verispec demo [OPTIONS]`.

Starts anvil, deploys the contracts, runs two drafters (one biased), a verifier, three referees and a watchdog as
separate `verispec serve` processes, an honest job and a biased drafter's job; the watchdog node audits both from
chain data, disputes a biased position by itself, and the demo shows the referees' votes, the slash and the
watchdog's withdrawal. Stops everything it started, also on Ctrl-C.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from node.cli import app

if __name__ == "__main__":
    app(args=["demo", *sys.argv[1:]], prog_name="demo.py")
