"""One node per key (issue 27): `node.processes.node_lock`, and `verispec serve` refusing a second node on a key.

Two nodes on one key went unnoticed: with separate stores both committed every cycle (15 reverted transactions,
442k gas burnt, no warning), and in transcript mode two processes on one key could sign conflicting states.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from node.processes import NodeLockError, node_lock

CHAIN, MARKET, ACCOUNT = "chain 31337 at http://127.0.0.1:8545", "0x" + "ab" * 20, "0x" + "cd" * 20


def test_a_second_lock_on_one_key_is_refused_with_who_holds_it(tmp_path):
    with node_lock(CHAIN, MARKET, ACCOUNT, "drafter", lock_dir=tmp_path):
        same_key = ACCOUNT.upper().replace("0X", "0x")
        with pytest.raises(NodeLockError) as refused, node_lock(CHAIN, MARKET, same_key, "drafter", lock_dir=tmp_path):
            pass
        assert str(refused.value).startswith("a drafter node (pid ")
        assert f"already serves account {ACCOUNT.upper().replace('0X', '0x')} on {CHAIN}" in str(refused.value)
        # another key, or the same key on another chain (a second local dev chain: same id, same addresses)
        with node_lock(CHAIN, MARKET, "0x" + "ee" * 20, "verifier", lock_dir=tmp_path):
            pass
        with node_lock("chain 31337 at http://127.0.0.1:8546", MARKET, ACCOUNT, "drafter", lock_dir=tmp_path):
            pass
    with node_lock(CHAIN, MARKET, ACCOUNT, "drafter", lock_dir=tmp_path):  # released on exit
        pass


def test_the_lock_of_a_process_that_died_is_free_at_once(tmp_path):
    """The kernel releases a dead process's lock: a node killed by SIGKILL leaves nothing to clean up."""
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from pathlib import Path; from node.processes import node_lock\n"
            f"with node_lock({CHAIN!r}, {MARKET!r}, {ACCOUNT!r}, 'verifier', lock_dir=Path({str(tmp_path)!r})):\n"
            "    print('held', flush=True); time.sleep(600)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        held = rf"a verifier node \(pid {holder.pid}\) already serves"
        with pytest.raises(NodeLockError, match=held), node_lock(CHAIN, MARKET, ACCOUNT, "drafter", lock_dir=tmp_path):
            pass
    finally:
        holder.kill()
        holder.wait(timeout=30)
    with node_lock(CHAIN, MARKET, ACCOUNT, "drafter", lock_dir=tmp_path):  # NodeLockError if it were still held
        pass
