"""StakeTree (contracts/lib/StakeTree.sol), the Fenwick tree of the referee draw, through its harness.

Against a plain Python list of weights: prefix sums, `find` (the slot holding each point of the cumulative
weight: slot i is hit by exactly weight(i) points), growth by `push`, updates, the bounds, and the history:
`findAt` / `totalAt` read the tree as it stood at the end of a past block, whatever changed since.
"""

from __future__ import annotations

import random

import pytest
from web3.exceptions import ContractCustomError, ContractPanicError

from node.chain.contracts import deploy_contract


@pytest.fixture
def tree(w3, artifacts, chain):
    return deploy_contract(w3, "StakeTreeHarness", artifacts=artifacts)


def _tx(w3, fn):
    receipt = w3.eth.wait_for_transaction_receipt(fn.transact({"from": w3.eth.accounts[0]}))
    assert receipt.status == 1
    return receipt


def _find(weights, point):
    acc = 0
    for i, w in enumerate(weights, start=1):
        acc += w
        if acc > point:
            return i
    raise AssertionError("point beyond total")


def _check(tree, weights):
    f = tree.functions
    assert f.sizeAndTotal().call() == [len(weights), sum(weights)]
    for i in range(len(weights) + 1):
        assert f.prefix(i).call() == sum(weights[:i])
    total = sum(weights)
    points = {0, total - 1} | {random.Random(total).randrange(total) for _ in range(12)} if total else set()
    for point in sorted(points):
        assert f.find(point).call() == _find(weights, point), point


def test_push_add_sub_find_match_a_list(w3, tree):
    rng = random.Random(7)
    weights: list[int] = []
    f = tree.functions
    for n in range(1, 21):
        w = rng.choice([0, 1, 5, 10**18, 3 * 10**17 + 1])
        _tx(w3, f.push(w))
        weights.append(w)
        if n in (1, 2, 3, 7, 8, 13, 16, 20):
            _check(tree, weights)
    for _ in range(12):
        i = rng.randrange(len(weights))
        delta = rng.randrange(1, 10**18)
        if rng.random() < 0.5 or weights[i] < delta:
            _tx(w3, f.add(i + 1, delta))
            weights[i] += delta
        else:
            _tx(w3, f.sub(i + 1, delta))
            weights[i] -= delta
    _check(tree, weights)


def test_every_point_of_a_small_tree_hits_its_slot_weight_times(w3, tree):
    weights = [3, 0, 1, 4, 0, 2, 5]
    for w in weights:
        _tx(w3, tree.functions.push(w))
    hits = [tree.functions.find(t).call() for t in range(sum(weights))]
    assert [hits.count(i + 1) for i in range(len(weights))] == weights


def test_bounds(w3, tree):
    f = tree.functions
    with pytest.raises(ContractCustomError):
        f.find(0).call()  # empty tree
    _tx(w3, f.push(5))
    with pytest.raises(ContractCustomError):
        f.find(5).call()  # point == total
    with pytest.raises(ContractCustomError):
        f.add(2, 1).call()  # no slot 2
    with pytest.raises(ContractCustomError):
        f.add(0, 1).call()
    with pytest.raises(ContractPanicError):
        f.sub(1, 6).call()  # below zero: checked arithmetic reverts


def test_find_at_reads_the_tree_as_it_stood_at_a_past_block(w3, tree):
    f = tree.functions
    history = []  # (block, weights at its end)
    weights: list[int] = []
    rng = random.Random(11)
    for step in range(14):
        if not weights or step % 3 == 0:
            weight = rng.choice([0, 2, 7, 10**18])
            receipt = _tx(w3, f.push(weight))
            weights.append(weight)
        else:
            i = rng.randrange(len(weights))
            delta = rng.randrange(1, 9)
            if weights[i] >= delta and rng.random() < 0.5:
                receipt = _tx(w3, f.sub(i + 1, delta))
                weights[i] -= delta
            else:
                receipt = _tx(w3, f.add(i + 1, delta))
                weights[i] += delta
        history.append((receipt["blockNumber"], list(weights)))
    _tx(w3, f.push(1))  # one more block, so that the last recorded one has ended
    for block, then in history:
        total = sum(then)
        assert f.totalAt(block).call() == total
        points = {0, total - 1} | {random.Random(block).randrange(total) for _ in range(6)} if total else set()
        for point in sorted(points):
            assert f.findAt(point, block).call() == _find(then, point), (block, point)
        if total:
            with pytest.raises(ContractCustomError):
                f.findAt(total, block).call()  # beyond the total of that block, though not of today
    with pytest.raises(ContractCustomError):
        f.totalAt(w3.eth.block_number + 1).call()  # a block that has not ended: no lookup


@pytest.mark.long_run
def test_updates_and_lookups_are_logarithmic(w3, tree):
    """Gas of an update and a lookup grows with log2(size), not with size (64 vs 512 slots)."""
    f = tree.functions
    gas = {}
    for size in (64, 512):
        while f.sizeAndTotal().call()[0] < size:
            _tx(w3, f.push(10**18))
        gas[size] = (
            _tx(w3, f.add(1, 1))["gasUsed"],
            f.find(size * 10**18 - 1).estimate_gas(),
        )
    # one more tree level per doubling: 3 doublings cost a few levels, far from the 8x of a linear scan (a level of
    # an update appends a checkpoint in a new block: a fresh slot, ~22k gas; a lookup reads its latest checkpoint)
    assert gas[512][0] < gas[64][0] + 4 * 30_000
    assert gas[512][1] < gas[64][1] + 4 * 6_000
