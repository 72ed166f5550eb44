"""anvil's persisted old states stay in a folder its starter owns, and go with the chain.

anvil writes every historical state it cannot keep in memory to disk and leaves it there when it stops; by default
under ~/.foundry/anvil/tmp, where 67 GB had piled up and filled the disk the CI machine shares. Both ways of
starting one (the library's `start_anvil` and `verispec chain up`) now point it at their own folder and delete it.
"""

from __future__ import annotations

import pytest
import requests

from node.chain import local
from node.chain.anvil import start_anvil

# its own chains or scripts in OS processes, waited on (tens of seconds): not in `make test-fast`
pytestmark = pytest.mark.long_run

BLOCKS_PAST_MEMORY = 0x600  # anvil keeps the newest states in memory and persists older ones past a few hundred


def mine(rpc_url: str, blocks: int) -> None:
    reply = requests.post(
        rpc_url, json={"jsonrpc": "2.0", "id": 1, "method": "anvil_mine", "params": [hex(blocks)]}, timeout=60
    ).json()
    assert "error" not in reply, reply


def persisted_states(folder) -> list:
    return sorted(folder.glob("anvil-state-*/*")) if folder.exists() else []


def test_start_anvil_persists_into_its_own_folder_and_deletes_it_on_stop():
    node = start_anvil()
    try:
        mine(node.rpc_url, BLOCKS_PAST_MEMORY)
        assert persisted_states(node.state_cache), "anvil persisted nothing into the folder it was given"
    finally:
        node.stop()
    assert not node.state_cache.exists()


def test_chain_down_deletes_the_homes_persisted_states(tmp_path):
    home = tmp_path / "home"
    chain = local.chain_up(home)
    try:
        mine(chain.rpc_url, BLOCKS_PAST_MEMORY)
        assert persisted_states(home / local.STATE_CACHE_DIR)
    finally:
        local.chain_down(home)
    assert not (home / local.STATE_CACHE_DIR).exists()
