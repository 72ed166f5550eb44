"""A job between the chain and the engine: what the link and the roles both stand on (no role code, no link code).

    chaindata   a job's history from chain data alone (events, calldata, views); no torch
    sessions    on-chain JobRequest + prompt -> the engine's DecodingJob (and a session resumed at a cycle);
                the verifier-seed convention
    models      the models a node computes with: loaded once per process, fp32, replays

See docs/node.md, "The house".
"""
