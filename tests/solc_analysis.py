"""The compiler's own view of `contracts/`: ASTs and storage layouts, from the same sources and settings as
node.chain.compile (no bytecode is generated, so it takes a few seconds). Cached for the test session."""

from __future__ import annotations

import functools
from collections.abc import Iterator

from node.chain.compile import PROJECT_ROOT, SETTINGS, SOLC_WRAPPER, _sources


@functools.cache
def analysis() -> dict:
    """solc's standard-json output with every source unit's AST and every contract's storage layout."""
    import solcx

    settings = {key: value for key, value in SETTINGS.items() if key != "outputSelection"}
    settings["outputSelection"] = {"*": {"": ["ast"], "*": ["abi", "storageLayout"]}}
    output = solcx.compile_standard(
        {"language": "Solidity", "sources": _sources(), "settings": settings},
        solc_binary=str(SOLC_WRAPPER),
        base_path=str(PROJECT_ROOT),
        allow_paths=[str(PROJECT_ROOT)],
        allow_empty=True,
    )
    errors = [e for e in output.get("errors", []) if e.get("severity") == "error"]
    assert not errors, "\n".join(e.get("formattedMessage", e["message"]) for e in errors)
    return output


def nodes(node_type: str) -> Iterator[tuple[str, str | None, dict]]:
    """(source path, enclosing contract / interface / library name or None at file level, AST node) for every
    node of `node_type` in every compiled source unit (imported ones included)."""

    def walk(node, scope):
        if isinstance(node, dict):
            if node.get("nodeType") == node_type:
                yield scope, node
            if node.get("nodeType") == "ContractDefinition":
                scope = node["name"]
            for value in node.values():
                yield from walk(value, scope)
        elif isinstance(node, list):
            for value in node:
                yield from walk(value, scope)

    for path, unit in analysis()["sources"].items():
        for scope, node in walk(unit["ast"], None):
            yield path, scope, node
