"""The load run's and the soak's world: one anvil with the protocol deployed, every party registered and served by a
`verispec serve` OS process (node.processes), and a requester (dev account 1) following the jobs' progress as a user
would: transcript jobs through each verifier's token stream, per-cycle jobs as `CycleVerified` logs arriving."""

from __future__ import annotations

import asyncio
import pathlib
import threading
import time

from node.bench.harness import PRICE_ACCEPTED, PRICE_PASS, REQUESTER, STAKE, WAD, Rpc, wait_until
from node.bench.transcript import follow_streams
from node.chain.enums import NO_EOS, Role

FIRST_NODE_ACCOUNT = 2  # drafters, then verifiers, then referees, in dev-account order
ROLE_ORDER = ("drafter", "verifier", "referee", "watchdog")  # a watchdog stakes nothing: it bonds each dispute


class World:
    """A deployed anvil with registered parties served by `verispec serve` processes (`rpc_for` lets a caller put
    something between the nodes and the chain, e.g. the soak's fault proxy)."""

    def __init__(
        self,
        anvil_url: str,
        tmp: pathlib.Path,
        counts: dict[str, int],
        artifacts,
        ids,
        vocab: int,
        drafter_capacity: int | None = None,
    ):
        from node.chain.deploy import deploy_system
        from node.chain.deployment import Deployment
        from node.chain.rpc import connect

        self.url, self.tmp, self.ids, self.vocab = anvil_url, tmp, ids, vocab
        # each drafter's `serve --capacity` (None: the market's default): a run that gives one drafter more jobs at
        # once declares room for them, as an operator would (the market refuses a job past it: DrafterAtCapacity)
        self.drafter_capacity = drafter_capacity
        self.w3, self.rpc = connect(anvil_url), Rpc(anvil_url)
        self.accounts = self.w3.eth.accounts
        self.start_block = self.w3.eth.block_number + 1
        self.system = deploy_system(self.w3, self.accounts[0], artifacts=artifacts)
        self.market, self.params = self.system.market, self.system.params
        self.parties: dict[str, list[int]] = {}
        index = FIRST_NODE_ACCOUNT
        for role in ROLE_ORDER:
            self.parties[role] = list(range(index, index + counts.get(role, 0)))
            index += counts.get(role, 0)
        if index > len(self.accounts):
            raise SystemExit(f"error: {index} dev accounts needed, the anvil has {len(self.accounts)}")
        self.home = tmp / "home"
        self.home.mkdir(parents=True, exist_ok=True)
        self.deployment = Deployment.of_system(self.w3, self.system, anvil_url, self.start_block)
        self.deployment.save(self.home / "deployment.json")
        self.nodes = None
        self.endpoints: dict[int, str] = {}

    def register(self, role: str, dev: int) -> None:
        reg = self.system.registry.functions
        who = self.accounts[dev]
        if role == "drafter":
            self.rpc.send(reg.registerDrafter(self.ids["draft"], self.ids["target"], WAD // 2, self.vocab), who, STAKE)
        elif role == "verifier":
            self.rpc.send(reg.register(Role.Verifier, [self.ids["target"]], [self.vocab]), who, STAKE)
        else:
            models = [self.ids["draft"], self.ids["target"]]
            self.rpc.send(reg.register(Role.Referee, models, [self.vocab] * 2), who, self.params.min_referee_stake)

    def register_all(self) -> None:
        for role in ROLE_ORDER[:3]:
            for dev in self.parties[role]:
                self.register(role, dev)

    def serve_args(self, role: str, dev: int, rpc_url: str | None = None, behavior: str | None = None) -> list:
        """`serve ROLE`'s options for dev account `dev`: its store in the run's folder, one torch thread, a 0.2 s
        poll; a verifier listens on a free loopback port."""
        from node.chain.anvil import free_port

        args = ["--dev-account", dev, "--home", self.home, "--store", self.tmp / f"{role}{dev}.db"]
        args += ["--device", "cpu", "--threads", "1", "--poll-interval", "0.2"]
        if rpc_url:
            args += ["--rpc", rpc_url]
        if role == "verifier":
            args += ["--listen", f"127.0.0.1:{free_port()}"]
        if role == "drafter" and self.drafter_capacity is not None:
            args += ["--capacity", self.drafter_capacity]
        if behavior and behavior != "honest":
            args += ["--behavior", behavior]
        return args

    def start_nodes(
        self, rpc_url: str | None = None, behaviors: dict | None = None, extra: dict | None = None, timeout=600
    ):
        """Every party as a `serve` process (`behaviors`, `extra`: a dev account's --behavior and further options);
        waits until each serves and every verifier's endpoint is on chain."""
        from node import processes

        behaviors, extra = behaviors or {}, extra or {}
        self.nodes = processes.NodeProcesses(self.tmp / "logs")
        for role in ROLE_ORDER:
            for dev in self.parties[role]:
                args = [*self.serve_args(role, dev, rpc_url, behaviors.get(dev)), *extra.get(dev, ())]
                self.nodes.start(f"{role}{dev}", processes.serve_command(role, *args))
        self.nodes.wait_ready(timeout=timeout, marker="serving on")
        self.wait_endpoints(timeout)

    def wait_endpoints(self, timeout: float = 120) -> None:
        from node.link.chain import EndpointError, endpoint_of

        def published(dev):
            try:
                return endpoint_of(self.system.registry, self.accounts[dev])
            except EndpointError:
                return None

        for dev in self.parties["verifier"]:
            self.endpoints[dev] = wait_until(lambda dev=dev: published(dev), timeout, what=f"verifier {dev} link")

    def stop_nodes(self) -> dict[str, int]:
        return self.nodes.stop_all(timeout=30) if self.nodes else {}

    def pids(self) -> dict[str, int]:
        return {name: proc.pid for name, (proc, _, _) in self.nodes.procs.items()}

    def request(self, drafter: int, verifier: int, gamma: int, tokens: int, temperature: float = 1.0) -> dict:
        return dict(
            draftModel=self.ids["draft"],
            targetModel=self.ids["target"],
            drafter=self.accounts[drafter],
            verifier=self.accounts[verifier],
            gamma=gamma,
            temperature=round(temperature * WAD),
            topK=0,
            topP=WAD,
            maxTokens=tokens,
            eosToken=NO_EOS,
            pricePerAcceptedToken=PRICE_ACCEPTED,
            pricePerPass=PRICE_PASS,
        )

    def submit_many(self, mode: str, requests: list[dict], prompt: str, sender: int = REQUESTER) -> list[tuple]:
        """Send every job's submit transaction before reading any receipt: [(job id, send time, receipt)].

        A job's clock starts when its transaction is sent, as the requester's would: reading the receipts takes
        RPC round trips, and under load a short job's cycles were seen before its receipt was (a negative tok/s)."""
        market = self.market.functions
        submit = market.submitTranscriptJob if mode == "transcript" else market.submitJob
        frm = self.accounts[sender]
        sent = []
        for r in requests:
            at = time.monotonic()
            value = r["maxTokens"] * (PRICE_ACCEPTED + PRICE_PASS)
            sent.append((at, submit(r, prompt.encode()).transact({"from": frm, "value": value})))
        out = []
        for at, tx in sent:
            receipt = self.rpc.receipt("0x" + bytes(tx).hex())
            if int(receipt["status"], 16) != 1:
                raise RuntimeError("a submit reverted")
            out.append((self.job_of(receipt), at, receipt))
        return out

    def job_of(self, receipt: dict) -> int:
        """The job id a submit receipt created (its JobSubmitted log)."""
        from web3.logs import DISCARD

        formatted = self.w3.eth.get_transaction_receipt(receipt["transactionHash"])
        return self.market.events.JobSubmitted().process_receipt(formatted, errors=DISCARD)[0]["args"]["jobId"]

    def status(self, job_id: int) -> int:
        return self.market.functions.jobStatus(job_id).call()

    def pass_windows(self, seconds: int | None = None) -> None:
        seconds = seconds if seconds is not None else self.params.challenge_window + 1
        self.rpc("evm_increaseTime", seconds)
        self.rpc("evm_mine")

    def slashes(self, from_block: int, to_block="latest") -> list[dict]:
        """Every `Slashed` (registry), `AlphaSlashed` (market) event and `JobFinished` with a slash in the range."""
        out = []
        for log in self.market.events.JobFinished().get_logs(from_block=from_block, to_block=to_block):
            if log["args"]["slashed"]:
                who, amount = log["args"]["party"], log["args"]["slashed"]
                out.append({"event": "JobFinished", "account": who, "amount": amount, "block": log["blockNumber"]})
        for event in (self.system.registry.events.Slashed, self.market.events.AlphaSlashed):
            for log in event().get_logs(from_block=from_block, to_block=to_block):
                args = dict(log["args"])
                who = args.get("account") or args.get("drafter")
                out.append(
                    {"event": log["event"], "account": who, "amount": int(args["amount"]), "block": log["blockNumber"]}
                )
                if "by" in args:
                    out[-1]["by"] = args["by"]
        return out


class CycleWatch(threading.Thread):
    """Per-cycle mode: when each `CycleVerified` log is first seen (eth_getLogs every `interval` s), by job."""

    def __init__(self, world: World, interval: float = 0.05):
        super().__init__(daemon=True, name="cycle-watch")
        from node.chain.rpc import connect

        self.w3 = connect(world.url)
        self.event = world.deployment.system(self.w3).market.events.CycleVerified
        self.next_block, self.interval = world.w3.eth.block_number, interval
        self.frames: dict[int, list] = {}
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.is_set():
            self.poll()
            self.stopped.wait(self.interval)

    def poll(self) -> None:
        head = self.w3.eth.block_number
        if head >= self.next_block:
            logs = self.event().get_logs(from_block=self.next_block, to_block=head)
            now = time.monotonic()
            for log in sorted(logs, key=lambda x: (x["blockNumber"], x["logIndex"])):
                self.frames.setdefault(log["args"]["jobId"], []).append((now, log["args"]["cycle"]))
            self.next_block = head + 1

    def stop(self) -> None:
        """Stop, then read the blocks mined since the last poll: a job's last cycles can land between the thread's
        last poll and the moment its status reads Finished (a job then showed fewer cycles than it ran)."""
        self.stopped.set()
        self.join(timeout=10)
        if not self.is_alive():
            self.poll()


def follow_transcripts(world: World, jobs: dict[int, int], timeout: float) -> dict[int, list]:
    """Transcript mode: each job's token stream from its verifier's link; {job: [(arrival time, cycle)]}."""

    async def all_streams():
        by_verifier: dict[int, list[int]] = {}
        for job_id, verifier in jobs.items():
            by_verifier.setdefault(verifier, []).append(job_id)
        results = await asyncio.gather(
            *(follow_streams(world.endpoints[v], ids, timeout) for v, ids in by_verifier.items()),
            return_exceptions=True,
        )
        frames = {}
        for result in results:
            if isinstance(result, BaseException):
                continue  # a stream that failed: those jobs show as stalled (no frames)
            for job_id, stream in result.items():
                frames[job_id] = [(t, cycle) for t, cycle, _ in stream["frames"]]
        return frames

    return asyncio.run(all_streams())
