"""Which of a node's jobs and disputes to look at on a step, and which jobs are in progress.

A node is state-driven: an event only marks a tracked item *dirty*; what to do is decided when the item's work
runs, from the contract's views. Every tracked item is also looked at every `recheck_interval` seconds (that is how
deadlines are noticed), except an item deferred to a chain time (`defer_until`): until the chain's clock reaches it,
only an event can change anything for it. Items are jobs (`JOB`) and disputes (`DISPUTE`), by id.

Two kinds of jitter keep parties that saw the same event at the same moment from acting in lockstep and racing
for the same call (e.g. both parties' `finalize`: the loser's transaction reverts and burns gas): each periodic
recheck comes after 1.0-1.2 x `recheck_interval`, and a deferred item past its chain-time wake-up waits a random
0-0.2 x `recheck_interval` more.

The event that opens a node's turn says the phase and cycle (`note_turn`); the next `take_turn` hands it over once,
so the node can act on its turn without reading `getJob` first.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator

JOB, DISPUTE = "job", "dispute"

Item = tuple[str, int]  # (JOB or DISPUTE, id)


class Schedule:
    """The tracked items of one node, their due rechecks and deferrals, the jobs in progress and announced turns."""

    def __init__(self) -> None:
        self.active: set[int] = set()  # jobs in progress whose next move may be the other party's: poll fast
        self._dirty: set[Item] = set()
        self._checked: dict[Item, float] = {}  # tracked items -> last time their work ran
        self._stretch: dict[Item, float] = {}  # tracked items -> factor on recheck_interval (jitter)
        self._wake: dict[Item, int] = {}  # tracked items -> chain time before which rechecks are skipped
        self._woken_at: dict[Item, float] = {}  # deferred items past their wake-up -> when to recheck
        self._turns: dict[int, tuple[int, int, int | None]] = {}  # job -> (phase, cycle, deadline): note_turn
        self._jitter = random.Random()

    # ------------------------------------------------------------------ tracking

    def track(self, kind: str, item_id: int) -> None:
        """Look at this job / dispute on the next step and then every `recheck_interval` seconds."""
        key = (kind, int(item_id))
        self._checked.setdefault(key, 0.0)
        self._dirty.add(key)

    def forget(self, kind: str, item_id: int) -> None:
        key = (kind, int(item_id))
        self._checked.pop(key, None)
        self._stretch.pop(key, None)
        self._woken_at.pop(key, None)
        self._dirty.discard(key)
        self._wake.pop(key, None)
        if kind == JOB:
            self.active.discard(int(item_id))
            self._turns.pop(int(item_id), None)

    def tracked(self, kind: str, item_id: int) -> bool:
        return (kind, int(item_id)) in self._checked

    def mark_dirty(self, kind: str, item_id: int) -> None:
        """Look at a tracked item on the next step (an event concerns it); untracked items are ignored."""
        if self.tracked(kind, item_id):
            self._dirty.add((kind, int(item_id)))

    def defer_until(self, kind: str, item_id: int, chain_timestamp: int) -> None:
        """Skip the periodic rechecks of an item until the chain's clock reaches `chain_timestamp` (a deadline):
        nothing can change for it before then except through an event, and events still mark it dirty."""
        self._wake[(kind, int(item_id))] = int(chain_timestamp)

    def set_active(self, job_id: int, active: bool) -> None:
        """Whether job `job_id` is in progress (the node polls every `active_poll_interval` while any is)."""
        if active:
            self.active.add(int(job_id))
        else:
            self.active.discard(int(job_id))

    # ------------------------------------------------------------------ turns announced by events

    def note_turn(self, job_id: int, phase: int | None, cycle: int = 0, deadline: int | None = None) -> None:
        """An event just said job `job_id` is Running in `phase` (Phase.AwaitDraft / Phase.AwaitVerify) of `cycle`
        (None: it may have stopped), with the phase's `deadline` (chain time) when known. The next `take_turn`
        returns it, so that the node can act on its turn without reading `getJob` first (one eth_call less on the
        critical path). Only a hint: the contract is still the judge, since a call that would revert fails gas
        estimation and nothing is signed (e.g. a later event the hint missed); the work then falls back to
        reading the job's view. See `NodeBase.sure` for when the estimation itself is skipped."""
        if phase is None:
            self._turns.pop(int(job_id), None)
        else:
            self._turns[int(job_id)] = (int(phase), int(cycle), None if deadline is None else int(deadline))

    def reset(self) -> None:
        """Forget everything events and views told about the tracked items (turns, deferrals to deadlines) and look
        at every one on the next step: after a reorg, what they said may be gone from the chain."""
        self._turns.clear()
        self._wake.clear()
        self._woken_at.clear()
        self._dirty.update(self._checked)

    def take_turn(self, job_id: int) -> tuple[int, int, int | None] | None:
        """The (phase, cycle, deadline) the last event announced for the job, once (see `note_turn`), or None."""
        return self._turns.pop(int(job_id), None)

    # ------------------------------------------------------------------ what is due

    def due(self, now: float, chain_time: Callable[[], int], recheck_interval: float) -> Iterator[Item]:
        """The items to work on now (monotonic time `now`), in order: the dirty ones and those whose periodic
        recheck is due (`chain_time()`, the latest block's timestamp, is read only when a deferred item could be
        among them). Each item is marked checked just before it is yielded; an item forgotten by the work on an
        earlier one is skipped."""
        due = set(self._dirty)
        periodic = [
            item
            for item, last in self._checked.items()
            if now - last >= recheck_interval * self._stretch.get(item, 1.0)
        ]
        if periodic and self._wake:
            chain_now = chain_time()
            periodic = [item for item in periodic if self._woken(item, chain_now, now, recheck_interval)]
        due.update(periodic)
        self._dirty.clear()
        for item in sorted(due):
            if item not in self._checked:
                continue
            self._checked[item] = now
            self._woken_at.pop(item, None)
            # the next periodic recheck in 1.0-1.2 x recheck_interval (the module doc says why)
            self._stretch[item] = 1.0 + self._jitter.uniform(0.0, 0.2)
            self._wake.pop(item, None)
            yield item

    def _woken(self, item: Item, chain_now: int, now: float, recheck_interval: float) -> bool:
        """Whether a deferred item's chain-time wake-up has come. Every party of a job defers to the same deadline
        and sees the block that passes it at the same moment, so each waits a random 0-0.2 x `recheck_interval`
        more (wall clock): otherwise both would, e.g., call finalize at once and the loser's transaction would
        revert and burn gas."""
        wake = self._wake.get(item)
        if wake is None:
            return True
        if wake > chain_now:
            self._woken_at.pop(item, None)
            return False
        due = self._woken_at.setdefault(item, now + self._jitter.uniform(0.0, 0.2) * recheck_interval)
        return now >= due
