"""The byte-level BPE tokenizer of the bundled model pair and of the tests' tiny pair, trained from texts."""

from __future__ import annotations

from collections.abc import Iterable

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast


def train_byte_level_bpe(texts: Iterable[str], vocab_size: int, eos: str, max_length: int) -> PreTrainedTokenizerFast:
    """Byte-level BPE, so any text (and any byte) can be encoded; `eos` is its one special token."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[eos],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=eos, model_max_length=max_length)
