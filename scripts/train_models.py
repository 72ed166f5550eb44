"""Train the bundled model pair: a target p and a small draft q distilled from it.

Everything is offline and reproducible from --seed: the corpus is this
Python's own standard library sources, the tokenizer is trained here, and
both models are plain Hugging Face GPT-2 causal LMs saved with
save_pretrained. See docs/models.md for the figures of the committed pair.

    .venv/bin/python scripts/train_models.py            # writes models/
"""

import argparse
import json
import math
import pathlib
import platform
import sys
import time

import torch
import torch.nn.functional as F
import transformers
from transformers import GPT2Config, GPT2LMHeadModel

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from node.bench.prompts import HELDOUT_EVERY, SKIPPED_DIRS, corpus_files  # noqa: E402  (the split is shared)
from node.decoding.bpe import train_byte_level_bpe  # noqa: E402

EOS = "<|endoftext|>"
VOCAB_SIZE = 768
CONTEXT = 512  # the window both models are trained on, so every position embedding is learned
BATCH = 8
EVAL_WINDOWS = 128

TARGET_SHAPE = dict(n_embd=192, n_layer=4, n_head=6)
# About 11x fewer parameters. Distillation brings a draft close to a target this
# small: a 235k-parameter draft was within 0.15 nats/token of it; this one keeps
# the target clearly ahead (~0.3 nats/token) while alpha stays well above 0.6.
DRAFT_SHAPE = dict(n_embd=64, n_layer=2, n_head=2)


def read(files):
    return [p.read_text(encoding="utf-8", errors="replace") for p in files]


def train_tokenizer(texts):
    return train_byte_level_bpe(texts, VOCAB_SIZE, EOS, CONTEXT)


def encode(tokenizer, texts):
    """One token stream, files separated by EOS."""
    ids = []
    for encoding in tokenizer.backend_tokenizer.encode_batch(texts):
        ids += encoding.ids + [tokenizer.eos_token_id]
    return torch.tensor(ids)


def make_model(tokenizer, shape):
    config = GPT2Config(
        vocab_size=len(tokenizer),
        n_positions=CONTEXT,
        bos_token_id=tokenizer.eos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        # Far less than one epoch is seen, so there is nothing for dropout to regularize.
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
        **shape,
    )
    return GPT2LMHeadModel(config)


def count_params(model):
    return sum(p.numel() for p in model.parameters())


def lm_loss(model, windows):
    logits = model(windows).logits[:, :-1]
    return F.cross_entropy(logits.flatten(0, 1), windows[:, 1:].flatten())


def train(model, loss_fn, tokens, steps, peak_lr, generator, label):
    """AdamW with linear warmup and cosine decay, on random CONTEXT-token windows."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=peak_lr, betas=(0.9, 0.95), weight_decay=0.1)
    warmup = max(1, steps // 20)
    model.train()
    start = time.time()
    for step in range(steps):
        lr = peak_lr * min((step + 1) / warmup, 0.1 + 0.45 * (1 + math.cos(math.pi * step / steps)))
        for group in optimizer.param_groups:
            group["lr"] = lr
        offsets = torch.randint(len(tokens) - CONTEXT, (BATCH,), generator=generator)
        windows = torch.stack([tokens[o : o + CONTEXT] for o in offsets])
        loss = loss_fn(model, windows)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        if step % 50 == 0 or step == steps - 1:
            print(
                f"{label} step {step:4d}/{steps}  loss {loss.item():.3f}  lr {lr:.2e}  {time.time() - start:.0f}s",
                flush=True,
            )
    model.eval()


def distillation_loss(target):
    """Forward KL(p || q) at temperature 1.

    Acceptance per position is sum_t min(p, q) = 1 - TV(p, q), and Pinsker
    bounds TV by sqrt(KL(p||q) / 2), so matching the target's plain
    distribution is what raises alpha at temperature 1 directly.
    """

    def loss_fn(draft, windows):
        with torch.no_grad():
            target_logp = F.log_softmax(target(windows).logits, -1).flatten(0, 1)
        draft_logp = F.log_softmax(draft(windows).logits, -1).flatten(0, 1)
        return F.kl_div(draft_logp, target_logp, log_target=True, reduction="batchmean")

    return loss_fn


@torch.no_grad()
def evaluate(target, draft, tokens):
    """Held-out loss of each model and the pair's acceptance on non-overlapping windows."""
    windows = tokens[: EVAL_WINDOWS * CONTEXT].view(-1, CONTEXT)
    sums = dict(target_loss=0.0, draft_loss=0.0, alpha_t1=0.0, alpha_t0=0.0)
    for batch in windows.split(BATCH):
        p_logits, q_logits = target(batch).logits, draft(batch).logits
        labels = batch[:, 1:].flatten()
        sums["target_loss"] += F.cross_entropy(p_logits[:, :-1].flatten(0, 1), labels, reduction="sum").item()
        sums["draft_loss"] += F.cross_entropy(q_logits[:, :-1].flatten(0, 1), labels, reduction="sum").item()
        sums["alpha_t1"] += torch.minimum(p_logits.softmax(-1), q_logits.softmax(-1)).sum(-1).sum().item()
        sums["alpha_t0"] += (p_logits.argmax(-1) == q_logits.argmax(-1)).sum().item()
    predictions, positions = windows.numel() - len(windows), windows.numel()
    return dict(
        target_loss=sums["target_loss"] / predictions,
        draft_loss=sums["draft_loss"] / predictions,
        alpha_t1=sums["alpha_t1"] / positions,
        alpha_t0=sums["alpha_t0"] / positions,
        positions=positions,
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--out", type=pathlib.Path, default=pathlib.Path("models"))
    parser.add_argument("--target-steps", type=int, default=700)
    parser.add_argument("--draft-steps", type=int, default=500)
    args = parser.parse_args()

    started, started_cpu = time.time(), time.process_time()
    transformers.utils.logging.disable_progress_bar()
    torch.set_num_threads(2)
    torch.manual_seed(args.seed)
    generator = torch.Generator().manual_seed(args.seed)

    train_files, heldout_files = corpus_files()
    train_texts, heldout_texts = read(train_files), read(heldout_files)
    tokenizer = train_tokenizer(train_texts)
    train_tokens, heldout_tokens = encode(tokenizer, train_texts), encode(tokenizer, heldout_texts)
    print(
        f"corpus: {len(train_files)} train files ({len(train_tokens)} tokens), "
        f"{len(heldout_files)} held-out files ({len(heldout_tokens)} tokens)",
        flush=True,
    )

    target = make_model(tokenizer, TARGET_SHAPE)
    draft = make_model(tokenizer, DRAFT_SHAPE)
    print(f"target {count_params(target):,} params, draft {count_params(draft):,} params", flush=True)
    train(target, lm_loss, train_tokens, args.target_steps, 2e-3, generator, "target")
    train(draft, distillation_loss(target), train_tokens, args.draft_steps, 3e-3, generator, "draft")

    figures = evaluate(target, draft, heldout_tokens)
    elapsed = time.time() - started
    print(json.dumps(figures, indent=1), f"\ntotal {elapsed:.0f}s", flush=True)

    for name, model in (("target", target), ("draft", draft)):
        model.save_pretrained(args.out / name)
        tokenizer.save_pretrained(args.out / name)
    metrics = {
        "seed": args.seed,
        "corpus": {
            "source": f"Python {platform.python_version()} standard library .py files "
            f"(sorted by path, skipping directories {sorted(SKIPPED_DIRS)}); "
            f"every {HELDOUT_EVERY}th file held out",
            "train_files": len(train_files),
            "heldout_files": len(heldout_files),
            "train_tokens": len(train_tokens),
            "heldout_tokens": len(heldout_tokens),
        },
        "tokenizer": {"kind": "byte-level BPE", "vocab_size": len(tokenizer), "eos_token": EOS},
        "context_window": CONTEXT,
        "target": {
            "params": count_params(target),
            **TARGET_SHAPE,
            "steps": args.target_steps,
            "heldout_loss": figures["target_loss"],
        },
        "draft": {
            "params": count_params(draft),
            **DRAFT_SHAPE,
            "steps": args.draft_steps,
            "heldout_loss": figures["draft_loss"],
        },
        "alpha": {
            "temperature_1": figures["alpha_t1"],
            "temperature_0": figures["alpha_t0"],
            "heldout_positions": figures["positions"],
        },
        "training_seconds": round(elapsed, 1),
        # CPU time of both threads: unlike wall time, it does not grow when other
        # processes compete for the cores.
        "training_cpu_seconds": round(time.process_time() - started_cpu, 1),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
    }
    (args.out / "metrics.json").write_text(json.dumps(metrics, indent=2) + "\n")
    print(f"wrote {args.out}/target, {args.out}/draft, {args.out}/metrics.json")


if __name__ == "__main__":
    main()
