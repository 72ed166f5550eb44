"""v1.2's capacity rule with the nodes (docs/protocol.md "Soundness (v1.2)", docs/node.md "Capacity"): an honest
drafter node declares its capacity on chain and serves every job the market gives it; a requester with its own
verifier that floods it is refused by the market (and by the requester client, before anything is sent); and the
node itself declines, at no cost, a job it would have to serve beyond its capacity. In no case is the honest drafter
slashed.

Nodes run in-process (tests/test_roles.py's way: `step()` in a loop) on the bundled tiny pair.
"""

from __future__ import annotations

import pytest
import torch

from node.chain.deploy import deploy_system
from node.chain.deployment import Deployment
from node.chain.enums import FinishReason, JobStatus, Role
from node.chain.keys import dev_account
from node.jobs import chaindata
from node.requester.client import Requester
from node.requester.errors import RequesterError
from node.roles import DrafterNode, VerifierNode
from tests.chainutil import decode_error
from tests.test_roles import DRAFT, GAMMA, PROMPT, STAKE, TARGET, VOCAB, WAD, drive

# in-process nodes run whole jobs on a chain (models, many blocks): not in `make test-fast`
pytestmark = pytest.mark.node_jobs

MAX_TOKENS = 12


class Flood:
    """A deployment with an honest drafter (dev account 2) and the requester's (1) own verifier (3) registered."""

    def __init__(self, w3, rpc_url, tmp):
        from node.jobs.models import model_id

        torch.set_num_threads(1)  # the test machine is shared
        self.w3, self.tmp = w3, tmp
        self.start = w3.eth.block_number + 1
        self.system = deploy_system(w3, w3.eth.accounts[0])
        self.deployment = Deployment.of_system(w3, self.system, rpc_url, self.start)
        self.market, self.params = self.system.market, self.system.params
        self.ids = {"draft": model_id(DRAFT), "target": model_id(TARGET)}
        self.requester, self.drafter_address, self.verifier_address = w3.eth.accounts[1:4]
        reg = self.system.registry.functions
        self.send(reg.registerDrafter(self.ids["draft"], self.ids["target"], WAD // 2, VOCAB), self.drafter_address)
        self.send(reg.register(Role.Verifier, [self.ids["target"]], [VOCAB]), self.verifier_address)

    def send(self, fn, sender, value=STAKE):
        receipt = self.w3.eth.wait_for_transaction_receipt(fn.transact({"from": sender, "value": value}))
        assert receipt.status == 1
        return receipt

    def drafter(self, capacity=None, min_price_wei=0):
        return DrafterNode(
            self.w3, self.deployment, dev_account(2), self.tmp / "drafter.db", DRAFT, TARGET, device="cpu",
            capacity=capacity, min_price_wei=min_price_wei,
        )  # fmt: skip

    def verifier(self):
        store = self.tmp / "verifier.db"
        return VerifierNode(self.w3, self.deployment, dev_account(3), store, TARGET, DRAFT, device="cpu")

    def request(self, **overrides):
        return dict(
            draftModel=self.ids["draft"], targetModel=self.ids["target"], drafter=self.drafter_address,
            verifier=self.verifier_address, gamma=GAMMA, temperature=WAD, topK=0, topP=WAD, maxTokens=MAX_TOKENS,
            eosToken=0, pricePerAcceptedToken=10**12, pricePerPass=3 * 10**12,
        ) | overrides  # fmt: skip

    def submit_fn(self):
        return self.market.functions.submitJob(self.request(), PROMPT.encode()), MAX_TOKENS * 4 * 10**12

    def submit(self) -> int:
        fn, value = self.submit_fn()
        self.send(fn, self.requester, value)
        return self.market.functions.jobCount().call()

    def load(self):
        return tuple(self.market.functions.drafterLoad(self.drafter_address).call())

    def status(self, job_id):
        return self.market.functions.jobStatus(job_id).call()

    def stake(self):
        return self.system.registry.functions.stakeOf(self.drafter_address).call()

    def drafter_slashes(self):
        logs = self.market.events.JobFinished().get_logs(from_block=self.start)
        return [log for log in logs if log["args"]["party"] == self.drafter_address]

    def advance(self, seconds):
        self.w3.provider.make_request("evm_increaseTime", [seconds])
        self.w3.provider.make_request("evm_mine", [])


@pytest.fixture
def flood(chain, anvil, tmp_path):
    return Flood(chain, anvil.rpc_url, tmp_path)


def test_a_flooded_honest_drafter_serves_what_it_declared_and_is_never_slashed(flood):
    drafter, verifier = flood.drafter(capacity=2), flood.verifier()
    assert flood.load() == (0, 2)  # `serve drafter --capacity 2` declared it at start
    (declared,) = flood.market.events.CapacitySet().get_logs(from_block=flood.start)
    assert (declared["args"]["drafter"], declared["args"]["capacity"]) == (flood.drafter_address, 2)
    stake = flood.stake()
    jobs = [flood.submit(), flood.submit()]
    # the flood: the market refuses the third job with the custom error, and the requester's client says so
    # before it sends anything
    fn, value = flood.submit_fn()
    with pytest.raises(Exception) as refused:
        fn.call({"from": flood.requester, "value": value})
    assert decode_error(refused.value.data, flood.market) == ("DrafterAtCapacity", (flood.drafter_address, 2))
    client = Requester(flood.w3, flood.deployment, dev_account(1), store_path=flood.tmp / "requester.db")
    nonce = flood.w3.eth.get_transaction_count(flood.requester)
    with pytest.raises(RequesterError, match="at capacity: 2 of its 2 job"):
        client.submit(PROMPT, draft_model=DRAFT, target_model=TARGET, max_tokens=MAX_TOKENS,
                      drafter=flood.drafter_address, verifier=flood.verifier_address)  # fmt: skip
    with pytest.raises(RequesterError, match=r"every active drafter .* is at capacity"):
        client.submit(PROMPT, draft_model=DRAFT, target_model=TARGET, max_tokens=MAX_TOKENS)
    assert flood.w3.eth.get_transaction_count(flood.requester) == nonce  # nothing was sent
    # the honest nodes serve both jobs to their end
    drive([drafter, verifier], lambda: all(flood.status(j) == JobStatus.Finished for j in jobs))
    assert flood.load() == (0, 2)
    # and the next job is taken (the client picks the drafter, which has room again) and served
    third = client.submit(PROMPT, draft_model=DRAFT, target_model=TARGET, max_tokens=MAX_TOKENS).job_id
    drive([drafter, verifier], lambda: flood.status(third) == JobStatus.Finished)
    assert flood.stake() == stake and flood.drafter_slashes() == []
    client.close()


def test_the_node_declines_a_job_beyond_its_capacity_at_no_cost(flood):
    """Two jobs were given to the drafter while it could take them (the market's default, 4); it then starts with
    `--capacity 1`. It serves the first and declines the second before committing anything (its first commit is its
    consent), so the second ends in a draft timeout that slashes nobody."""
    first, second = flood.submit(), flood.submit()
    stake = flood.stake()
    drafter, verifier = flood.drafter(capacity=1), flood.verifier()
    assert flood.load() == (2, 1)  # declared below the jobs it had: the market keeps them, takes no new one
    drive([drafter, verifier], lambda: flood.status(first) == JobStatus.Finished)
    stored = drafter.store.job(second, "drafter")
    assert stored.status == "refused" and "at capacity" in stored.params["reason"], stored
    assert not [k for k in drafter.sent if k.startswith(f"job:{second}:")]  # never signed anything for it
    flood.advance(flood.params.commit_timeout + 1)
    verifier.recheck_interval = 0  # it claims the drafter's timeout at its next look
    drive([drafter, verifier], lambda: flood.status(second) >= JobStatus.Finished)
    [finished] = flood.market.events.JobFinished().get_logs(argument_filters={"jobId": second}, from_block=flood.start)
    assert finished["args"]["reason"] == FinishReason.DraftTimeout and finished["args"]["slashed"] == 0
    assert flood.stake() == stake and flood.drafter_slashes() == []
    assert chaindata.job_view(flood.market, second)["cycle"] == 0


def test_a_drafter_with_a_min_price_cannot_be_locked_out_by_free_jobs(flood):
    """Threat-model row 118 with the nodes: `serve drafter --min-price` declares the price on chain at start, so the
    requester's zero-escrow jobs (per-cycle or transcript, maxTokens 65,535, its own verifier) are refused at
    submit and hold none of the drafter's slots; the requester's client says so before sending anything; a job at
    the price is served to its end, and the drafter is never slashed."""
    price = 10**12
    drafter, verifier = flood.drafter(min_price_wei=price), flood.verifier()
    assert flood.market.functions.minPriceOf(flood.drafter_address).call() == price
    stake = flood.stake()
    free = flood.request(maxTokens=65535, pricePerAcceptedToken=0, pricePerPass=0)
    for fn in (flood.market.functions.submitJob, flood.market.functions.submitTranscriptJob):
        with pytest.raises(Exception) as refused:
            fn(free, PROMPT.encode()).call({"from": flood.requester})
        assert decode_error(refused.value.data, flood.market) == (
            "PriceBelowDrafterMinimum",
            (flood.drafter_address, 0, price),
        )
    assert flood.load() == (0, 4)
    client = Requester(flood.w3, flood.deployment, dev_account(1), store_path=flood.tmp / "requester.db")
    nonce = flood.w3.eth.get_transaction_count(flood.requester)
    with pytest.raises(RequesterError, match=f"takes jobs from {price} wei per accepted token"):
        client.submit(PROMPT, draft_model=DRAFT, target_model=TARGET, max_tokens=MAX_TOKENS, price_token_wei=price - 1,
                      drafter=flood.drafter_address, verifier=flood.verifier_address)  # fmt: skip
    with pytest.raises(RequesterError, match=r"every active drafter .* asks more than 0 wei .* takes 1000000000000"):
        client.submit(PROMPT, draft_model=DRAFT, target_model=TARGET, max_tokens=MAX_TOKENS, price_token_wei=0)
    assert flood.w3.eth.get_transaction_count(flood.requester) == nonce  # nothing was sent
    job = client.submit(PROMPT, draft_model=DRAFT, target_model=TARGET, max_tokens=MAX_TOKENS, price_token_wei=price)
    drive([drafter, verifier], lambda: flood.status(job.job_id) == JobStatus.Finished)
    assert flood.stake() == stake and flood.drafter_slashes() == []
    client.close()
