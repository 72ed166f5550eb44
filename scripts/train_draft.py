"""Distil a small draft for SmolLM2-135M-Instruct (models/smollm2-135m) within a bounded CPU budget.

    nice -n 19 .venv/bin/python scripts/train_draft.py --budget-minutes 36 --threads 1   # writes models/smol-draft/
    .venv/bin/python scripts/train_draft.py --extend --tv-weight 12 --budget-minutes 90  # one more round on it

Speculative decoding accepts a drafted token with probability min(1, p/q), so a position's acceptance is
Σ min(p, q) = 1 - TV(p, q): the draft must match the target's whole distribution. Hard labels teach q the text,
not p (ten minutes of them reached α ≈ 0.08), and the target's forward costs ~7× a draft training step, so the
target is run once per position and what it computed is cached:

1. label: at every position of windows of Python standard library source (scripts/train_models.py's corpus, in the
   target's tokenizer), the target's final hidden state h (after its last norm) and its top-K log-probabilities;
2. head: the target's logits are h Eᵀ (E: its tied embeddings, 49,152 × 576). The rank-r head that best keeps
   them over the labelled h is found in closed form: with C = E[hᵀh], the top r left singular vectors U of
   C^½ Eᵀ give the head H = E C^½ U (49,152 × r) and the hidden state it expects, z = h C^-½ U. On held-out windows
   these logits (z Hᵀ) keep α ≈ 0.54 / 0.62 / 0.70 at T = 1 for r = 128 / 192 / 256: the ceiling of an r-wide draft
   that would predict z exactly; r = 192 (256 made a 32 MB fp16 draft, over the 30 MB allowed for a committed
   model; 192 is ~23 MB of weights, ~26 MB with the tokenizer files). The draft's tied embeddings are H, frozen;
3. regress: the draft's final hidden state onto z (mean squared error): no 49,152-wide softmax per step, ~15× cheaper
   than distilling through the head, so the labels are seen many times;
4. distil: the last share of the budget, cross-entropy of q against p on the cached top-K plus one bucket for the
   rest of the vocabulary (the forward KL up to p's entropy), through the frozen head; with --tv-weight w, plus w
   times the rejection rate 1 - Σ min(p, q) on those K + 1 outcomes (the draft is too small to match p everywhere:
   the forward KL spends its capacity covering p's tail, the rejection rate on where the mass overlaps);
5. save in fp16 (exactly upcast to fp32 at load, where nodes compute) with the target's tokenizer files.

The vocabulary stays whole (the engine compares p and q over one vocabulary). Seeded (windows, initialisation,
batches); each stage's step count is fixed from its first steps' speed and kept in the checkpoint, so a resumed run
(the default when models/.cache/draft-train/ holds one) keeps its schedule. --extend continues a finished run: more
labels (the seeded window order goes on where it stopped), then one more distillation round (distil-2, ...) over
all of them from the checkpoint's draft, its head unchanged (a head refitted on more labels would not fit the body).
A round cut by its budget is over: the next --extend starts a new one; a round killed mid-way is resumed.
α at T = 1 and T = 0 is exact: on held-out positions against the target's stored logits during training, and
recomputed with the target at the end (8,192 positions). The curve goes to docs/draft_training.png (--plot), the
figures to models/smol-draft/training.json.
"""

from __future__ import annotations

import argparse
import json
import math
import pathlib
import shutil
import sys
import sysconfig
import time

import torch
import torch.nn.functional as F
import transformers
from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaConfig, LlamaForCausalLM

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TARGET = ROOT / "models" / "smollm2-135m"
OUT = ROOT / "models" / "smol-draft"
WORK = ROOT / "models" / ".cache" / "draft-train"
CURVE_PLOT = ROOT / "docs" / "draft_training.png"
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja")

CONTEXT = 256
TOP_K = 32
BATCH = 8
ROUND_PEAK_LR = 3e-4  # an --extend round starts from a trained draft: a lower peak than the first round's 5e-4
DISTIL_BATCH = 2  # windows a distillation step: its 49,152-wide softmax costs ~10x a regression step's window
HELDOUT_WINDOWS = 32  # exact α at the end (8,192 positions); the curve uses the first 2 (their logits are stored)
CURVE_WINDOWS = 2
SKIPPED_DIRS = {"site-packages", "test", "tests", "idle_test", "encodings", "pydoc_data"}
HELDOUT_EVERY = 10
# Rank 192 (not 256): with the tokenizer files the folder stays under the 30 MB limit on committed models (~26 MB)
DRAFT_SHAPE = dict(hidden_size=192, intermediate_size=576, num_hidden_layers=4, num_attention_heads=4)


def corpus(tokenizer):
    """Train and held-out token streams: the standard library's sources, every 10th file held out."""
    root = pathlib.Path(sysconfig.get_paths()["stdlib"])
    files = sorted(p for p in root.rglob("*.py") if not SKIPPED_DIRS & set(p.relative_to(root).parts))
    streams = {"train": [], "heldout": []}
    for index, path in enumerate(files):
        text = path.read_text(encoding="utf-8", errors="replace")
        ids = tokenizer(text, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
        streams["heldout" if index % HELDOUT_EVERY == HELDOUT_EVERY - 1 else "train"] += ids
    return {name: torch.tensor(ids) for name, ids in streams.items()}


def windows(stream: torch.Tensor, count: int, generator) -> torch.Tensor:
    """`count` distinct CONTEXT-token windows of `stream`, in a seeded order."""
    whole = stream[: len(stream) // CONTEXT * CONTEXT].view(-1, CONTEXT)
    order = torch.randperm(len(whole), generator=generator)[:count]
    return whole[order]


@torch.inference_mode()
def target_outputs(target, batch: torch.Tensor):
    """The target's final hidden states (after its last norm: the logits are these times Eᵀ) and top-K log-probs."""
    out = target(batch, output_hidden_states=True)
    values, indices = F.log_softmax(out.logits.float(), -1).topk(TOP_K, -1)
    return out.hidden_states[-1].half(), values.half(), indices.int(), out.logits


def label(target, stream, generator, deadline: float, state: dict, path: pathlib.Path):
    """Append the target's outputs over fresh windows until `deadline`; saved every few windows (resumable)."""
    pool = windows(stream, len(stream) // CONTEXT, generator)
    done = sum(len(chunk) for chunk in state["tokens"])
    while done < len(pool) and time.time() < deadline:
        batch = pool[done : done + 2]
        hidden, values, indices, _ = target_outputs(target, batch)
        for name, value in zip(("tokens", "hidden", "values", "indices"), (batch, hidden, values, indices)):
            state[name].append(value)
        done += len(batch)
        if len(state["tokens"]) % 10 == 0:
            torch.save(state, path)
            print(f"label: {done} windows ({done * CONTEXT} positions) {time.time() - START:.0f}s", flush=True)
    torch.save(state, path)


def low_rank_head(embeddings: torch.Tensor, hidden: torch.Tensor, rank: int):
    """(H, M): the rank-`rank` head H (vocab × rank) and the map M (576 × rank) with z = h M, such that z Hᵀ is the
    best rank-`rank` approximation of the logits h Eᵀ in the mean square over the labelled h. Scaled so that z has
    unit mean square per coordinate (the draft's RMS-normed output starts at that scale)."""
    h = hidden.reshape(-1, hidden.shape[-1]).double()
    covariance = h.T @ h / len(h) + 1e-6 * torch.eye(h.shape[1], dtype=h.dtype)
    eigenvalues, eigenvectors = torch.linalg.eigh(covariance)
    root = eigenvectors @ torch.diag(eigenvalues.sqrt()) @ eigenvectors.T
    inverse_root = eigenvectors @ torch.diag(eigenvalues.rsqrt()) @ eigenvectors.T
    u, _, _ = torch.linalg.svd(root @ embeddings.double().T, full_matrices=False)
    head, to_z = embeddings.double() @ root @ u[:, :rank], inverse_root @ u[:, :rank]
    scale = (h @ to_z).pow(2).mean().sqrt()
    return (head * scale).float(), (to_z / scale).float()


def make_draft(target, head: torch.Tensor, seed: int, intermediate_size: int | None = None) -> LlamaForCausalLM:
    config = target.config
    shape = {**DRAFT_SHAPE, "intermediate_size": intermediate_size or DRAFT_SHAPE["intermediate_size"]}
    draft_config = LlamaConfig(
        vocab_size=config.vocab_size,
        num_key_value_heads=DRAFT_SHAPE["num_attention_heads"],
        max_position_embeddings=config.max_position_embeddings,
        rope_parameters=dict(config.rope_parameters) if getattr(config, "rope_parameters", None) else None,
        rms_norm_eps=config.rms_norm_eps,
        tie_word_embeddings=True,
        bos_token_id=config.bos_token_id,
        eos_token_id=config.eos_token_id,
        pad_token_id=config.pad_token_id,
        **shape,
    )
    torch.manual_seed(seed)
    draft = LlamaForCausalLM(draft_config)
    with torch.no_grad():
        draft.get_input_embeddings().weight.copy_(head)
    draft.tie_weights()
    draft.get_input_embeddings().weight.requires_grad_(False)  # the closed-form head stays as computed
    return draft


@torch.no_grad()
def widen_mlp(draft: LlamaForCausalLM, target, size: int, seed: int) -> LlamaForCausalLM:
    """The same function with `size`-wide MLPs: the new rows of gate and up at their initialisation, the new
    columns of down at zero (they add nothing until trained): more capacity for a draft already trained."""
    wider = make_draft(target, draft.get_input_embeddings().weight, seed, intermediate_size=size)
    new = wider.state_dict()
    for name, value in draft.state_dict().items():
        if new[name].shape == value.shape:
            new[name].copy_(value)
        elif name.endswith("down_proj.weight"):
            new[name].zero_()
            new[name][:, : value.shape[1]] = value
        else:  # gate_proj, up_proj: one row per MLP unit
            new[name][: value.shape[0]] = value
    return wider


def distillation_loss(logits, values, indices, tv_weight: float = 0.0):
    """Cross-entropy of q against p on p's top-K tokens and one bucket for the rest of the vocabulary, plus
    `tv_weight` times 1 - Σ min(p, q) on the same K + 1 outcomes: the rejection rate at T = 1 itself, which a
    draft too small to match p everywhere should trade for (the forward KL spreads q over all of p's support)."""
    logq = F.log_softmax(logits.float(), -1)
    p_top = values.float().exp()
    logq_top = logq.gather(-1, indices.long())
    p_rest = (1 - p_top.sum(-1)).clamp_min(0)
    q_rest = (1 - logq_top.exp().sum(-1)).clamp_min(1e-6)
    cross_entropy = -((p_top * logq_top).sum(-1) + p_rest * q_rest.log()).mean()
    if not tv_weight:
        return cross_entropy
    overlap = torch.minimum(p_top, logq_top.exp()).sum(-1) + torch.minimum(p_rest, q_rest)
    return cross_entropy + tv_weight * (1 - overlap).mean()


@torch.no_grad()
def alpha(p_logits: torch.Tensor, q_logits: torch.Tensor) -> tuple[float, float]:
    """α at T = 1 (mean Σ min(p, q)) and at T = 0 (argmax agreement) over all positions."""
    p, q = p_logits.float().softmax(-1), q_logits.float().softmax(-1)
    t1 = torch.minimum(p, q).sum(-1).mean().item()
    return t1, (p_logits.argmax(-1) == q_logits.argmax(-1)).float().mean().item()


@torch.no_grad()
def exact_figures(target, draft, tokens: torch.Tensor) -> dict:
    sums = dict(t1=0.0, t0=0.0, target_loss=0.0, draft_loss=0.0)
    for batch in tokens.split(2):
        p_logits, q_logits = target(batch).logits.float(), draft(batch).logits.float()
        t1, t0 = alpha(p_logits, q_logits)
        sums["t1"] += t1 * batch.numel()
        sums["t0"] += t0 * batch.numel()
        labels = batch[:, 1:].flatten()
        sums["target_loss"] += F.cross_entropy(p_logits[:, :-1].flatten(0, 1), labels, reduction="sum").item()
        sums["draft_loss"] += F.cross_entropy(q_logits[:, :-1].flatten(0, 1), labels, reduction="sum").item()
    positions, predictions = tokens.numel(), tokens.numel() - len(tokens)
    return dict(
        alpha_t1=sums["t1"] / positions,
        alpha_t0=sums["t0"] / positions,
        target_loss=sums["target_loss"] / predictions,
        draft_loss=sums["draft_loss"] / predictions,
        positions=positions,
    )


STAGE_COLORS = ("tab:blue", "tab:purple", "tab:orange", "tab:brown", "tab:pink", "tab:olive")


def plot_curve(curve: list[dict], path: pathlib.Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.4))
    minutes = [point["seconds"] / 60 for point in curve]
    stages = list(dict.fromkeys(point["stage"] for point in curve))
    for stage in stages:
        points = [(m, c["loss"]) for m, c in zip(minutes, curve) if c["stage"] == stage]
        color = STAGE_COLORS[stages.index(stage) % len(STAGE_COLORS)]
        left.plot(*zip(*points), color=color, label=f"{stage} loss")
    left.set_yscale("log")
    left.set_xlabel("wall minutes (labelling included)")
    left.set_title("loss (regress: MSE on z; distil: top-K CE; later rounds: + w × rejection)", fontsize=9)
    left.legend(fontsize=8, frameon=False)
    right.plot(minutes, [point["alpha_t1"] for point in curve], color="tab:red", label="α at T = 1")
    right.plot(minutes, [point["alpha_t0"] for point in curve], color="tab:green", label="α at T = 0")
    right.axhline(0.5, color="grey", linestyle=":", linewidth=1)
    right.set_ylim(0, 1)
    right.set_xlabel("wall minutes (labelling included)")
    right.set_title(f"held-out acceptance ({CURVE_WINDOWS * CONTEXT} positions, exact)")
    right.legend(fontsize=8, frameon=False)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


START = time.time()


def stage_names(state: dict) -> list[str]:
    """The stages a run's state has started, in order: regress, distil, then any --extend rounds (distil-2, ...)."""
    return [name for name, value in state.items() if isinstance(value, dict) and "step" in value]


def round_over(state: dict, name: str) -> bool:
    """Whether distillation round `name` is over: all its steps ran or, for an --extend round, its budget cut it (its
    run ended as asked; the next --extend starts a new round). A round killed mid-way is not over: it is resumed."""
    stage = state.get(name, {})
    return stage.get("step") == stage.get("total", -1) or (name != "distil" and stage.get("cut", False))


def run_stage(name, draft, optimizer, state, steps_for, loss_of, batch, batches, curve_eval, checkpoint, stop_at):
    """One stage's AdamW steps (warmup, cosine decay), its step count fixed from its first 5 steps' speed.
    Cut at `stop_at` all the same: the machine is shared, and steps slow down when it fills up."""
    stage = state.setdefault(name, dict(step=0, total=None))
    peak = state["lr"][name]
    started = time.time()
    while stage["total"] is None or stage["step"] < stage["total"]:
        if time.time() > stop_at:
            print(f"{name}: cut at step {stage['step']}/{stage['total']} (out of time)", flush=True)
            stage["cut"] = True
            break
        if stage["total"] is None and stage["step"] == 5:
            per_step = (time.time() - started) / 5
            stage["total"] = max(10, int(steps_for() / per_step))
            print(f"{name}: {per_step:.2f} s a step, {stage['total']} steps", flush=True)
        total = stage["total"] or 1000
        warmup = max(1, total // 20)
        fraction = stage["step"] / total
        lr = peak * min((stage["step"] + 1) / warmup, 0.05 + 0.475 * (1 + math.cos(math.pi * fraction)))
        for group in optimizer.param_groups:
            group["lr"] = lr
        loss = loss_of(torch.randint(state["windows"], (batch,), generator=batches))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_([p for p in draft.parameters() if p.requires_grad], 1.0)
        optimizer.step()
        stage["step"] += 1
        if stage["step"] % 50 == 0 or stage["step"] == stage["total"] or time.time() > stop_at:
            t1, t0 = curve_eval()
            point = dict(stage=name, step=stage["step"], loss=loss.item(), alpha_t1=t1, alpha_t0=t0)
            state["curve"].append({**point, "seconds": round(time.time() - START + state.get("clock", 0))})
            print(
                f"{name} {stage['step']}/{stage['total']} loss {loss.item():.4f} α {t1:.3f} (T=1) {t0:.3f} (T=0) "
                f"lr {lr:.1e} {time.time() - START:.0f}s",
                flush=True,
            )
            checkpoint()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--budget-minutes", type=float, default=36.0, help="wall time for all stages")
    parser.add_argument("--label-share", type=float, default=0.45, help="share of the budget spent labelling")
    parser.add_argument("--distil-share", type=float, default=0.5, help="share of the training time spent distilling")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--target", type=pathlib.Path, default=TARGET)
    parser.add_argument("--out", type=pathlib.Path, default=OUT)
    parser.add_argument("--work", type=pathlib.Path, default=WORK, help="labels and checkpoint (resumed from)")
    parser.add_argument("--plot", type=pathlib.Path, default=CURVE_PLOT, help="where the training curve goes")
    parser.add_argument("--fresh", action="store_true", help="ignore the labels and checkpoint in --work")
    parser.add_argument(
        "--extend",
        action="store_true",
        help="continue the finished draft in --work: label more windows for --label-share of this budget, then one "
        "more distillation round (a fresh cosine schedule) over all the labels for the rest; the head stays",
    )
    parser.add_argument(
        "--tv-weight", type=float, default=0.0, help="weight of the rejection rate 1 - Σ min(p, q) in distillation"
    )
    parser.add_argument(
        "--widen-mlp", type=int, default=None, help="with --extend: the new round's MLP width (new units start at 0)"
    )
    args = parser.parse_args(argv)
    if args.widen_mlp and not args.extend:
        parser.error("--widen-mlp widens a trained draft: it needs --extend")
    if args.extend and args.fresh:
        parser.error("--extend continues the run in --work; --fresh would delete it")

    labels_path = args.work / "labels.pt"
    # one checkpoint a shape: the labels serve any shape, a checkpoint only its own
    checkpoint_path = args.work / f"checkpoint-{DRAFT_SHAPE['hidden_size']}x{DRAFT_SHAPE['num_hidden_layers']}.pt"
    if args.extend and not (labels_path.exists() and checkpoint_path.exists()):
        parser.error(f"--extend needs a finished run in {args.work} (labels.pt and {checkpoint_path.name})")
    deadline = START + args.budget_minutes * 60
    torch.set_num_threads(args.threads)
    transformers.utils.logging.disable_progress_bar()
    transformers.utils.logging.set_verbosity_error()
    if args.fresh and args.work.exists():
        shutil.rmtree(args.work)
    args.work.mkdir(parents=True, exist_ok=True)

    target = AutoModelForCausalLM.from_pretrained(args.target, dtype=torch.float32).eval()
    tokenizer = AutoTokenizer.from_pretrained(args.target)
    streams = corpus(tokenizer)
    generator = torch.Generator().manual_seed(args.seed)
    heldout_tokens = windows(streams["heldout"], HELDOUT_WINDOWS, generator)
    print(f"corpus: {len(streams['train'])} train, {len(streams['heldout'])} held-out tokens", flush=True)

    labels = torch.load(labels_path) if labels_path.exists() else dict(tokens=[], hidden=[], values=[], indices=[])
    if "curve_logits" not in labels:
        labels["curve_logits"] = target_outputs(target, heldout_tokens[:CURVE_WINDOWS])[3].half()
    if args.extend:
        labels["done"] = False  # the window order is seeded, so labelling goes on where it stopped
    if not labels.get("done"):
        label_deadline = START + args.label_share * args.budget_minutes * 60
        label(target, streams["train"], generator, label_deadline, labels, labels_path)
        labels["done"] = True
        torch.save(labels, labels_path)
    tokens, values, indices = (torch.cat(labels[n]) for n in ("tokens", "values", "indices"))
    print(f"labels: {len(tokens)} windows ({tokens.numel()} positions)", flush=True)

    if args.extend:
        # the draft's frozen head comes from the checkpoint: a head refitted on more labels would not match its body
        head, z, ceiling = torch.zeros(target.config.vocab_size, DRAFT_SHAPE["hidden_size"]), None, None
    else:
        hidden = torch.cat(labels["hidden"])
        head, to_z = low_rank_head(target.get_input_embeddings().weight.detach(), hidden, DRAFT_SHAPE["hidden_size"])
        z = (hidden.float() @ to_z).half()
        del hidden
        ceiling = alpha(
            labels["curve_logits"], (target_outputs(target, heldout_tokens[:CURVE_WINDOWS])[0].float() @ to_z) @ head.T
        )
        print(
            f"rank-{DRAFT_SHAPE['hidden_size']} head: α {ceiling[0]:.3f} (T=1) {ceiling[1]:.3f} (T=0) "
            "if the draft predicted z exactly",
            flush=True,
        )
    del labels["hidden"]

    saved = torch.load(checkpoint_path, weights_only=False) if checkpoint_path.exists() else None
    draft = make_draft(target, head, args.seed, saved and saved["state"].get("intermediate_size"))
    new_optimizer = lambda: torch.optim.AdamW(  # noqa: E731
        [p for p in draft.parameters() if p.requires_grad], lr=1e-3, betas=(0.9, 0.95), weight_decay=0.0
    )
    optimizer = new_optimizer()
    batches = torch.Generator().manual_seed(args.seed + 1)
    state = dict(windows=len(tokens), curve=[], lr=dict(regress=2e-3, distil=5e-4))
    state["head_ceiling"] = ceiling and dict(alpha_t1=ceiling[0], alpha_t0=ceiling[1])
    if saved:
        draft.load_state_dict(saved["draft"])
        optimizer.load_state_dict(saved["optimizer"])
        batches.set_state(saved["batches"])
        state = saved["state"]
        # this run's clock goes on from the last point (a resumed round's points came before this run's start)
        state["clock"] = state["curve"][-1]["seconds"] if state["curve"] else 0
        print(f"resumed: {json.dumps({k: v for k, v in state.items() if k in stage_names(state)})}", flush=True)
    rounds = [name for name in stage_names(state) if name.startswith("distil")] or ["distil"]
    if args.extend and not round_over(state, "distil"):
        parser.error(f"--extend needs a finished run in {args.work}: run without --extend to finish it first")
    if args.extend and round_over(state, rounds[-1]):
        # a new round when the last one is over; an interrupted --extend resumes its own round
        rounds.append(f"distil-{len(rounds) + 1}")
        state["lr"][rounds[-1]] = ROUND_PEAK_LR
        state["windows"] = len(tokens)
        print(f"{rounds[-1]}: {len(tokens)} windows, the head and body from the checkpoint", flush=True)
        if args.widen_mlp and args.widen_mlp != draft.config.intermediate_size:
            draft = widen_mlp(draft, target, args.widen_mlp, args.seed)
            optimizer = new_optimizer()  # new shapes: the round's warmup starts Adam's moments again
            state["intermediate_size"] = args.widen_mlp
            print(f"{rounds[-1]}: MLPs widened to {args.widen_mlp}", flush=True)
    previous = json.loads((args.out / "training.json").read_text()) if (args.out / "training.json").exists() else {}
    if state.get("head_ceiling") is None:  # checkpoints from before the ceiling was kept in them
        state["head_ceiling"] = previous.get("head_ceiling")

    def checkpoint():
        torch.save(
            dict(draft=draft.state_dict(), optimizer=optimizer.state_dict(), batches=batches.get_state(), state=state),
            checkpoint_path,
        )

    def curve_eval():
        draft.eval()
        with torch.no_grad():
            figures = alpha(labels["curve_logits"], draft(heldout_tokens[:CURVE_WINDOWS]).logits)
        draft.train()
        return figures

    def regress(pick):
        out = draft.model(tokens[pick]).last_hidden_state
        return F.mse_loss(out, z[pick].float())

    def distil(pick):
        return distillation_loss(draft(tokens[pick]).logits, values[pick], indices[pick], args.tv_weight)

    draft.train()
    distil_at = deadline - 90 - args.distil_share * (deadline - 90 - time.time())
    common = dict(draft=draft, optimizer=optimizer, state=state, batches=batches, curve_eval=curve_eval)
    if rounds[-1] == "distil":
        run_stage(
            "regress",
            steps_for=lambda: distil_at - time.time(),
            loss_of=regress,
            batch=BATCH,
            **common,
            checkpoint=checkpoint,
            stop_at=distil_at + 30,
        )
    run_stage(
        rounds[-1],
        steps_for=lambda: deadline - 90 - time.time(),
        loss_of=distil,
        batch=DISTIL_BATCH,
        **common,
        checkpoint=checkpoint,
        stop_at=deadline - 60,
    )
    checkpoint()

    draft.eval()
    stored = draft.half()  # fp16 on disk (half the size); nodes upcast to fp32, exactly
    args.out.mkdir(parents=True, exist_ok=True)
    stored.save_pretrained(args.out)
    for name in TOKENIZER_FILES:
        if (args.target / name).exists():
            shutil.copy(args.target / name, args.out / name)
    reloaded = AutoModelForCausalLM.from_pretrained(args.out, dtype=torch.float32).eval()
    figures = exact_figures(target, reloaded, heldout_tokens)
    metrics = dict(
        seed=args.seed,
        budget_minutes=args.budget_minutes,
        threads=args.threads,
        wall_seconds=round(time.time() - START),
        labelled_positions=tokens.numel(),
        top_k=TOP_K,
        context=CONTEXT,
        steps={name: state[name]["step"] for name in stage_names(state)},
        planned_steps={name: state[name]["total"] for name in stage_names(state)},
        params=sum(p.numel() for p in reloaded.parameters()),
        **{**DRAFT_SHAPE, "intermediate_size": draft.config.intermediate_size},
        head_ceiling=state["head_ceiling"],
        heldout=figures,
        corpus="Python standard library .py files (every 10th held out), the target's tokenizer",
        curve=state["curve"],
        **({"before_extend": {k: v for k, v in previous.items() if k != "curve"}} if args.extend else {}),
        torch=torch.__version__,
        transformers=transformers.__version__,
    )
    (args.out / "training.json").write_text(json.dumps(metrics, indent=1) + "\n")
    if state["curve"]:
        plot_curve(state["curve"], args.plot)
    print(json.dumps(figures), flush=True)
    print(f"wrote {args.out} ({metrics['params']:,} parameters) in {metrics['wall_seconds']} s", flush=True)


if __name__ == "__main__":
    main()
