"""`verispec demo`'s world: the whole system on this machine in a few minutes (docs/cli.md, "The demo").

Eight steps on one shared `Demo` state: a local chain, staked operators, then a block every `block_time` s (1 s by
default: interval mining); nine `verispec serve` processes (two verifiers serving transcript jobs on `--listen`, a
watchdog among them); transcript jobs: an honest one streamed to the terminal, a colluding pair's whose co-signed
wrong cycle the watchdog node rule-challenges, a biased drafter's whose cycle the watchdog pulls and disputes; the
referees' verdict; the settlement and what every job and dispute cost in gas. Here: the state and the set-up steps;
the job steps are in node/demo/steps.py, and `run_demo` (node/demo/run.py) stops every process it started and the
chain, also on Ctrl-C, SIGTERM or SIGHUP.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.table import Table

from node import BUNDLED_DRAFT, BUNDLED_TARGET  # the tiny pair: what run_demo runs when no pair is given
from node.console import console, print_addresses
from node.processes import NodeProcesses, serve_command

# dev accounts of anvil's mnemonic (chain up makes 20)
REQUESTER, DRAFTER, VERIFIER, REFEREES, BIASED, WATCHDOG, COSIGN, OVERACCEPT = 1, 2, 3, (4, 5, 6), 7, 8, 9, 10
NODE_OPTIONS = ("--poll-interval", "0.2", "--device", "cpu", "--threads", "1")
WATCHDOG_AUDIT_RATE = "0.25"  # of the binding target positions; every draft position is replayed (cheap)
DEFAULT_BLOCK_TIME = 1


@dataclass
class Demo:
    """What the steps share: where they run, and what the earlier steps made."""

    home: Path
    max_tokens: int
    prompt: str
    nodes: NodeProcesses
    block_time: int = DEFAULT_BLOCK_TIME
    draft: Path = BUNDLED_DRAFT  # the pair every node runs and every job names
    target: Path = BUNDLED_TARGET
    started: float = field(default_factory=time.monotonic)
    w3: Any = None
    deployment: Any = None
    rpc_url: str = ""
    addresses: dict[int, str] = field(default_factory=dict)  # dev account -> its address
    endpoints: dict[int, str] = field(default_factory=dict)  # verifier dev account -> its link's ws:// URL
    requester: Any = None  # dev account REQUESTER's Requester
    watchdog: Any = None  # dev account WATCHDOG's Requester (reads; the watchdog node acts)
    tokenizer: Any = None
    honest: Any = None  # JobReport of the honest job
    streamed: list[int] = field(default_factory=list)  # the honest job's tokens as its link streamed them
    colluding: Any = None  # JobReport of the cosign + overaccept pair's job
    challenge: dict = field(default_factory=dict)  # the watchdog's rule challenge of the colluding job
    biased: Any = None  # JobReport of the biased drafter's job
    dispute: Any = None  # DisputeInfo of the watchdog node's dispute on the biased job
    pull: dict = field(default_factory=dict)  # the CyclePulled event before that dispute
    summary: dict = field(default_factory=dict)  # what the demo showed, read from chain: <home>/demo.json

    def actor(self, index: int):
        """A Requester for dev account `index`, with its own transaction store in the home."""
        from node.chain.keys import dev_account
        from node.requester.client import Requester

        account = dev_account(index)
        return Requester(
            self.w3, self.deployment, account, store_path=self.home / "cli" / f"{account.address.lower()}.db"
        )

    @property
    def system(self):
        return self.deployment.system(self.w3)


def step(text: str) -> None:
    console.rule(f"[bold]{text}")


def step1_chain(demo: Demo) -> None:
    from node.chain.local import chain_up
    from node.chain.rpc import connect

    step("1. a local chain with the protocol deployed")
    chain = chain_up(demo.home)  # instant mining while it is set up; interval mining from step 3 on
    console.print(f"anvil pid {chain.pid} at {chain.rpc_url}; home {demo.home}")
    print_addresses(chain.deployment.addresses)
    demo.w3, demo.deployment, demo.rpc_url = connect(chain.rpc_url), chain.deployment, chain.rpc_url


OPERATORS = (  # (label, dev account, role, behaviour); each stakes 2 ETH, a referee 1 ETH
    ("drafter", DRAFTER, "drafter", "honest"),
    ("drafter (biased)", BIASED, "drafter", "biased"),
    ("drafter (cosign)", COSIGN, "drafter", "cosign"),
    ("verifier", VERIFIER, "verifier", "honest"),
    ("verifier (overaccept)", OVERACCEPT, "verifier", "overaccept"),
    *((f"referee {i + 1}", n, "referee", "honest") for i, n in enumerate(REFEREES)),
)


def step2_register(demo: Demo) -> None:
    from node.requester.units import ETHER, format_eth

    step(f"2. operators stake and register (model ids of {demo.target.name} and {demo.draft.name})")
    table = Table(box=None, header_style="bold")
    for column in ("role", "dev account", "address", "stake", "models"):
        table.add_column(column)
    for label, index, role, _ in OPERATORS:
        operator = demo.actor(index)
        stake = ETHER if role == "referee" else 2 * ETHER
        if role == "drafter":
            result = operator.register("drafter", [demo.draft], stake, alpha=0.6, target_model_path=demo.target)
        elif role == "verifier":
            result = operator.register("verifier", [demo.target], stake)
        else:
            result = operator.register("referee", [demo.target, demo.draft], stake)
        operator.close()
        demo.addresses[index] = result.address
        table.add_row(
            label, str(index), result.address, format_eth(stake), ", ".join(m[:10] + "…" for m in result.model_ids)
        )
    console.print(table)


def step3_nodes(demo: Demo) -> None:
    from node.chain.anvil import free_port, set_block_time
    from node.chain.keys import dev_account
    from node.link.chain import listen_url

    if demo.block_time:
        set_block_time(demo.rpc_url, demo.block_time)
        console.print(
            f"from here on a block every {demo.block_time} s (interval mining): every transaction waits for its block"
        )
    step("3. node processes: 3 drafters, 2 verifiers serving transcript jobs, 3 referees, a watchdog (`serve`)")
    common = ["--home", demo.home, *NODE_OPTIONS]
    drafter = ["drafter", "--model", demo.draft, "--target-model", demo.target]
    judge = ["--model", demo.target, "--draft-model", demo.draft]  # a verifier's or a referee's models
    for label, index, role, behavior in OPERATORS:
        name = label.replace(" (", "-").replace(")", "").replace(" ", "-")
        options = ["--dev-account", index, *common]
        if behavior != "honest":
            options += ["--behavior", behavior]
        if role == "drafter":
            demo.nodes.start(name, serve_command(*drafter, *options))
        elif role == "verifier":
            port = free_port()
            demo.endpoints[index] = listen_url("127.0.0.1", port)
            demo.nodes.start(name, serve_command("verifier", *judge, "--listen", f"127.0.0.1:{port}", *options))
        else:
            demo.nodes.start(name, serve_command("referee", *judge, *options))
    demo.addresses[WATCHDOG] = dev_account(WATCHDOG).address  # it stakes nothing: it bonds each dispute it opens
    watchdog = ["--audit-rate", WATCHDOG_AUDIT_RATE, "--dev-account", WATCHDOG]
    demo.nodes.start("watchdog", serve_command("watchdog", *judge, *watchdog, *common))
    demo.nodes.wait_ready(timeout=300)
    console.print(f"{len(demo.nodes.procs)} node processes up; logs in {demo.nodes.log_dir}")
    for index, url in demo.endpoints.items():
        console.print(f"  verifier {demo.addresses[index]} serves transcript jobs on {url} (published in the registry)")
