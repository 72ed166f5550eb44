"""The requester client: what `verispec register|unbond|withdraw|submit|status|dispute|finalize` do for a person.

    client      Requester: the requester / operator side (register, submit, report, disputes, finalize, withdraw)
    job_reader  a job's view, its events and the report `verispec status` prints
    disputing   DisputeClient: open a dispute with the evidence rebuilt from chain data, follow it, cash it
    reports     what the requester returns (JobReport, DisputeInfo, CycleSummary, ...)
    checkpoints local checkpoints (model id, context window, tokenizer) and the prompt fit
    units       amounts and times as people type and read them
    reverts     what a contract revert means for the user (explain_revert)
    errors      RequesterError

The watchdog (node/roles/watchdog/) opens disputes through this client too. See docs/node.md.
"""
