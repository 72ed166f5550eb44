"""The benchmark harness: what scripts/bench_*.py, scripts/soak.py and their tests share, importable like any module.

It sits on the top floor: it may import every other part of node/, and nothing in node/ imports it.

    harness     chain and process helpers: the pair, Rpc, wait_until, set_mining, gas_of, the engine alone
    probes      timing-only wrappers around the node code (where a cycle's wall time goes)
    nodes       drafter / verifier / referee nodes as threads or OS processes (`python -m node.bench.nodes`)
    breakdown   a node's probes cut into per-cycle and per-turn milliseconds, the critical path's legs
    onchain     one per-cycle (v1) run: jobs, their gas, the engine beside them; disputes: one TargetReplay dispute
    transcript  one transcript (v2) run: jobs over the verifier's link, the requester following the token stream
    matrix      modes × block times, one row each
    world       many `verispec serve` processes on one anvil (the load run's and the soak's)
    load        the load run's phases and table; soak: the soak's steps, ledger and summary
    prompts     held-out prompts; security: the security benchmark's figures; audits: the watchdog benchmark's
    gas         gas of the protocol's paths on a fresh chain (scripts/gas_report.py, scripts/bench_security.py)
    tables      a Markdown table
"""
