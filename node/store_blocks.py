"""The part of the node's store (node/store.py) that reorg handling needs: the hashes of the last blocks each event
poller processed (`poller_blocks`), the block of each processed log, and what the node's store changed since a given
moment (node/chain/events.py, node/roles/base.py: docs/node.md, "Confirmations and reorgs").

A mixin of `NodeStore`, which provides `_query`, `_write` and `transaction`.
"""

from __future__ import annotations


class BlockMemory:
    """Remembered block hashes of the event pollers, and a rewind of a poller to a fork point."""

    def poller_blocks(self, name: str) -> list[tuple[int, str, float]]:
        """(number, hash, first seen at: wall time) of the blocks poller `name` processed up to, oldest first."""
        rows = self._query("SELECT number, hash, seen_at FROM poller_blocks WHERE name = ? ORDER BY number", (name,))
        return [(int(n), str(h), float(t)) for n, h, t in rows]

    def remember_blocks(self, name: str, blocks: list[tuple[int, str, float]], keep: int) -> None:
        """Add (number, hash, seen_at) rows for poller `name`, keeping only its `keep` highest blocks."""
        if not blocks:
            return
        with self.transaction():
            for number, block_hash, seen_at in blocks:
                self._db.execute(
                    "INSERT INTO poller_blocks VALUES (?, ?, ?, ?) ON CONFLICT(name, number) DO UPDATE SET "
                    "hash = excluded.hash, seen_at = excluded.seen_at",
                    (name, int(number), block_hash, float(seen_at)),
                )
            self._db.execute(
                "DELETE FROM poller_blocks WHERE name = ? AND number NOT IN "
                "(SELECT number FROM poller_blocks WHERE name = ? ORDER BY number DESC LIMIT ?)",
                (name, name, int(keep)),
            )

    def rewind_poller(self, name: str, fork_block: int) -> None:
        """A reorg replaced the blocks above `fork_block`: poller `name` goes back to it (its cursor, its remembered
        blocks), and every log processed above it is forgotten (its block is gone, whichever consumer handled it).
        A saved cursor below the fork stays where it is: the events after it may have deferred writes not yet
        flushed (node/roles/base.py), so they are delivered again."""
        with self.transaction():
            self._db.execute(
                "INSERT INTO event_cursors VALUES (?, ?) ON CONFLICT(name) DO UPDATE SET "
                "last_block = MIN(last_block, excluded.last_block)",
                (name, int(fork_block)),
            )
            self._db.execute("DELETE FROM poller_blocks WHERE name = ? AND number > ?", (name, int(fork_block)))
            self._db.execute("DELETE FROM processed_logs WHERE block_number > ?", (int(fork_block),))

    def mined_txs_from(self, sender: str, nonce: int) -> list[tuple]:
        """The sent-transaction rows (as `SentTx` takes them) of `sender` recorded mined with a nonce of at least
        `nonce`, lowest first: after a reorg, those above the chain's count of the sender's mined transactions."""
        return self._query(
            "SELECT idempotency_key, sender, request_digest, tx_hash, raw_tx, nonce, status, block_number "
            "FROM sent_txs WHERE sender = ? AND status = 'mined' AND nonce >= ? ORDER BY nonce",
            (sender.lower(), int(nonce)),
        )

    def changed_since(self, table: str, role: str, since: float | None) -> list[tuple[int, str]]:
        """(id, status) of the rows of `table` (jobs or disputes) of `role` written at or after wall time `since`
        (None: all of them), in id order."""
        if table not in ("jobs", "disputes"):
            raise ValueError(f"no such table: {table}")
        key = "job_id" if table == "jobs" else "dispute_id"
        rows = self._query(
            f"SELECT {key}, status FROM {table} WHERE role = ? AND (? IS NULL OR updated_at >= ?) ORDER BY {key}",
            (role, since, since),
        )
        return [(int(i), str(s)) for i, s in rows]
