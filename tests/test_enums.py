"""node/chain/enums.py mirrors the contracts' enums: same names, same members, same order."""

from __future__ import annotations

import pytest

from node.chain import enums
from node.chain.compile import compile_contracts, solidity_enums


def _by_simple_name() -> dict[str, list[list[str]]]:
    found: dict[str, list[list[str]]] = {}
    for qualified, members in solidity_enums().items():
        found.setdefault(qualified.rsplit(".", 1)[-1], []).append(members)
    return found


@pytest.mark.parametrize("py_enum", list(enums.SOLIDITY_NAMES), ids=lambda e: e.__name__)
def test_python_enum_matches_solidity(py_enum):
    declared = _by_simple_name().get(enums.SOLIDITY_NAMES[py_enum])
    assert declared is not None, f"no Solidity enum named {enums.SOLIDITY_NAMES[py_enum]}"
    assert len(declared) == 1, f"{enums.SOLIDITY_NAMES[py_enum]} is declared {len(declared)} times"
    assert [enums.solidity_name(m) for m in py_enum] == declared[0]
    assert [m.value for m in py_enum] == list(range(len(declared[0])))


def test_every_enum_in_an_abi_is_mirrored():
    """An enum the node can read from or pass to a contract has a Python mirror."""
    mirrored = set(enums.SOLIDITY_NAMES.values())
    in_abis = set()

    def walk(params):
        for p in params:
            kind = p.get("internalType", "")
            if kind.startswith("enum "):
                in_abis.add(kind.removeprefix("enum ").rsplit(".", 1)[-1])
            walk(p.get("components", []))

    for artifact in compile_contracts().values():
        for item in artifact["abi"]:
            walk(item.get("inputs", []))
            walk(item.get("outputs", []))
    assert in_abis, "the ABIs hold no enum at all: the walk is broken"
    assert in_abis <= mirrored, f"enums with no Python mirror: {sorted(in_abis - mirrored)}"


def test_labels_round_trip():
    assert enums.DisputeKind.from_label("draft") is enums.DisputeKind.DraftReplay
    assert enums.DisputeKind.TargetReplay.label == "target"
    assert enums.Role.from_label("verifier") == 2
    assert [r.label for r in enums.Role.staked()] == ["drafter", "verifier", "referee"]
    with pytest.raises(ValueError, match="draft, target"):
        enums.DisputeKind.from_label("drafts")
