"""Probes (docs/protocol.md "Soundness (v1.2)"): the jobs that alone move α windows once a deployment wires its
ProbeScheduler.

    corpus      the shipped probe corpus (prompts.json), rendered per target model; its Merkle root and proofs
    keeper      KeeperNode (`verispec serve keeper`): opens due probes, starts them with the drawn prompt and its
                proof, claims their timeouts and finalizes them, collects the treasury and withdraws its tips

Joins the chain code and the tokenizer (as the roles do); the engine imports nothing from here.
"""
