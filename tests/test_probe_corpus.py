"""The shipped probe corpus (node/probes/corpus.py) against the contract: the root a probing deployment commits is
the corpus's, a probe starts with the shipped prompt at the drawn index and its proof, and the prompt bytes the
market publishes are what the nodes read as the rendered prompt; `chain deploy --probes` wires and funds it."""

from __future__ import annotations

import pytest
from web3 import Web3
from web3.logs import DISCARD

from node.chain.deploy import deploy_system
from node.chain.deployment import Deployment
from node.chain.enums import Role
from node.chain.params import DEFAULT_PARAMS, PROBE_TREASURY
from node.decoding.pairs import PAIRS, get_pair
from node.jobs.models import load_tokenizer, model_id
from node.jobs.sessions import prompt_tokens
from node.probes.corpus import Corpus, corpus_for, load_corpus, raw_prompts, render
from tests.test_cli import clean_error, cli, ok

ETHER = 10**18
WAD = 10**18


@pytest.fixture(scope="module")
def tiny_corpus() -> Corpus:
    return load_corpus(get_pair("tiny").target)


def test_the_corpus_holds_chat_and_code_prompts_in_a_fixed_order(tiny_corpus):
    prompts = raw_prompts()
    assert len(prompts) >= 30 and len(set(prompts)) == len(prompts)
    assert any("Python" in p for p in prompts) and any("?" in p for p in prompts)
    # the tiny tokenizer has no chat template: a prompt is its raw text, and its root commits to the order
    assert tiny_corpus.prompts == tuple(p.encode("utf-8") for p in prompts)
    swapped = Corpus(tiny_corpus.target_model, tiny_corpus.prompts[1::-1] + tiny_corpus.prompts[2:], 0)
    assert swapped.root != tiny_corpus.root


@pytest.mark.skipif(not (PAIRS["smol"].target / "tokenizer.json").is_file(), reason="the smol pair is not set up")
def test_a_chat_model_is_probed_with_its_chat_template():
    """SmolLM2-135M-Instruct serves chat turns: a corpus prompt is one user turn in its template with the
    generation prompt, written as text that the nodes' tokenization (UTF-8, no added special tokens) reads back as
    exactly the template's tokens."""
    tokenizer = load_tokenizer(PAIRS["smol"].target)
    corpus = corpus_for(b"\x01" * 32, tokenizer)  # the model id does not enter the rendering
    text = raw_prompts()[0]
    rendered = corpus.prompts[0].decode("utf-8")
    assert rendered.startswith("<|im_start|>") and text in rendered and rendered.endswith("<|im_start|>assistant\n")
    expected = tokenizer.apply_chat_template([{"role": "user", "content": text}], add_generation_prompt=True)
    expected = expected["input_ids"] if hasattr(expected, "keys") else expected
    assert prompt_tokens(tokenizer, corpus.prompts[0]) == list(expected)
    assert corpus.eos_token == tokenizer.eos_token_id == tokenizer.convert_tokens_to_ids("<|im_end|>")
    assert render(load_tokenizer(PAIRS["tiny"].target), text) == text


def test_a_probe_starts_with_the_shipped_prompt_and_its_proof(chain, tiny_corpus):
    w3 = chain
    deployer, drafter, keeper, *verifiers = w3.eth.accounts[:6]
    tiny = get_pair("tiny")
    draft_id, target_id = model_id(tiny.draft), model_id(tiny.target)
    assert tiny_corpus.target_model == target_id
    params = DEFAULT_PARAMS.with_(treasury=PROBE_TREASURY)
    system = deploy_system(w3, deployer, params, corpora={target_id: tiny_corpus.entry()})
    probes, market, registry = system.probes, system.market, system.registry
    assert tiny_corpus.matches(probes.functions.corpusOf(target_id).call())
    vocab = 768
    _send(w3, registry.functions.registerDrafter(draft_id, target_id, WAD // 2, vocab), drafter, ETHER)
    for verifier in verifiers:
        _send(w3, registry.functions.register(Role.Verifier, [target_id], [vocab]), verifier, ETHER)
    _send(w3, None, deployer, ETHER, to=probes.address)
    _send(w3, probes.functions.openProbe(drafter), keeper)
    w3.provider.make_request("evm_mine", [])
    probe_id = probes.functions.probeCount().call()
    index = probes.functions.promptIndexOf(probe_id).call()
    # another shipped prompt than the drawn one is refused (BadProbePrompt): the proof binds prompt and index
    other = (index + 1) % tiny_corpus.size
    with pytest.raises(Exception, match="0x"):
        probes.functions.startProbe(probe_id, tiny_corpus.prompts[other], tiny_corpus.proof(other)).call()
    receipt = _send(w3, probes.functions.startProbe(probe_id, tiny_corpus.prompts[index], tiny_corpus.proof(index)))
    (started,) = probes.events.ProbeStarted().process_receipt(receipt, errors=DISCARD)
    assert started.args.promptIndex == index
    (submitted,) = market.events.JobSubmitted().process_receipt(receipt, errors=DISCARD)
    assert bytes(submitted.args.prompt) == tiny_corpus.prompts[index]
    assert bytes(submitted.args.prompt).decode("utf-8") == raw_prompts()[index]
    job = market.functions.getJob(started.args.jobId).call()
    assert (job[0], job[1]) == (probes.address, drafter)


def test_chain_deploy_with_probes_wires_and_funds_the_scheduler(chain, anvil, tmp_path, tiny_corpus):
    w3 = chain
    ok(cli("chain", "deploy", "--rpc", anvil.rpc_url, "--probes", "--probe-funds", "3eth", home=tmp_path))
    deployment = Deployment.load(tmp_path / "deployment.json")
    scheduler = deployment.addresses["ProbeScheduler"]
    system = deployment.system(w3)
    assert system.probes.address == scheduler == system.market.functions.probeScheduler().call()
    assert Web3.to_checksum_address(deployment.params["treasury"]) == scheduler
    assert w3.eth.get_balance(scheduler) == 3 * ETHER
    assert tiny_corpus.matches(system.probes.functions.corpusOf(tiny_corpus.target_model).call())
    # without --probes: the v1.1 window (no scheduler wired, none recorded), and no keeper serves it
    ok(cli("chain", "deploy", "--rpc", anvil.rpc_url, "--force", home=tmp_path))
    assert "ProbeScheduler" not in Deployment.load(tmp_path / "deployment.json").addresses
    clean_error(cli("serve", "keeper", "--dev-account", "8", home=tmp_path), "no probe scheduler", "--probes")


def _send(w3, fn, sender=None, value=0, to=None):
    sender = sender or w3.eth.accounts[0]
    if fn is None:
        tx = w3.eth.send_transaction({"from": sender, "to": to, "value": value})
    else:
        tx = fn.transact({"from": sender, "value": value})
    receipt = w3.eth.wait_for_transaction_receipt(tx)
    assert receipt.status == 1
    return receipt
