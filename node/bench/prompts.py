"""Held-out prompts (none of this text was trained on: scripts/train_models.py trains the tiny pair on this Python's
standard library minus `corpus_files`' held-out share), from three sources: the training split's own held-out stdlib
files, the stdlib's test directories, and the .py files of site-packages (third-party code in another style)."""

from __future__ import annotations

import pathlib
import random
import sysconfig

# Tests, vendored packages and generated files (codec tables, the pydoc topic dump) are skipped from the training
# corpus: they are repetitive data, not the code we want to model.
SKIPPED_DIRS = {"site-packages", "test", "tests", "idle_test", "encodings", "pydoc_data"}
HELDOUT_EVERY = 10  # every 10th file (sorted by path) is held out for evaluation
SOURCES = ("heldout-stdlib", "stdlib-tests", "site-packages")
PROMPT_TOKENS = (16, 256)


def corpus_files():
    """The tiny pair's training corpus split: (train files, held-out files) of this Python's standard library."""
    root = pathlib.Path(sysconfig.get_paths()["stdlib"])
    files = sorted(p for p in root.rglob("*.py") if not SKIPPED_DIRS & set(p.relative_to(root).parts))
    heldout = files[HELDOUT_EVERY - 1 :: HELDOUT_EVERY]
    train = [p for p in files if p not in set(heldout)]
    return train, heldout


def source_files() -> dict[str, list[pathlib.Path]]:
    """The three held-out sources, each a sorted list of files (see the module docstring)."""
    stdlib = pathlib.Path(sysconfig.get_paths()["stdlib"])
    _train, heldout = corpus_files()
    tests = sorted(
        p
        for p in stdlib.rglob("*.py")
        if {"test", "tests", "idle_test"} & set(p.relative_to(stdlib).parts)
        and "site-packages" not in p.relative_to(stdlib).parts
    )
    site = pathlib.Path(sysconfig.get_paths()["purelib"])
    packages = sorted(p for p in site.rglob("*.py") if 2_000 < p.stat().st_size < 200_000)
    return {"heldout-stdlib": sorted(heldout), "stdlib-tests": tests, "site-packages": packages}


def make_prompt(i: int, seed: int, files: dict, tokenizer, max_tokens: list[int]) -> dict:
    """Prompt i: deterministic in (seed, i) and the installed files."""
    rng = random.Random(f"{seed}:{i}")
    source = SOURCES[i % len(SOURCES)]
    for _ in range(100):
        path = rng.choice(files[source])
        text = path.read_text(encoding="utf-8", errors="replace")
        starts = [0] + [k + 1 for k, c in enumerate(text) if c == "\n" and k + 1 < len(text)]
        line = rng.randrange(len(starts))
        length = rng.randint(*PROMPT_TOKENS)
        ids = tokenizer(text[starts[line] : starts[line] + 12 * length])["input_ids"][:length]
        if len(ids) >= min(length, 2 * PROMPT_TOKENS[0]) and len(ids) >= PROMPT_TOKENS[0]:
            return dict(source=source, file=str(path), line=line, ids=ids, max_tokens=rng.choice(max_tokens))
    raise RuntimeError(f"no prompt found for index {i} in {source}")
