"""The transcript link (protocol v2): drafter and verifier run a job's cycles over a WebSocket, off the chain.

    wire       JSON frames, their limits and close codes; the signed messages as they travel
    job        a transcript job as both parties know it, and the accept-rule check of one cycle (pure math)
    verifier   LinkServer: the verifier's asyncio WebSocket endpoint (`serve verifier --listen`)
    ahead      VerifyAhead: the verifier verifies the next draft while the drafter drafts it
    drafter    run_drafter_job: the drafter's side of one job, resumable from its store
    requester  subscribe to a job's tokens, fetch and check its signed transcript
    chain      a transcript job from chain data, the registry endpoint, the settlement transaction

See docs/node.md, "Transcript link", and docs/protocol.md, "Transcript mode (v2)".
"""
