"""`verispec demo`: every part of the protocol on a throwaway local chain, step by step.

    world   the demo's shared state (`Demo`), its operators, and the set-up steps: chain, registration, nodes
    steps   the job steps: an honest streamed job, a colluding pair rule-challenged, a biased drafter disputed, gas
    run     run_demo: the steps in order; the nodes and the chain stop at the end
    errors  DemoError, which the CLI prints as one line

See docs/cli.md, "The demo".
"""
