"""The node half of issue 10's boundary rules for the drafter, the referees and the watchdog's audit:

* attack 5: a verifier posts an outToken outside the vocabulary (1,000,000; the bundled vocabulary is 768). On v1
  the drafter node crashed in the embedding on every retry, missed its deadline and was slashed by claimTimeout.
  Now it logs the hostile value and commits its next draft in time. The market rejects such an outToken once it
  knows the vocabulary (the registry's vocabulary check); where it does, the poisoned value is fed to the node at
  its input boundary (the event it reads), which is what a lying RPC or an older market would give it;
* a malformed CycleVerified (an output that does not decode, an accepted count above γ): rebuilt, not a crash;
* `--min-price`: a job paying less per accepted token is declined, with a log line, and never drafted;
* referee and audit replays: an out-of-range token has probability 0 and gives a verdict, never an IndexError.

A real drafter node (node/roles/drafter/node.py) with the bundled draft model on the session's anvil; the verifier's
side is played by the test with real transactions (a verifier node would replay the chain's own, valid output).
"""

from __future__ import annotations

import dataclasses
import logging
import pathlib

import pytest
from eth_hash.auto import keccak
from web3.exceptions import ContractCustomError, ContractLogicError

from chainutil import decode_error
from node import protocol
from node.chain.deploy import deploy_system
from node.chain.deployment import Deployment
from node.chain.enums import DisputeKind, JobStatus, Phase, Role, Verdict
from node.chain.keys import dev_account
from node.decoding.loading import vocab_size
from node.jobs import chaindata
from node.jobs.chaindata import ChainCycle
from node.jobs.models import load_model, load_tokenizer, model_id
from node.jobs.sessions import prompt_tokens
from node.roles import DrafterNode
from node.roles.drafter import chain_checks
from node.roles.referee.node import judge_position

ROOT = pathlib.Path(__file__).resolve().parents[1]
TARGET, DRAFT = ROOT / "models" / "target", ROOT / "models" / "draft"
WAD = protocol.WAD
STAKE = 5 * 10**18
POISON = 1_000_000
PROMPT = "def __init__(self, "
SEED = keccak(b"verispec.test.alpha-nodes.seed")
GAMMA = 4


@dataclasses.dataclass
class World:
    w3: object
    system: object
    deployment: Deployment
    ids: dict
    tmp: pathlib.Path

    @property
    def market(self):
        return self.system.market

    def send(self, fn, sender, value=0):
        receipt = self.w3.eth.wait_for_transaction_receipt(fn.transact({"from": sender, "value": value}))
        assert receipt.status == 1
        return receipt

    def drafter(self, **options) -> DrafterNode:
        return DrafterNode(
            self.w3, self.deployment, dev_account(2), self.tmp / "drafter.db", DRAFT, TARGET, device="cpu", **options
        )

    def submit(self, price_token=10**12, max_tokens=12) -> int:
        request = dict(
            draftModel=self.ids["draft"],
            targetModel=self.ids["target"],
            drafter=self.w3.eth.accounts[2],
            verifier=self.w3.eth.accounts[3],
            gamma=GAMMA,
            temperature=WAD,
            topK=0,
            topP=WAD,
            maxTokens=max_tokens,
            eosToken=2**32 - 1,  # no EOS: the job runs to maxTokens
            pricePerAcceptedToken=price_token,
            pricePerPass=3 * 10**12,
        )
        escrow = max_tokens * (price_token + request["pricePerPass"])
        self.send(self.market.functions.submitJob(request, PROMPT.encode()), self.w3.eth.accounts[1], escrow)
        return self.market.functions.jobCount().call()

    def view(self, job_id):
        return chaindata.job_view(self.market, job_id)

    def accept(self, job_id, length):
        head = protocol.hash_chain(SEED, length)
        self.send(self.market.functions.acceptJob(job_id, head), self.w3.eth.accounts[3])

    def verify(self, job_id, cycle, length, out_token):
        """The verifier's submitVerification of the committed draft: every proposal rejected (p = 0), outToken."""
        [data] = [x for x in chaindata.cycles(self.market, job_id, with_p=False) if x.cycle == cycle]
        reveal = protocol.chain_reveal(SEED, length, cycle)
        fn = self.market.functions.submitVerification(
            job_id, cycle, list(data.tokens), list(data.q), [0] * GAMMA, reveal, out_token
        )
        return self.send(fn, self.w3.eth.accounts[3])


@pytest.fixture
def world(chain, anvil, tmp_path):
    w3 = chain
    start = w3.eth.block_number + 1
    system = deploy_system(w3, w3.eth.accounts[0])
    deployment = Deployment.of_system(w3, system, anvil.rpc_url, start)
    ids = {"draft": model_id(DRAFT), "target": model_id(TARGET)}
    world = World(w3, system, deployment, ids, tmp_path)
    reg = system.registry.functions
    vocab = vocab_size(TARGET)
    world.send(reg.registerDrafter(ids["draft"], ids["target"], WAD // 2, vocab), w3.eth.accounts[2], STAKE)
    world.send(reg.register(Role.Verifier, [ids["target"]], [vocab]), w3.eth.accounts[3], STAKE)
    return world


def steps(node, until, rounds=60):
    for _ in range(rounds):
        node.step()
        if until():
            return
    raise AssertionError(f"not done after {rounds} steps")


def poison_events(node, change):
    """Feed the node its events through `change(event) -> event` (its input boundary), as a lying RPC would."""
    dispatch = node._dispatch
    node._dispatch = lambda event: dispatch(change(event))


def with_args(event, **args):
    return dataclasses.replace(event, args={**event.args, **args})


# ---------------------------------------------------------------- attack 5: the drafter node survives poisoned data


@pytest.mark.parametrize("where", ["on-chain", "at-the-input"])
def test_attack5_a_poisoned_out_token_neither_crashes_the_drafter_nor_makes_it_miss_its_deadline(world, caplog, where):
    caplog.set_level(logging.WARNING)
    drafter = world.drafter()
    job_id, length = world.submit(), 12
    world.accept(job_id, length)
    steps(drafter, lambda: world.view(job_id)["phase"] == Phase.AwaitVerify)  # cycle 0 drafted
    if where == "on-chain":  # v1 took it; the market now refuses it (TokenOutOfRange), and the verifier must repost
        with pytest.raises((ContractCustomError, ContractLogicError), match="0x"):
            world.verify(job_id, 0, length, POISON)
        assert world.view(job_id)["cycle"] == 0
        world.verify(job_id, 0, length, 5)
        drafter.close()
        drafter = world.drafter()  # (no poisoned event to log in this branch: the chain never held it)
        steps(drafter, lambda: world.view(job_id)["phase"] == Phase.AwaitVerify)
        assert world.view(job_id)["cycle"] == 1
        drafter.close()
        return
    else:  # the chain holds a valid outToken; the node is fed the poisoned one (a lying RPC, an older market)
        world.verify(job_id, 0, length, 5)

        def change(event):
            if event.name == "CycleVerified" and int(event.args["cycle"]) == 0:
                return with_args(event, outToken=POISON, output=POISON.to_bytes(4, "big"))
            return event

        poison_events(drafter, change)
    assert world.view(job_id)["cycle"] == 1
    # v1: IndexError in the embedding on every retry, then a missed deadline. Now: cycle 1 is committed in time.
    steps(drafter, lambda: world.view(job_id)["phase"] == Phase.AwaitVerify)
    view = world.view(job_id)
    assert (view["status"], view["cycle"]) == (JobStatus.Running, 1)
    assert world.w3.eth.get_block("latest")["timestamp"] <= view["deadline"]
    hostile = [r.getMessage() for r in caplog.records if "hostile chain data" in r.getMessage()]
    assert any("outToken 1000000 is outside the vocabulary" in m for m in hostile), hostile
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR and r.exc_info], "a handler raised"
    drafter.close()


def test_a_malformed_cycle_verified_is_rebuilt_from_the_drafters_own_proposals(world, caplog):
    caplog.set_level(logging.WARNING)
    drafter = world.drafter()
    job_id, length = world.submit(), 12
    world.accept(job_id, length)
    steps(drafter, lambda: world.view(job_id)["phase"] == Phase.AwaitVerify)
    poison_events(
        drafter,
        lambda e: with_args(e, output=b"\x00\x01\x02", accepted=99) if e.name == "CycleVerified" else e,
    )
    world.verify(job_id, 0, length, 5)
    steps(drafter, lambda: world.view(job_id)["cycle"] == 1 and world.view(job_id)["phase"] == Phase.AwaitVerify)
    messages = " ".join(r.getMessage() for r in caplog.records)
    assert "does not decode" in messages and "accepted 99 is outside 0..γ=4" in messages
    # rebuilt as the contract emits it: γ proposals accepted (capped), then outToken, within maxTokens
    assert drafter.jobs[job_id].outputs[0][-1] == 5
    drafter.close()


# ---------------------------------------------------------------- --min-price


def test_a_drafter_declares_its_min_price_and_declines_an_older_cheaper_job_with_a_log_line(world, caplog):
    """The node declares `--min-price` on chain at start (`setMinPrice`): the market then refuses a cheaper job at
    submit (threat-model row 118: a job the node would decline cannot hold its capacity). A cheaper job submitted
    before the declaration is declined by the node, with a log line, and never drafted."""
    caplog.set_level(logging.INFO)
    cheap = world.submit(price_token=10**12)  # before the drafter declared its price
    assert world.market.functions.minPriceOf(world.w3.eth.accounts[2]).call() == 0
    drafter = world.drafter(min_price_wei=2 * 10**12)
    assert world.market.functions.minPriceOf(world.w3.eth.accounts[2]).call() == 2 * 10**12
    with pytest.raises(ContractCustomError) as refused:
        world.submit(price_token=2 * 10**12 - 1)
    assert decode_error(refused.value.data, world.market) == (
        "PriceBelowDrafterMinimum",
        (world.w3.eth.accounts[2], 2 * 10**12 - 1, 2 * 10**12),
    )
    fair = world.submit(price_token=2 * 10**12)
    world.accept(cheap, 12)
    world.accept(fair, 12)
    steps(drafter, lambda: world.view(fair)["phase"] == Phase.AwaitVerify)
    for _ in range(5):
        drafter.step()
    assert world.view(cheap)["phase"] == Phase.AwaitDraft and world.view(cheap)["cycle"] == 0  # never drafted
    assert not any(f"job:{cheap}:" in key for key in drafter.sent)
    reason = drafter.store.job(cheap, "drafter").params["reason"]
    assert reason == "price per accepted token 1000000000000 wei is below my minimum 2000000000000 wei (--min-price)"
    assert any(f"job {cheap}: declined: {reason}" == r.getMessage() for r in caplog.records)
    assert drafter.store.job(fair, "drafter").status == "active"
    drafter.close()
    with pytest.raises(ValueError):
        world.drafter(min_price_wei=-1)


def test_job_refusal_reasons():
    request = {"pricePerAcceptedToken": 10, "gamma": 4}
    assert chain_checks.job_refusal(request, 10) is None
    assert "below my minimum 11 wei" in chain_checks.job_refusal(request, 11)
    assert "outside 1..16" in chain_checks.job_refusal({**request, "gamma": 17}, 0)
    assert "outside 1..16" in chain_checks.job_refusal({**request, "gamma": 0}, 0)
    assert "vocabulary 512 is not my draft model's (768)" in chain_checks.job_refusal(request, 0, 768, 512)
    assert "malformed" in chain_checks.job_refusal({"gamma": 4}, 0)


def test_checked_output_never_raises():
    ok, problems = chain_checks.checked_output(
        b"\x00\x00\x00\x05\x00\x00\x00\x09", 1, 9, gamma=4, vocab_size=768, proposals=[5, 6, 7, 8], remaining=10
    )
    assert (ok, problems) == ((5, 9), [])
    out, problems = chain_checks.checked_output(
        POISON.to_bytes(4, "big"), 0, POISON, gamma=4, vocab_size=768, proposals=[5, 6, 7, 8], remaining=10
    )
    assert out == (chain_checks.REPLACEMENT_TOKEN,) and len(problems) == 2
    out, problems = chain_checks.checked_output(b"", "x", None, gamma=4, vocab_size=768)
    assert out == (chain_checks.REPLACEMENT_TOKEN,) and problems
    out, problems = chain_checks.checked_output(
        (1,) * 9, 4, 3, gamma=4, vocab_size=768, proposals=[1, 2, 3, 4], remaining=3
    )
    assert out == (1, 2, 3) and "not 1..γ+1=5" in problems[0]


# ---------------------------------------------------------------- referee and audit replays


@pytest.fixture(scope="module")
def models():
    import torch

    cpu = torch.device("cpu")
    return load_model(DRAFT, cpu, torch.float32), load_model(TARGET, cpu, torch.float32)


def _job():
    from node.jobs.sessions import engine_job

    request = {"maxTokens": 12, "gamma": GAMMA, "temperature": WAD, "topP": WAD, "topK": 0, "eosToken": 2**32 - 1}
    return engine_job(9, request, PROMPT.encode(), load_tokenizer(TARGET, DRAFT))


def _cycle(tokens, accepted, out_token, p=(0, 0, 0, 0)):
    q = [WAD // 4] * GAMMA
    root = protocol.draft_root(9, 0, tokens, q)
    return ChainCycle(9, 0, root, tuple(tokens), tuple(q), "0x", keccak(b"r"), accepted, out_token, (), tuple(p))


@pytest.mark.parametrize(
    ("tokens", "accepted", "index", "kind", "verdict", "why"),
    [
        ([POISON, 5, 6, 7], 0, 0, DisputeKind.DraftReplay, Verdict.AccusedCheated, "q_0"),  # probability 0
        ([POISON, 5, 6, 7], 0, 0, DisputeKind.TargetReplay, Verdict.AccusedFaithful, "p_0 replays"),  # p = 0: true
        ([5, POISON, 6, 7], 1, 2, DisputeKind.DraftReplay, Verdict.AccusedFaithful, "outside the vocabulary"),
        ([5, POISON, 6, 7], 2, 4, DisputeKind.TargetReplay, Verdict.AccusedFaithful, "outside the vocabulary"),
    ],
)
def test_referee_replays_treat_an_out_of_range_token_as_probability_zero(
    models, tokens, accepted, index, kind, verdict, why
):
    draft, target = models
    judgement = judge_position(
        _job(), list(prompt_tokens(load_tokenizer(TARGET), PROMPT.encode())), _cycle(tokens, accepted, 5), index, kind,
        10**14, draft_model=draft, target_model=target,
    )  # fmt: skip
    assert judgement.verdict == verdict and why in judgement.reason, judgement


def test_referee_convicts_an_out_of_range_out_token_and_survives_one_in_the_prefix(models):
    draft, target = models
    job = _job()
    prefix = list(job.prompt)
    judgement = judge_position(
        job, prefix, _cycle([5, 6, 7, 8], 0, POISON), GAMMA, DisputeKind.TargetReplay, 10**14, draft, target
    )
    assert judgement.verdict == Verdict.AccusedCheated and "outToken 1000000" in judgement.reason
    # a later cycle whose prefix holds the poisoned token: a verdict, not an IndexError
    judgement = judge_position(
        job, prefix + [POISON], _cycle([5, 6, 7, 8], 0, 9), 0, DisputeKind.DraftReplay, 10**14, draft, target
    )
    assert judgement.verdict == Verdict.AccusedFaithful and "outside the vocabulary" in judgement.reason
