"""scripts/train_draft.py: the distillation loss (cross-entropy on the cached top-K plus a bucket, and the rejection
rate term of --tv-weight) against a direct computation, and its CLI's bad input (one line, before any model loads)."""

from __future__ import annotations

import pathlib
import subprocess
import sys

import pytest
import torch

ROOT = pathlib.Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "train_draft.py"
sys.path.insert(0, str(ROOT / "scripts"))


def approx(value: float):
    return pytest.approx(value, rel=1e-3, abs=1e-3)  # p is stored in fp16, as labelling stores it


def cached_labels(p_logits: torch.Tensor, k: int):
    """What labelling stores: the target's top-k log-probabilities and their token ids."""
    values, indices = torch.log_softmax(p_logits, -1).topk(k, -1)
    return values.half(), indices.int()


def test_the_loss_is_the_top_k_cross_entropy_plus_w_times_the_rejection_rate_over_the_k_plus_one_outcomes():
    import train_draft

    generator = torch.Generator().manual_seed(7)
    p_logits, q_logits = torch.randn(3, 5, 40, generator=generator) * 2, torch.randn(3, 5, 40, generator=generator)
    values, indices = cached_labels(p_logits, k=6)
    p_top, q = values.double().exp(), q_logits.double().softmax(-1)
    q_top = q.gather(-1, indices.long())
    p_rest, q_rest = 1 - p_top.sum(-1), 1 - q_top.sum(-1)
    cross_entropy = -((p_top * q_top.log()).sum(-1) + p_rest * q_rest.log()).mean()
    rejection = 1 - (torch.minimum(p_top, q_top).sum(-1) + torch.minimum(p_rest, q_rest)).mean()

    assert train_draft.distillation_loss(q_logits, values, indices).item() == approx(cross_entropy.item())
    for weight in (1.0, 12.0):
        loss = train_draft.distillation_loss(q_logits, values, indices, weight).item()
        assert loss == approx(cross_entropy.item() + weight * rejection.item())
    assert 0 < rejection.item() < 1


def test_a_draft_equal_to_the_target_has_no_rejection_and_the_term_pulls_q_towards_p():
    import train_draft

    p_logits = torch.randn(2, 4, 30, generator=torch.Generator().manual_seed(3))
    values, indices = cached_labels(p_logits, k=29)  # all but one token: the bucket is that token alone
    same = train_draft.distillation_loss(p_logits, values, indices, 50.0) - train_draft.distillation_loss(
        p_logits, values, indices
    )
    assert abs(same.item()) / 50.0 < 1e-3  # a rejection rate of 0 but for p's fp16 rounding

    q_logits = torch.zeros_like(p_logits, requires_grad=True)
    before = train_draft.distillation_loss(q_logits, values, indices, 50.0)
    before.backward()
    with torch.no_grad():
        stepped = q_logits - 0.5 * q_logits.grad
    assert train_draft.distillation_loss(stepped, values, indices, 50.0) < before


@pytest.mark.long_run
def test_bad_flags_are_one_line_before_any_model_loads(tmp_path):
    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=60, cwd=str(ROOT)
        )

    proc = run("--extend", "--fresh", "--work", str(tmp_path))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines()[-1].endswith("--fresh would delete it")
    proc = run("--extend", "--work", str(tmp_path / "empty"))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "--extend needs a finished run in" in proc.stderr.strip().splitlines()[-1]
    assert not (tmp_path / "empty" / "labels.pt").exists()


def test_widening_a_drafts_mlps_keeps_its_function_and_the_new_units_can_learn():
    import train_draft
    from transformers import LlamaConfig

    class Target:  # make_draft reads only the target's config (vocabulary, positions, norms, special tokens)
        config = LlamaConfig(vocab_size=64, max_position_embeddings=128, bos_token_id=1, eos_token_id=2)

    head = torch.randn(64, train_draft.DRAFT_SHAPE["hidden_size"], generator=torch.Generator().manual_seed(5))
    draft = train_draft.make_draft(Target, head, seed=1).eval()
    wider = train_draft.widen_mlp(draft, Target, 2 * draft.config.intermediate_size, seed=1).eval()
    tokens = torch.randint(0, 64, (2, 16), generator=torch.Generator().manual_seed(6))
    with torch.no_grad():
        assert torch.equal(draft(tokens).logits, wider(tokens).logits)
    assert wider.config.intermediate_size == 2 * draft.config.intermediate_size
    assert not wider.get_input_embeddings().weight.requires_grad  # the head stays frozen

    wider.train()
    wider(tokens).logits.logsumexp(-1).mean().backward()
    down = wider.model.layers[0].mlp.down_proj.weight
    assert down.grad[:, draft.config.intermediate_size :].abs().sum() > 0


def test_an_extend_round_cut_by_its_budget_is_over_and_one_killed_mid_way_is_resumed():
    import train_draft

    first = {"regress": {"step": 10, "total": 10}, "distil": {"step": 20, "total": 20}}
    assert train_draft.round_over(first, "distil")
    assert not train_draft.round_over({**first, "distil": {"step": 12, "total": 20}}, "distil")
    # the first round cut by its budget still has its schedule to finish before any --extend
    assert not train_draft.round_over({**first, "distil": {"step": 12, "total": 20, "cut": True}}, "distil")
    assert train_draft.round_over({**first, "distil-2": {"step": 30, "total": 40, "cut": True}}, "distil-2")
    assert not train_draft.round_over({**first, "distil-2": {"step": 30, "total": 40}}, "distil-2")
    assert not train_draft.round_over({**first, "distil-2": {"step": 5, "total": None}}, "distil-2")
