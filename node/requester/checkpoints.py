"""The local checkpoints a requester or watchdog names, and a prompt as every node tokenizes it.

A checkpoint directory gives its model id (docs/protocol.md §2), its context window and its tokenizer; a failure
is a `RequesterError` naming the path. A prompt is refused before it is submitted when it does not fit the pair's
context window (docs/node.md, "Conventions": prompt tokens + maxTokens + γ), as the nodes would refuse it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from node.requester.errors import RequesterError


@dataclass(frozen=True)
class ModelInfo:
    path: Path
    model_id: bytes
    max_positions: int | None
    vocab_size: int | None = None  # config.json's vocab_size: registered with the model id (docs/protocol.md §4)


def check_model_dir(path: str | Path, what: str = "model") -> Path:
    """`path` as a model directory, or a `RequesterError` saying it is missing or a file."""
    path = Path(path)
    if path.is_file():
        raise RequesterError(f"{what} path {path} is a file, not a model directory (give the checkpoint's folder)")
    if not path.is_dir():
        raise RequesterError(f"{what} directory {path} does not exist")
    return path


def load_model_info(path: str | Path) -> ModelInfo:
    from node.decoding import model_id  # lazy: pulls in torch
    from node.decoding.loading import max_positions, vocab_size
    from node.decoding.model_id import CheckpointError

    path = check_model_dir(path)
    try:
        mid = model_id(path)
    except CheckpointError as exc:  # it names the file and what is wrong with it
        raise RequesterError(str(exc)) from None
    except (FileNotFoundError, ValueError, OSError) as exc:
        raise RequesterError(f"{path} is not a usable model checkpoint: {exc}") from None
    return ModelInfo(path, mid, max_positions(path), vocab_size(path))


def load_tokenizer(path: str | Path):
    from node.decoding.loading import load_tokenizer as load

    try:
        return load(str(path))
    except Exception as exc:
        raise RequesterError(f"cannot load the tokenizer of {path}: {exc}") from None


def tokenize_prompt(tokenizer, prompt: str) -> list[int]:
    """The prompt's tokens exactly as every node computes them (node/jobs/sessions.py)."""
    from node.jobs import sessions

    return list(sessions.prompt_tokens(tokenizer, prompt.encode("utf-8")))


def check_fits(prompt_tokens: int, max_tokens: int, gamma: int, max_positions: int | None) -> None:
    """docs/node.md: refuse a prompt with prompt tokens + maxTokens + γ > the model's max positions."""
    from node.jobs import sessions

    needed = sessions.positions_needed(prompt_tokens, max_tokens, gamma)
    if max_positions is not None and needed > max_positions:
        raise RequesterError(
            f"the prompt does not fit the context window: {prompt_tokens} prompt tokens + {max_tokens} max tokens "
            f"+ gamma {gamma} = {needed} > {max_positions} positions "
            f"(shorten the prompt or lower --max-tokens)"
        )
