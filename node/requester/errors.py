"""The one error the requester side raises on purpose: a user-facing failure with a one-line explanation.

The CLI prints its message as `error: <message>` (node/cli.py); contract reverts are explained by
node/requester/reverts.py instead.
"""

from __future__ import annotations


class RequesterError(RuntimeError):
    """A user-facing failure with a one-line explanation (bad input, unknown model, wrong job state...)."""
