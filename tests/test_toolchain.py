"""The solc-js wrapper behaves like native solc for the tools that drive it."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from node.chain.compile import SOLC_VERSION, SOLC_WRAPPER

ROOT = Path(__file__).resolve().parents[1]


def test_wrapper_reports_the_pinned_version():
    out = subprocess.run([str(SOLC_WRAPPER), "--version"], capture_output=True, text=True, check=True).stdout
    assert f"Version: {SOLC_VERSION}+commit." in out


def test_wrapper_standard_json_output_is_pure_json():
    source = (
        "// SPDX-License-Identifier: MIT\npragma solidity 0.8.28;\n"
        "contract A { function f() external pure returns (uint) { return 1; } }"
    )
    request = {
        "language": "Solidity",
        "sources": {"A.sol": {"content": source}},
        "settings": {"outputSelection": {"*": {"*": ["abi"]}}},
    }
    done = subprocess.run(
        [str(SOLC_WRAPPER), "--standard-json"], input=json.dumps(request), capture_output=True, text=True, check=True
    )
    output = json.loads(done.stdout)
    assert output["contracts"]["A.sol"]["A"]["abi"][0]["name"] == "f"


def test_wrapper_refuses_unsupported_modes():
    done = subprocess.run([str(SOLC_WRAPPER), "--bin", "x.sol"], capture_output=True, text=True)
    assert done.returncode == 2 and "only --version and --standard-json" in done.stderr


@pytest.mark.long_run
def test_forge_compiles_the_project_with_the_wrapper(tmp_path):
    done = subprocess.run(
        [
            str(ROOT / "node_modules" / ".bin" / "forge"),
            "build",
            "--use",
            str(SOLC_WRAPPER),
            "--offline",
            "--out",
            str(tmp_path / "out"),
            "--cache-path",
            str(tmp_path / "cache"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    artifact = json.loads((tmp_path / "out" / "SpecMath.sol" / "SpecMath.json").read_text())
    assert artifact["bytecode"]["object"].startswith("0x")
