"""The model id of docs/protocol.md §2: a bytes32 naming a checkpoint's weights and tokenizer.

sha256 over a canonical serialization, so it is the same on every machine
and every run for the same files:

    b"verispec-model-id/v1\\n"
    for each weight tensor, in sorted name order (all *.safetensors files of the checkpoint):
        name, dtype, shape, then the tensor's raw little-endian bytes
    for each tokenizer file present, in the order of TOKENIZER_FILES:
        file name, then its content (JSON re-serialized with sorted keys and no whitespace)

Of tokenizer_config.json and special_tokens_map.json only the special-token
entries (keys ending in "_token" or "_tokens") count: the rest is
bookkeeping that transformers rewrites on every save (is_local, ...).

Every string and byte field is length-prefixed (8 bytes, big-endian), so no
two different checkpoints serialize to the same stream. The id names the
checkpoint as stored (its dtype included), not the dtype a node happens to
run it in: a bf16 run of an fp32 checkpoint has the fp32 checkpoint's id.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import pathlib
import tempfile

import torch
from safetensors import SafetensorError, safe_open

TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "vocab.json",
    "merges.txt",
    "tokenizer.model",
)
_SPECIAL_TOKEN_FILES = ("tokenizer_config.json", "special_tokens_map.json")
_MAGIC = b"verispec-model-id/v1\n"


class CheckpointError(ValueError):
    """A checkpoint's weight file cannot be read (empty, truncated, not safetensors); the message names the file.

    The engine's own error type, so that whoever drives it (a node, the CLI) can report a broken checkpoint in one
    line instead of safetensors' bare "header too small".
    """


def open_weights(file: pathlib.Path):
    """`safe_open` of one *.safetensors file, refused with a `CheckpointError` that says what is wrong with it."""
    try:
        if file.stat().st_size == 0:
            raise CheckpointError(f"{file} is empty (0 bytes)")
        return safe_open(str(file), framework="pt")
    except SafetensorError as exc:
        reason = str(exc).removeprefix("Error while deserializing header: ")
        raise CheckpointError(f"{file} is not a valid safetensors file: {reason}") from None
    except OSError as exc:
        raise CheckpointError(f"cannot read {file}: {exc.strerror or exc}") from None


def check_weights(path: str | pathlib.Path) -> None:
    """Refuse a checkpoint directory whose *.safetensors files are empty or unreadable (before transformers
    tries them)."""
    for file in sorted(pathlib.Path(path).glob("*.safetensors")):
        with open_weights(file):
            pass


def _field(data: bytes) -> bytes:
    return len(data).to_bytes(8, "big") + data


def canonical_json(raw: bytes) -> bytes:
    return json.dumps(json.loads(raw), sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def tokenizer_digest(path: str | pathlib.Path) -> bytes:
    """sha256 of the canonical tokenizer files alone: two models share a tokenizer iff these match."""
    digest = hashlib.sha256()
    _hash_tokenizer(digest, pathlib.Path(path))
    return digest.digest()


def _hash_tokenizer(digest, path: pathlib.Path) -> None:
    found = False
    for name in TOKENIZER_FILES:
        file = path / name
        if file.exists():
            found = True
            raw = file.read_bytes()
            if name in _SPECIAL_TOKEN_FILES:
                raw = json.dumps({k: v for k, v in json.loads(raw).items() if k.endswith(("_token", "_tokens"))})
            digest.update(_field(name.encode()) + _field(canonical_json(raw) if name.endswith(".json") else raw))
    if not found:
        raise FileNotFoundError(f"no tokenizer files ({', '.join(TOKENIZER_FILES)}) in {path}")


def model_id(path: str | pathlib.Path) -> bytes:
    """The bytes32 model id of the checkpoint directory `path` (safetensors weights + tokenizer files)."""
    path = pathlib.Path(path)
    files = sorted(path.glob("*.safetensors"))
    if not files:
        raise FileNotFoundError(f"no *.safetensors weights in {path}")
    digest = hashlib.sha256(_MAGIC)
    with contextlib.ExitStack() as stack:
        handles = [stack.enter_context(open_weights(file)) for file in files]
        where = {}
        for handle in handles:
            for name in handle.keys():  # noqa: SIM118 - a safetensors handle, not a dict
                if name in where:
                    raise ValueError(f"tensor {name} appears in two weight files of {path}")
                where[name] = handle
        for name in sorted(where):
            try:
                tensor = where[name].get_tensor(name).contiguous()
            except SafetensorError as exc:
                raise CheckpointError(f"tensor {name} of {path} cannot be read: {exc}") from None
            raw = tensor.reshape(-1).view(torch.uint8).numpy().tobytes()
            shape = json.dumps(list(tensor.shape)).encode()
            digest.update(_field(name.encode()) + _field(str(tensor.dtype).encode()) + _field(shape) + _field(raw))
    _hash_tokenizer(digest, path)
    return digest.digest()


def model_id_of(model, tokenizer) -> bytes:
    """The id of an in-memory model: that of the checkpoint `save_pretrained` writes for it."""
    with tempfile.TemporaryDirectory() as tmp:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        return model_id(tmp)
