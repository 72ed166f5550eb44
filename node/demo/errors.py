"""The one error the demo raises on purpose, apart from the demo so the CLI can catch it without importing it."""


class DemoError(RuntimeError):
    """The demo cannot go on (printed as one line by the CLI)."""
