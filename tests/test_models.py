"""The committed model pair in models/ loads as standard Hugging Face models and is a usable SD pair."""

import json
import pathlib

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

MODELS = pathlib.Path(__file__).resolve().parent.parent / "models"

# Written for this test, so it is in neither model's training data: the
# stdlib-style code the pair was trained on, but text the models never saw.
HELDOUT_SNIPPET = '''\
import os
import sys


class RingBuffer:
    """A fixed-size buffer that overwrites its oldest item when full."""

    def __init__(self, capacity):
        if capacity <= 0:
            raise ValueError("capacity must be positive")
        self._items = [None] * capacity
        self._start = 0
        self._size = 0

    def __len__(self):
        return self._size

    def append(self, item):
        end = (self._start + self._size) % len(self._items)
        self._items[end] = item
        if self._size == len(self._items):
            self._start = (self._start + 1) % len(self._items)
        else:
            self._size += 1

    def __iter__(self):
        for i in range(self._size):
            yield self._items[(self._start + i) % len(self._items)]


def main(argv=None):
    if argv is None:
        argv = sys.argv[1:]
    buffer = RingBuffer(10)
    for name in argv:
        if not os.path.exists(name):
            print("%s: no such file" % name, file=sys.stderr)
            return 1
        with open(name, encoding="utf-8") as f:
            for line in f:
                buffer.append(line.rstrip("\\n"))
    for line in buffer:
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
'''


@pytest.fixture(scope="module")
def pair():
    torch.set_num_threads(2)
    target = AutoModelForCausalLM.from_pretrained(MODELS / "target").eval()
    draft = AutoModelForCausalLM.from_pretrained(MODELS / "draft").eval()
    return target, draft


@pytest.fixture(scope="module")
def snippet_logits(pair):
    target, draft = pair
    ids = AutoTokenizer.from_pretrained(MODELS / "target")(HELDOUT_SNIPPET, return_tensors="pt")["input_ids"]
    with torch.no_grad():
        return ids, target(ids).logits[0], draft(ids).logits[0]


def test_tokenizers_identical():
    target_tok = AutoTokenizer.from_pretrained(MODELS / "target")
    draft_tok = AutoTokenizer.from_pretrained(MODELS / "draft")
    assert target_tok.get_vocab() == draft_tok.get_vocab()
    assert (MODELS / "target/tokenizer.json").read_bytes() == (MODELS / "draft/tokenizer.json").read_bytes()
    assert target_tok.eos_token is not None and target_tok.eos_token == draft_tok.eos_token
    assert target_tok(HELDOUT_SNIPPET)["input_ids"] == draft_tok(HELDOUT_SNIPPET)["input_ids"]
    assert target_tok.decode(target_tok(HELDOUT_SNIPPET)["input_ids"]) == HELDOUT_SNIPPET


def test_configs(pair):
    target, draft = pair
    tokenizer = AutoTokenizer.from_pretrained(MODELS / "target")
    for model in pair:
        assert model.config.vocab_size == len(tokenizer)
        assert model.config.max_position_embeddings >= 512
        assert model.config.eos_token_id == tokenizer.eos_token_id
    target_params = sum(p.numel() for p in target.parameters())
    draft_params = sum(p.numel() for p in draft.parameters())
    assert draft_params * 4 <= target_params


def test_target_beats_draft_on_heldout_text(snippet_logits):
    ids, p_logits, q_logits = snippet_logits
    labels = ids[0, 1:]
    target_loss = torch.nn.functional.cross_entropy(p_logits[:-1], labels)
    draft_loss = torch.nn.functional.cross_entropy(q_logits[:-1], labels)
    assert target_loss < draft_loss


def test_acceptance_on_heldout_text(snippet_logits):
    # Expected per-token acceptance of speculative sampling at temperature 1.
    _, p_logits, q_logits = snippet_logits
    alpha = torch.minimum(p_logits.softmax(-1), q_logits.softmax(-1)).sum(-1).mean().item()
    assert alpha >= 0.55


def test_metrics_file_matches_models(pair):
    metrics = json.loads((MODELS / "metrics.json").read_text())
    target, draft = pair
    assert metrics["target"]["params"] == sum(p.numel() for p in target.parameters())
    assert metrics["draft"]["params"] == sum(p.numel() for p in draft.parameters())
    assert metrics["target"]["heldout_loss"] < metrics["draft"]["heldout_loss"]
