"""verispec node: protocol math, decoding engine, chain client, roles and CLI."""
