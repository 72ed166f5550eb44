"""`--pair NAME`: the model pair a command runs when it is given no model paths (node/decoding/pairs.py names the
pairs and their folders). Explicit paths win; a bad name or a missing folder is one line."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from node.cli_context import CliError

PairOpt = Annotated[
    str | None,
    typer.Option(
        "--pair",
        envvar="VERISPEC_PAIR",
        help="Model pair: smol (SmolLM2-135M-Instruct and its distilled draft; the default) | tiny (the bundled "
        "2M-parameter test pair). A model path given on its own option wins.",
        show_default=False,
    ),
]


def pair_models(
    name: str | None, draft: Path | None = None, target: Path | None = None, need: tuple[str, ...] = ("draft", "target")
) -> tuple[Path, Path]:
    """(draft, target): each path given, else the one of the pair `name` (--pair, else $VERISPEC_PAIR, else the
    default pair). A bad name, or a folder of the pair that is `need`ed but missing, is one line."""
    from node.decoding.pairs import PairError, get_pair

    try:
        pair = get_pair(name, check=False)
        used = {"draft": draft is None and "draft" in need, "target": target is None and "target" in need}
        if any(used[kind] and getattr(pair, kind) in pair.missing() for kind in used):
            pair.check()
    except PairError as exc:
        raise CliError(str(exc)) from None
    return draft or pair.draft, target or pair.target


def known_target(model_id: bytes) -> Path | None:
    """The target folder of a pair present on this machine whose model id is `model_id`, if any (the tiny pair is
    hashed first: it is cheap)."""
    from node.decoding.pairs import PAIRS
    from node.requester.checkpoints import load_model_info

    for pair in PAIRS.values():
        if (pair.target / "config.json").is_file() and load_model_info(pair.target).model_id == model_id:
            return pair.target
    return None
