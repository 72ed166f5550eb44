"""The deployed contracts point at one another through `contracts/interfaces/` only (docs/contracts.md, "Interfaces").

Each contract in `contracts/*.sol` inherits its interface `I<Name>`, which holds its events and custom errors, and it
names another contract of ours (its type, or a struct, enum, function or event declared in it) only when that
contract is one of its bases. So a caller can compile against the interfaces alone, and a contract's source can
change without recompiling its callers' view of it. Read from solc's ASTs (tests/solc_analysis.py).
"""

from __future__ import annotations

from solc_analysis import analysis, nodes

# the deployable contracts and the abstract base the market inherits: every top-level source of contracts/
TOP_LEVEL = "contracts/"


def _is_top_level(path: str) -> bool:
    return path.startswith(TOP_LEVEL) and "/" not in path[len(TOP_LEVEL) :]


def _top_level_contracts() -> dict[int, dict]:
    found = {
        node["id"]: node
        for path, _scope, node in nodes("ContractDefinition")
        if _is_top_level(path) and node["contractKind"] == "contract"
    }
    assert {n["name"] for n in found.values()} >= {
        "StakingRegistry",
        "InferenceMarket",
        "AlphaWindow",
        "DisputeManager",
        "TranscriptSettlement",
    }
    return found


def _container_of() -> dict[int, tuple[int, str]]:
    """{declaration id: (id of the contract, interface or library that declares it, the declaration's name)}; a
    contract, interface or library is its own container."""
    containers = {}

    def walk(node, container):
        if isinstance(node, dict):
            if node.get("nodeType") == "ContractDefinition":
                container = node["id"]
            if "id" in node and container is not None:
                containers[node["id"]] = (container, node.get("name") or node["nodeType"])
            for value in node.values():
                walk(value, container)
        elif isinstance(node, list):
            for value in node:
                walk(value, container)

    for unit in analysis()["sources"].values():
        walk(unit["ast"], None)
    return containers


def _referenced(node) -> set[int]:
    found = set()
    if isinstance(node, dict):
        if isinstance(node.get("referencedDeclaration"), int):
            found.add(node["referencedDeclaration"])
        for value in node.values():
            found |= _referenced(value)
    elif isinstance(node, list):
        for value in node:
            found |= _referenced(value)
    return found


def test_every_contract_inherits_its_interface():
    names = {n["id"]: n["name"] for _p, _s, n in nodes("ContractDefinition")}
    missing = [
        c["name"]
        for c in _top_level_contracts().values()
        if "I" + c["name"] not in {names[b] for b in c["linearizedBaseContracts"]}
    ]
    assert not missing, f"contracts without their interface I<Name>: {missing}"


def test_the_contracts_declare_no_event_or_error_outside_their_interfaces():
    """An event or error declared in a contract would be missing from the interface its callers compile against
    (the revert decoder reads the contract's ABI, which has both either way)."""
    declared_here = [
        f"{path}: {scope}.{node['name']}"
        for kind in ("EventDefinition", "ErrorDefinition")
        for path, scope, node in nodes(kind)
        if _is_top_level(path)
    ]
    assert not declared_here, "move these into the contract's interface:\n" + "\n".join(declared_here)


def test_no_contract_names_another_concrete_contract_it_does_not_inherit():
    contracts = _top_level_contracts()
    container = _container_of()
    wrong = []
    for contract in contracts.values():
        bases = set(contract["linearizedBaseContracts"])  # itself included
        for ref in _referenced(contract):
            owner, name = container.get(ref, (None, ""))
            if owner in contracts and owner not in bases:
                wrong.append(f"{contract['name']} names {contracts[owner]['name']}.{name}")
    assert not wrong, "use the interface instead:\n" + "\n".join(sorted(set(wrong)))


def test_the_settlement_interface_declares_every_external_function(artifacts):
    """ITranscriptSettlement is the settlement's whole surface: every function of its ABI but EIP-712's
    `eip712Domain` (OpenZeppelin's EIP712 base, ERC-5267), with the same signatures, outputs and mutability."""

    def _types(params):
        return tuple(p["type"] for p in params)

    def functions(name):
        return {
            (e["name"], _types(e["inputs"]), _types(e["outputs"]), e["stateMutability"])
            for e in artifacts[name]["abi"]
            if e["type"] == "function"
        }

    contract, interface = functions("TranscriptSettlement"), functions("ITranscriptSettlement")
    assert len(interface) > 10
    assert {f[0] for f in contract - interface} == {"eip712Domain"}
    assert interface <= contract
