"""Chain side of the node: compiling, local chains, deployment and contract calls (no engine imports)."""
