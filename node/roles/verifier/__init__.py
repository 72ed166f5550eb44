"""The verifier's room: `verispec serve verifier`.

node   VerifierNode (VerifySession per job; acceptJob, submitVerification; answers TargetReplay disputes)
"""
