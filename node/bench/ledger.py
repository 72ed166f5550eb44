"""ETH conservation over a set of holders, block by block (the soak checks it after every step)."""

from __future__ import annotations

import time

from node.bench.harness import Rpc


class Ledger:
    """ETH conservation over `holders`: their balances at a block plus the gas every transaction up to that block
    paid equal their balances at the start (the block's fee recipient is no holder: what it earns is gas paid)."""

    def __init__(self, rpc: Rpc, holders: list[str]):
        self.rpc, self.holders = rpc, holders
        self.block = int(rpc("eth_blockNumber"), 16)
        self.start = self.balances(self.block)
        self.fees = 0
        self.txs = 0
        self.checks = 0
        self.failures: list[dict] = []
        self.rereads: list[dict] = []

    def balances(self, block: int) -> int:
        return sum(int(self.rpc("eth_getBalance", a, hex(block)), 16) for a in self.holders)

    def check(self, step: str) -> bool:
        head = int(self.rpc("eth_blockNumber"), 16)
        for number in range(self.block + 1, head + 1):
            block = self.rpc("eth_getBlockByNumber", hex(number), False)
            if block["miner"].lower() in self.holders:
                raise RuntimeError(f"the fee recipient {block['miner']} is a holder: conservation would count it")
            for receipt in self.rpc("eth_getBlockReceipts", hex(number)):
                self.fees += int(receipt["gasUsed"], 16) * int(receipt["effectiveGasPrice"], 16)
                self.txs += 1
        self.block = head
        held = self.balances(head)
        self.checks += 1
        if held + self.fees != self.start:
            # read again at the same block: under load anvil has answered a balance at block N with a state that
            # already held block N + 1's transaction (the difference was one transaction's fee, and the next
            # check balanced); a real leak stays whatever the read
            first = held + self.fees - self.start
            time.sleep(0.5)
            held = self.balances(head)
            if held + self.fees == self.start:
                self.rereads.append({"step": step, "block": head, "first_read_difference_wei": first})
                return True
            self.failures.append({"step": step, "block": head, "difference_wei": held + self.fees - self.start})
            return False
        return True
