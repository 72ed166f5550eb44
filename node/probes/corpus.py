"""The probe corpus of a target model: the shipped prompts (prompts.json), rendered for its tokenizer, and their
Merkle root and proofs (node/protocol.py `probe_leaf`, `probe_corpus_root`, `probe_proof`; docs/protocol.md
"Soundness (v1.2)").

A probe posts the corpus prompt's bytes as its job's prompt (`ProbeScheduler.startProbe` → `submitJob`), and every
node reads a job's prompt as UTF-8 text tokenized without added special tokens (node/jobs/sessions.py
`prompt_tokens`). So a corpus prompt is the raw prompt rendered as text: with the target tokenizer's chat template
and the generation prompt (a chat model such as SmolLM2-135M-Instruct serves chat turns; the template's special
tokens are written as text, which the tokenizer reads back as the same special tokens: `check_rendering`), or the
raw text when the tokenizer has no template (the tiny pair), then UTF-8 encoded. The order is fixed: the "chat"
list, then the "code" list, index 0.. in each; the root commits to it, so a deployed corpus is never edited.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from node import protocol
from node.chain.enums import NO_EOS

PROMPTS_PATH = Path(__file__).with_name("prompts.json")
KINDS = ("chat", "code")


class CorpusError(ValueError):
    """The shipped prompts are unusable for a model (missing, empty, not rendering to what the nodes tokenize)."""


def raw_prompts(path: Path = PROMPTS_PATH) -> list[str]:
    """The shipped prompts in corpus order: every "chat" prompt, then every "code" prompt."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    prompts = [str(p) for kind in KINDS for p in data.get(kind, [])]
    if not prompts or any(not p.strip() for p in prompts):
        raise CorpusError(f"{path} holds no prompts, or an empty one")
    return prompts


def render(tokenizer, text: str) -> str:
    """`text` as the target model is asked it: one user turn in its chat template with the generation prompt, or the
    text itself when the tokenizer has no template."""
    if not getattr(tokenizer, "chat_template", None):
        return text
    messages = [{"role": "user", "content": text}]
    return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)


def check_rendering(tokenizer, text: str, rendered: str) -> None:
    """The nodes' tokens of `rendered` (UTF-8 text, no added special tokens) are the template's own tokens: raises
    CorpusError otherwise (a template whose text does not read back as its tokens would probe another prompt)."""
    ids = [int(t) for t in tokenizer(rendered, add_special_tokens=False)["input_ids"]]
    if not ids:
        raise CorpusError(f"the prompt {text!r} renders to no tokens")
    if getattr(tokenizer, "chat_template", None):
        messages = [{"role": "user", "content": text}]
        expected = tokenizer.apply_chat_template(messages, tokenize=True, add_generation_prompt=True)
        if isinstance(expected, dict) or hasattr(expected, "keys"):
            expected = expected["input_ids"]
        if [int(t) for t in expected] != ids:
            raise CorpusError(f"the chat template's text of {text!r} does not tokenize to the template's tokens")


@dataclass(frozen=True)
class Corpus:
    """A target model's probe corpus: the prompt bytes a probe posts, in corpus order, and its EOS token."""

    target_model: bytes  # the model id (bytes32) the corpus is committed for
    prompts: tuple[bytes, ...]
    eos_token: int  # the target tokenizer's end-of-sequence token (NO_EOS: none)

    @cached_property
    def root(self) -> bytes:
        return protocol.probe_corpus_root(self.prompts)

    @property
    def size(self) -> int:
        return len(self.prompts)

    def proof(self, index: int) -> list[bytes]:
        """The Merkle proof of prompt `index` for `startProbe`."""
        return protocol.probe_proof(self.prompts, index)

    def entry(self) -> tuple[bytes, int, int]:
        """(root, size, eos token): what `deploy_system(corpora={target: entry})` commits (`setCorpus`)."""
        return self.root, self.size, self.eos_token

    def matches(self, on_chain) -> bool:
        """Whether `ProbeScheduler.corpusOf(target)` (root, size, eos) is this corpus."""
        root, size, eos = on_chain
        return bytes(root) == self.root and int(size) == self.size and int(eos) == self.eos_token


def corpus_for(target_model: bytes, tokenizer, path: Path = PROMPTS_PATH) -> Corpus:
    """The corpus of target model id `target_model` whose tokenizer is `tokenizer` (each prompt checked)."""
    prompts = []
    for text in raw_prompts(path):
        rendered = render(tokenizer, text)
        check_rendering(tokenizer, text, rendered)
        prompts.append(rendered.encode("utf-8"))
    eos = tokenizer.eos_token_id
    return Corpus(bytes(target_model), tuple(prompts), NO_EOS if eos is None else int(eos))


def load_corpus(target_path, path: Path = PROMPTS_PATH) -> Corpus:
    """The corpus of the target checkpoint at `target_path` (its model id and tokenizer are read from it)."""
    from node.jobs.models import load_tokenizer, model_id

    return corpus_for(model_id(target_path), load_tokenizer(target_path), path)


def pair_corpora(pair: str | None = None) -> dict[bytes, tuple[bytes, int, int]]:
    """`deploy_system`'s `corpora` for the named pair ($VERISPEC_PAIR, else the default): its target model's."""
    from node.decoding.pairs import get_pair

    corpus = load_corpus(get_pair(pair).target)
    return {corpus.target_model: corpus.entry()}
