"""The benchmark harness: what scripts/bench_*.py, scripts/soak.py, scripts/gas_report.py and their tests share,
imported like any module (`from node.bench.harness import Rpc, wait_until`).

It sits on the top floor: it may import every other part of node/, and nothing in node/ imports it.

    harness     the pair, dev accounts and prices, Rpc, HeadWatch, wait_until, set_mining, gas_of, the engine alone
    probes      timing-only wrappers around the node code; breakdown: where a cycle's wall time goes
    nodes       drafter, verifier and referee nodes as threads or OS processes (`python -m node.bench.nodes`)
    onchain     one per-cycle (v1) run; disputes: one TargetReplay dispute; transcript: one transcript (v2) run
    matrix      modes × block times, one row each (scripts/bench_e2e.py's table)
    world       many `verispec serve` processes on one anvil; load: the load run; soak, ledger: the soak
    prompts     held-out prompts; security, gas: the security benchmark; audits: the watchdog benchmark
    tables      a Markdown table
"""
