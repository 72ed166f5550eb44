"""Compile `contracts/` offline with py-solc-x over the project's solc-js wrapper (`scripts/solc`).

Artifacts (ABI + bytecode per contract, and the members of every enum the sources declare) are cached
in `build/contracts.json`, keyed by a hash of every source and the compiler settings, so repeated runs
cost nothing.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[2]
CONTRACTS_DIR = PROJECT_ROOT / "contracts"
SOLC_WRAPPER = PROJECT_ROOT / "scripts" / "solc"
SOLC_VERSION = "0.8.28"
ARTIFACTS_PATH = PROJECT_ROOT / "build" / "contracts.json"

SETTINGS = {
    # 600, not 1000: TranscriptSettlement fits EIP-170 (24,686 B at 1000 runs, 23,991 at 600) and the gas paths
    # measured (the γ = 4 cycle 109,513, settle +6 gas) did not move; ape-config.yaml and foundry.toml say the same
    "optimizer": {"enabled": True, "runs": 600},
    "evmVersion": "cancun",
    "remappings": ["@openzeppelin/=node_modules/@openzeppelin/"],
    "outputSelection": {"*": {"*": ["abi", "evm.bytecode.object", "evm.deployedBytecode.object"], "": ["ast"]}},
}


class CompileError(RuntimeError):
    """The contracts did not compile; the message carries solc's errors."""


def _sources() -> dict[str, dict[str, str]]:
    # dot-folders hold tool caches (ape copies dependencies to contracts/.cache), not our sources
    files = sorted(
        f
        for f in CONTRACTS_DIR.rglob("*.sol")
        if not any(part.startswith(".") for part in f.relative_to(CONTRACTS_DIR).parts)
    )
    return {str(f.relative_to(PROJECT_ROOT)): {"content": f.read_text()} for f in files}


def _fingerprint(sources: dict) -> str:
    blob = json.dumps({"sources": sources, "settings": SETTINGS, "solc": SOLC_VERSION}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()


def _check_toolchain() -> None:
    solcjs = PROJECT_ROOT / "node_modules" / "solc"
    if not solcjs.is_dir():
        raise CompileError(f"{solcjs} is missing: run `make setup` (npm install) first")


def compile_contracts(force: bool = False) -> dict[str, dict]:
    """Return {ContractName: {"abi": [...], "bytecode": "0x..."}} for every contract in contracts/."""
    return _build(force)["contracts"]


def solidity_enums() -> dict[str, list[str]]:
    """{"Container.EnumName": [member, ...]} for every enum declared in contracts/ (not libraries')."""
    return _build()["enums"]


def _enums_of(ast: dict) -> dict[str, list[str]]:
    found = {}
    for unit in ast.get("nodes", []):
        members = unit.get("nodes", []) if unit.get("nodeType") == "ContractDefinition" else [unit]
        for node in members:
            if node.get("nodeType") == "EnumDefinition":
                scope = unit["name"] + "." if unit is not node else ""
                found[scope + node["name"]] = [m["name"] for m in node["members"]]
    return found


def _build(force: bool = False) -> dict:
    sources = _sources()
    fingerprint = _fingerprint(sources)
    if not force and ARTIFACTS_PATH.exists():
        cached = json.loads(ARTIFACTS_PATH.read_text())
        if cached.get("fingerprint") == fingerprint:
            return cached

    _check_toolchain()
    import solcx  # imported here so reading cached artifacts needs no compiler

    output = solcx.compile_standard(
        {"language": "Solidity", "sources": sources, "settings": SETTINGS},
        solc_binary=str(SOLC_WRAPPER),
        base_path=str(PROJECT_ROOT),
        allow_paths=[str(PROJECT_ROOT)],
        allow_empty=True,
    )
    errors = [e for e in output.get("errors", []) if e.get("severity") == "error"]
    if errors:
        raise CompileError("\n".join(e.get("formattedMessage", e["message"]) for e in errors))

    contracts = {}
    for path, by_name in output["contracts"].items():
        for name, artifact in by_name.items():
            if path.startswith("node_modules/"):
                continue
            contracts[name] = {
                "abi": artifact["abi"],
                "bytecode": "0x" + artifact["evm"]["bytecode"]["object"],
                "source": path,
            }
    enums = {}
    for path, source in output["sources"].items():
        if not path.startswith("node_modules/"):
            enums.update(_enums_of(source["ast"]))
    built = {"fingerprint": fingerprint, "contracts": contracts, "enums": enums}
    ARTIFACTS_PATH.parent.mkdir(parents=True, exist_ok=True)
    tmp = ARTIFACTS_PATH.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(built))
    tmp.replace(ARTIFACTS_PATH)
    return built


if __name__ == "__main__":
    built = compile_contracts(force=True)
    for name, artifact in sorted(built.items()):
        print(f"{name:28s} {(len(artifact['bytecode']) - 2) // 2:6d} bytes")
