"""The benchmarks' nodes: a drafter, a verifier and referees, as threads of the benchmark's process or as OS
processes (`python -m node.bench.nodes ROLE ...`, one per role; the referees share one), every one probed
(node.bench.probes).

Each node process imports torch, loads its models and holds its own RPC connection; it runs in its own process
group with its log in `store_dir/logs` (node.processes), and on SIGTERM (or once the benchmark that started it is
gone) stops its loop and writes its probes as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import sys
import threading
from collections import defaultdict

from node.bench.harness import NO_SPECULATE_ENV, SALT_ENV, bench_pair
from node.bench.probes import Probe, ProbedStop, install_probes, run_probed


def make_node(
    role: str,
    index: int,
    rpc_url: str,
    deployment,
    store_dir: pathlib.Path,
    poll_interval,
    artifacts,
    device,
    active_poll_interval=None,
    listen: bool = False,
):
    from node import protocol
    from node.chain.keys import dev_account
    from node.chain.rpc import connect
    from node.roles import DrafterNode, RefereeNode, VerifierNode

    if os.environ.get(SALT_ENV):
        fixed = int(os.environ[SALT_ENV])
        protocol.new_salt = lambda: fixed  # the drafter's choice, fixed across modes (SALT_ENV)

    pair = bench_pair()
    options = {"artifacts": artifacts}
    if poll_interval is not None:
        options["poll_interval"] = poll_interval
    if active_poll_interval is not None:
        options["active_poll_interval"] = active_poll_interval
    w3, account, store = connect(rpc_url), dev_account(index), store_dir / f"{role}{index}.db"
    if role == "drafter":
        return DrafterNode(w3, deployment, account, store, pair.draft, pair.target, device=device, **options)
    if role == "verifier":
        speculate = os.environ.get(NO_SPECULATE_ENV) != "1"  # --no-speculate (inherited by node processes)
        node = VerifierNode(
            w3, deployment, account, store, pair.target, pair.draft, device=device, speculate=speculate, **options
        )
        if listen:  # transcript jobs: its link on a free loopback port, published in the registry (serve --listen)
            from node.cli_transcript import start_link

            start_link(node, ("127.0.0.1", 0))
        return node
    return RefereeNode(w3, deployment, account, store, pair.target, pair.draft, device=device, **options)


class ThreadNodes:
    """Nodes as threads of this process (one GIL, shared model weights)."""

    mode = "threads"

    def __init__(
        self,
        specs,
        rpc_url,
        deployment,
        store_dir,
        poll_interval,
        artifacts,
        device,
        active_poll_interval,
        listen=False,
    ):
        install_probes()
        self.nodes = [
            (
                role,
                make_node(
                    role,
                    i,
                    rpc_url,
                    deployment,
                    store_dir,
                    poll_interval,
                    artifacts,
                    device,
                    active_poll_interval,
                    listen,
                ),
            )
            for role, i in specs
        ]
        self.stop_event = ProbedStop()
        self.probes = [Probe(f"{role}{node.address[:8]}") for role, node in self.nodes]
        self.threads = [
            threading.Thread(target=run_probed, args=(node, self.stop_event, probe), daemon=True)
            for (_, node), probe in zip(self.nodes, self.probes)
        ]
        for thread in self.threads:
            thread.start()

    def stop(self) -> dict[str, list[dict]]:
        self.stop_event.set()
        for thread in self.threads:
            thread.join(timeout=60)
        for _, node in self.nodes:
            node.close()
        out = defaultdict(list)
        for (role, _), probe in zip(self.nodes, self.probes):
            out[role].append(probe.as_json())
        return dict(out)


class ProcessNodes:
    """Nodes as separate OS processes: `python -m node.bench.nodes ROLE ...` (one per role; the three referees share
    one process), each in its own process group, its log in `store_dir/logs`."""

    mode = "processes"

    def __init__(
        self,
        groups,
        rpc_url,
        deployment_path,
        store_dir,
        poll_interval,
        device,
        threads,
        profile=None,
        active_poll_interval=None,
        listen=False,
    ):
        from node.processes import NodeProcesses

        self.nodes = NodeProcesses(store_dir / "logs")
        self.stats = {role: store_dir / f"{role}.stats.json" for role, _ in groups}
        for role, indices in groups:
            cmd = [
                sys.executable,
                "-m",
                "node.bench.nodes",  # run from the project root (node.processes), so this checkout's node
                role,
                "--indices",
                ",".join(map(str, indices)),
                "--rpc",
                rpc_url,
                "--deployment",
                str(deployment_path),
                "--store",
                str(store_dir),
                "--stats",
                str(self.stats[role]),
                "--threads",
                str(threads),
            ]
            if poll_interval is not None:
                cmd += ["--poll-interval", str(poll_interval)]
            if active_poll_interval is not None:
                cmd += ["--active-poll-interval", str(active_poll_interval)]
            if device:
                cmd += ["--device", device]
            if profile:
                cmd += ["--profile", str(profile)]
            if listen:
                cmd += ["--listen"]
            self.nodes.start(role, cmd, threads=threads)
        try:
            self.nodes.wait_ready(timeout=300, marker="READY")
        except Exception:
            self.nodes.stop_all()
            raise

    def stop(self) -> dict[str, list[dict]]:
        self.nodes.stop_all(timeout=60)
        return {role: json.loads(path.read_text()) for role, path in self.stats.items() if path.exists()}


def start_nodes(args, groups, rpc_url, deployment, deployment_path, tmp, artifacts, listen=False):
    """`groups` ([(role, [dev account])]) as `args.nodes` says: threads or processes."""
    if args.nodes == "threads":
        specs = [(role, i) for role, indices in groups for i in indices]
        return ThreadNodes(
            specs,
            rpc_url,
            deployment,
            tmp,
            args.poll_interval,
            artifacts,
            args.device,
            args.active_poll_interval,
            listen,
        )
    return ProcessNodes(
        groups,
        rpc_url,
        deployment_path,
        tmp,
        args.poll_interval,
        args.device,
        args.threads,
        args.profile,
        args.active_poll_interval,
        listen,
    )


def serve(args) -> None:
    """A node process: run the node(s) until SIGTERM (or until the benchmark that started this process is gone),
    then dump probes."""
    import torch

    from node.chain.deployment import Deployment
    from node.processes import stop_on_signals

    torch.set_num_threads(args.threads)
    install_probes()
    deployment = Deployment.load(pathlib.Path(args.deployment))
    store_dir = pathlib.Path(args.store)
    indices = [int(i) for i in args.indices.split(",")]
    nodes = [
        make_node(
            args.role,
            i,
            args.rpc,
            deployment,
            store_dir,
            args.poll_interval,
            None,
            args.device,
            args.active_poll_interval,
            args.listen,
        )
        for i in indices
    ]
    stop = stop_on_signals(ProbedStop())
    probes = [Probe(f"{args.role}{i}") for i in indices]

    def profile(i):
        return str(pathlib.Path(args.profile) / f"{args.role}{i}.prof") if args.profile else None

    threads = [
        threading.Thread(target=run_probed, args=(n, stop, p, profile(i)), daemon=True)
        for n, p, i in zip(nodes, probes, indices)
    ]
    for thread in threads:
        thread.start()
    print("READY", flush=True)
    parent = os.getppid()
    while not stop.wait(0.5):
        if os.getppid() != parent:  # a benchmark killed without its finally must not leave nodes polling
            break
    stop.set()
    for thread in threads:
        thread.join(timeout=60)
    for node in nodes:
        node.close()
    pathlib.Path(args.stats).write_text(json.dumps([p.as_json() for p in probes]))


def main(argv=None) -> int:
    """ProcessNodes' command line (the pair, salt and speculation come from the environment it inherits)."""
    parser = argparse.ArgumentParser(description="one benchmark node process (started by ProcessNodes)")
    parser.add_argument("role", choices=["drafter", "verifier", "referee"])
    parser.add_argument("--indices", required=True, help="comma-separated dev accounts, one node each")
    parser.add_argument("--rpc", required=True)
    parser.add_argument("--deployment", required=True)
    parser.add_argument("--store", required=True, help="the folder of the nodes' stores")
    parser.add_argument("--stats", required=True, help="where the probes go (JSON) once stopped")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--poll-interval", type=float, default=None)
    parser.add_argument("--active-poll-interval", type=float, default=None)
    parser.add_argument("--device", default=None)
    parser.add_argument("--profile", default=None, metavar="DIR")
    parser.add_argument("--listen", action="store_true", help="verifiers: serve the transcript link on loopback")
    serve(parser.parse_args(argv))
    return 0


if __name__ == "__main__":
    sys.exit(main())
