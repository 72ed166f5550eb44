"""Every custom error and every event of the system is told apart by its selector alone.

The node explains a revert by looking its 4-byte selector up over every artifact's ABI
(`node.chain.revert_decoder.RevertDecoder`). Two declarations behind one selector would make it explain one
contract's error with another's name and fields (as `WrongStatus(uint256,uint8)` once did: the market's
`(jobId, status)` and the dispute manager's `(disputeId, status)`). Events are decoded by topic 0 in the same
way, so one topic 0 must always mean the same fields.
"""

from __future__ import annotations

from collections import defaultdict
from typing import NamedTuple

from eth_abi import encode
from eth_utils import event_abi_to_log_topic, function_abi_to_4byte_selector

from node.chain.revert_decoder import RevertDecoder
from solc_analysis import nodes

OWN_SOURCES = "contracts/"


class Declaration(NamedTuple):
    path: str
    scope: str | None
    name: str
    params: tuple  # (type, name[, indexed]) per parameter


def _declarations(node_type: str, selector_key: str) -> dict[str, set[Declaration]]:
    by_selector: dict[str, set[Declaration]] = defaultdict(set)
    for path, scope, node in nodes(node_type):
        params = tuple(
            (p["typeDescriptions"]["typeString"], p["name"]) + ((p["indexed"],) if "indexed" in p else ())
            for p in node["parameters"]["parameters"]
        )
        by_selector[node[selector_key]].add(Declaration(path, scope, node["name"], params))
    return by_selector


def _describe(declarations) -> str:
    return "; ".join(f"{d.path}:{d.scope}.{d.name}{d.params}" for d in sorted(declarations))


def test_every_error_selector_has_one_declaration():
    """Our own sources declare each error selector once. Imported third-party code may repeat a declaration only
    word for word (OpenZeppelin's ReentrancyGuard and ReentrancyGuardTransient both declare
    ReentrancyGuardReentrantCall()): same name, same parameters, hence the same explanation."""
    by_selector = _declarations("ErrorDefinition", "errorSelector")
    assert len(by_selector) > 90  # the whole system was analysed, not one file
    clashes = []
    for selector, declarations in by_selector.items():
        own = [d for d in declarations if d.path.startswith(OWN_SOURCES)]
        meanings = {(d.name, d.params) for d in declarations}
        if len(own) > 1 or (own and len(declarations) > 1) or len(meanings) > 1:
            clashes.append(f"0x{selector}: {_describe(declarations)}")
    assert not clashes, "error selectors declared more than once:\n" + "\n".join(clashes)


def test_the_renamed_errors_are_where_they_belong():
    """The errors that once shared a name now carry their contract's (docs/disputes.md and docs/contracts.md
    list them); nothing of ours is still called by one of the old, shared names."""
    by_scope = defaultdict(set)
    for path, scope, node in nodes("ErrorDefinition"):
        if path.startswith(OWN_SOURCES):
            by_scope[scope].add(node["name"])
    assert {
        "JobWrongStatus",
        "GammaLengthMismatch",
        "MarketTransferFailed",
        "MarketNotDeployer",
        "MarketAlreadyWired",
    } <= by_scope["IInferenceMarket"]
    assert {"DisputeWrongStatus", "TopKLengthMismatch", "DisputeTransferFailed", "DisputeZeroAddress"} <= by_scope[
        "IDisputeManager"
    ]
    assert {"RegistryNotDeployer", "RegistryAlreadyWired", "RegistryZeroAddress", "RegistryTransferFailed"} <= by_scope[
        "IStakingRegistry"
    ]
    old = {"WrongStatus", "LengthMismatch", "TransferFailed", "ZeroAddress", "NotDeployer", "AlreadyWired"}
    assert not old & set().union(*by_scope.values())


def test_every_abi_error_selector_means_one_thing(artifacts):
    """What the revert decoder sees: over all artifacts, one selector, one (name, parameter types and names)."""
    meanings = defaultdict(set)
    for artifact in artifacts.values():
        for entry in artifact["abi"]:
            if entry["type"] == "error":
                fields = tuple((i["type"], i["name"]) for i in entry["inputs"])
                meanings[function_abi_to_4byte_selector(entry)].add((entry["name"], fields))
    assert len(meanings) > 90
    ambiguous = {selector.hex(): m for selector, m in meanings.items() if len(m) > 1}
    assert not ambiguous, ambiguous


def test_the_decoder_names_each_contracts_status_error(artifacts):
    """The case that went wrong: a dispute manager status error decodes with the dispute's field names, and the
    market's with the job's."""
    decoder = RevertDecoder.from_artifacts(artifacts)

    def payload(contract, error, *args):
        entry = next(e for e in artifacts[contract]["abi"] if e["type"] == "error" and e["name"] == error)
        return function_abi_to_4byte_selector(entry) + encode([i["type"] for i in entry["inputs"]], list(args))

    dispute = decoder.decode(payload("DisputeManager", "DisputeWrongStatus", 7, 3))
    assert (dispute.name, dispute.args) == ("DisputeWrongStatus", {"disputeId": 7, "status": 3})
    job = decoder.decode(payload("InferenceMarket", "JobWrongStatus", 9, 4))
    assert (job.name, job.args) == ("JobWrongStatus", {"jobId": 9, "status": 4})
    lengths = decoder.decode(payload("DisputeManager", "TopKLengthMismatch", 2, 1))
    assert (lengths.name, lengths.args) == ("TopKLengthMismatch", {"tokens": 2, "probs": 1})


def test_every_event_topic_means_one_thing(artifacts):
    """Event names and fields are part of the ABI the node reads, so they cannot be renamed; what must hold is
    that one topic 0 always decodes to the same fields. Several declarations of one signature (`Withdrawn` in
    the market and in the dispute manager) are fine when they agree on every field name and `indexed` flag:
    the log's address tells which contract emitted it. No event is anonymous (it would have no topic 0)."""
    by_topic = _declarations("EventDefinition", "eventSelector")
    assert len(by_topic) > 30
    ambiguous = [
        f"0x{topic}: {_describe(declarations)}"
        for topic, declarations in by_topic.items()
        if len({(d.name, d.params) for d in declarations}) > 1
    ]
    assert not ambiguous, "\n".join(ambiguous)

    meanings = defaultdict(set)
    for artifact in artifacts.values():
        for entry in artifact["abi"]:
            if entry["type"] == "event":
                assert not entry.get("anonymous"), entry["name"]
                fields = tuple((i["type"], i["name"], i["indexed"]) for i in entry["inputs"])
                meanings[event_abi_to_log_topic(entry)].add((entry["name"], fields))
    assert [m for m in meanings.values() if len(m) > 1] == []
