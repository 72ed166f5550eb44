"""The node's durable state: one SQLite file per node (stdlib sqlite3, WAL mode).

It holds what must survive a crash: transactions signed but maybe not yet mined (so nothing is ever
sent twice), event-poller cursors and processed logs (so no event is lost or handled twice), the jobs and
disputes the node takes part in (`jobs`, `disputes`: status and role-specific params per (id, role)), the
cycle transcripts a node needs to answer disputes long after it produced them (`cycles`), and a drafter's
per-job salts (`job_salts`).

The schema is versioned (`PRAGMA user_version`, SCHEMA_VERSION); a store of an older version is migrated when it
is opened (`_MIGRATIONS`, in one transaction), one of a newer version is refused.

A store is bound to one chain and deployment (`StoreBinding`: chain id, genesis block hash, contract addresses):
its cursors, job states and signed transactions mean nothing on another chain, and would harm there (a job id
"done" on the old chain is a new job on a restarted one; an old signed transaction could be re-broadcast). Opened
with a binding, a store not bound yet (new, or from before v3) is bound; one bound to another chain is moved
aside to `<name>.<chain id>-<digest>.bak` (never deleted: it may hold a referee's salts) and a fresh store
takes its place (`NodeStore.replaced` says where the old one went).

WAD probabilities can exceed int64 (uint64, and sums of them), so they are stored as decimal strings
inside JSON; callers read and write plain Python ints.
"""

from __future__ import annotations

import contextlib
import json
import logging
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from node.store_binding import StoreBinding
from node.store_blocks import BlockMemory
from node.store_schema import _MIGRATIONS, _SCHEMA, APPLICATION_ID, SCHEMA_VERSION

# Transaction record states. A "dead" record can never land (its nonce went to another transaction, or
# the node refused it), so a later send under the same key may build a fresh transaction.
TX_SIGNED = "signed"  # recorded before broadcast; may or may not have reached a node
TX_SENT = "sent"  # a node accepted it into its pool
TX_MINED = "mined"  # a receipt was seen
TX_SUPERSEDED = "superseded"  # its nonce was consumed by another transaction
TX_REJECTED = "rejected"  # a node refused it outright
DEAD_TX_STATES = frozenset({TX_SUPERSEDED, TX_REJECTED})

log = logging.getLogger("verispec.store")


class StoreError(RuntimeError):
    """The store file is unusable: not SQLite, not ours, or from a newer schema."""


class IdempotencyConflict(StoreError):
    """An idempotency key was reused for a different request."""


@dataclass(frozen=True)
class SentTx:
    key: str
    sender: str
    request_digest: str
    tx_hash: str
    raw_tx: bytes
    nonce: int
    status: str
    block_number: int | None

    @property
    def dead(self) -> bool:
        return self.status in DEAD_TX_STATES


@dataclass(frozen=True)
class StoredJob:
    """A job as one node's store records it: its role in the job, its status there, and role-specific params."""

    job_id: int
    role: str
    status: str
    params: dict[str, Any]


@dataclass(frozen=True)
class StoredDispute:
    """A dispute as one node's store records it: its role in it (the accused or challenging party, or a drawn
    referee), its status there, and role-specific params (a referee's verdict and salt)."""

    dispute_id: int
    role: str
    status: str
    params: dict[str, Any]


@dataclass(frozen=True)
class StoredCycle:
    """What one node saw and did in one cycle; fields a role never fills stay None."""

    job_id: int
    role: str
    cycle: int
    proposals: list[int] | None = None
    q: list[int] | None = None  # WAD, at the proposals
    p: list[int] | None = None  # WAD, at the proposals
    top_k: Any = None  # JSON-able: per-position top-k distributions
    reveal: bytes | None = None
    accepted: int | None = None
    emitted_tokens: list[int] | None = None
    tx_hashes: dict[str, str] = field(default_factory=dict)  # action -> tx hash


@dataclass(frozen=True)
class StoredLinkMessage:
    """One signed message of a transcript-mode job (`link_messages`): sent or received by this node."""

    job_id: int
    role: str
    kind: str  # Draft | Verification | Settlement
    position: int  # the cycle; a Settlement's cycle count
    signer: str
    message: dict[str, Any]  # the EIP-712 message, bytes as 0x-hex
    signature: bytes
    direction: str  # sent | received


def _int64(value: int, what: str) -> int:
    if not 0 <= value < 2**63:
        raise ValueError(f"{what} {value} does not fit the store's INTEGER column")
    return value


def _wads_to_json(values: list[int] | None) -> str | None:
    return None if values is None else json.dumps([str(int(v)) for v in values])


def _wads_from_json(text: str | None) -> list[int] | None:
    return None if text is None else [int(v) for v in json.loads(text)]


def _json_or_none(value: Any) -> str | None:
    return None if value is None else json.dumps(value)


def _loads_or_none(text: str | None) -> Any:
    return None if text is None else json.loads(text)


def log_identity(log: Any) -> tuple[str, int]:
    """(tx hash as 0x-hex, log index) of a decoded event, a web3 log dict, or anything with those fields."""
    if isinstance(log, Mapping):
        tx_hash, log_index = log["transactionHash"], log["logIndex"]
    else:
        tx_hash, log_index = log.tx_hash, log.log_index
    if isinstance(tx_hash, (bytes, bytearray)):
        tx_hash = "0x" + bytes(tx_hash).hex()
    return str(tx_hash).lower(), int(log_index)


# What a commit survives (`NodeStore(durability=...)`); both keep SQLite's WAL journal, so the file is never
# corrupted, only how many of the last commits an OS crash or power cut may take back differs:
DURABILITY_POWER = "power"  # synchronous=FULL: each commit is fsynced; it survives a power cut
DURABILITY_PROCESS = "process"  # synchronous=NORMAL: a commit is in the OS (WAL file) when it returns; it
# survives the process being killed (kill -9, OOM, a crash) but an OS crash
# or a power cut may lose the last commits (WAL checkpoints still fsync)
_SYNCHRONOUS = {DURABILITY_POWER: "FULL", DURABILITY_PROCESS: "NORMAL"}


class NodeStore(BlockMemory):
    """One node's SQLite store. Safe to share between threads of one process.

    `durability`: DURABILITY_POWER (the default here: every commit fsynced) or DURABILITY_PROCESS (no fsync
    per commit, the cost of a write on the critical path: docs/node.md, "Measured costs"; a commit survives
    kill -9 but not a power cut). The serving nodes choose DURABILITY_PROCESS (node/roles/base.py; why that
    cannot send anything twice: docs/node.md, "Store durability").
    """

    def __init__(self, path: str | Path, durability: str = DURABILITY_POWER, binding: StoreBinding | None = None):
        if durability not in _SYNCHRONOUS:
            raise ValueError(f"durability must be one of {sorted(_SYNCHRONOUS)}, not {durability!r}")
        self.durability = durability
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.replaced: Path | None = None  # where a store bound to another chain was moved (see the module doc)
        self._lock = threading.RLock()
        self._depth = 0
        self._connect()
        if binding is not None:
            self._bind(binding)

    def _connect(self) -> None:
        # Autocommit mode: transactions are opened explicitly by `transaction()`, never implicitly.
        self._db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False, timeout=30)
        try:
            self._open()
        except sqlite3.DatabaseError as exc:
            self._db.close()
            raise StoreError(f"{self.path} is not a usable node store: {exc}") from exc
        except StoreError:
            self._db.close()
            raise

    def binding(self) -> StoreBinding | None:
        """The chain this store is bound to; None while unbound."""
        rows = self._query("SELECT chain_id, genesis_hash, addresses FROM chain_binding")
        if not rows:
            return None
        chain_id, genesis_hash, addresses = rows[0]
        return StoreBinding.of(chain_id, genesis_hash, json.loads(addresses))

    def _bind(self, binding: StoreBinding) -> None:
        bound = self.binding()
        if bound == binding:
            return
        if bound is not None:
            self.replaced = self._move_aside(bound)
            log.warning(
                "store %s belonged to %s, not %s: moved it to %s and started a fresh store",
                self.path,
                bound.describe(),
                binding.describe(),
                self.replaced.name,
            )
        self._write(
            "INSERT INTO chain_binding VALUES (0, ?, ?, ?)",
            (binding.chain_id, binding.genesis_hash, json.dumps(dict(binding.addresses))),
        )

    def _move_aside(self, bound: StoreBinding) -> Path:
        """Close the store, rename its files (the WAL and shared-memory files with it), open a new one at `path`."""
        with self._lock:
            with contextlib.suppress(sqlite3.DatabaseError):
                self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            self._db.close()
            backup = self.path.with_name(f"{self.path.name}.{bound.tag}.bak")
            n = 1
            while backup.exists():
                backup, n = self.path.with_name(f"{self.path.name}.{bound.tag}.{n}.bak"), n + 1
            for suffix in ("", "-wal", "-shm"):
                source = self.path.with_name(self.path.name + suffix)
                if source.exists():
                    source.rename(backup.with_name(backup.name + suffix))
            self._connect()
        return backup

    def _open(self) -> None:
        app_id = self._db.execute("PRAGMA application_id").fetchone()[0]
        version = self._db.execute("PRAGMA user_version").fetchone()[0]
        has_tables = self._db.execute("SELECT count(*) FROM sqlite_master").fetchone()[0] > 0
        if app_id != APPLICATION_ID and (has_tables or app_id != 0):
            raise StoreError(f"{self.path} is an SQLite file of another application (application_id {app_id:#x})")
        if app_id == APPLICATION_ID and version != SCHEMA_VERSION and not (1 <= version < SCHEMA_VERSION):
            raise StoreError(f"{self.path} has schema v{version}; this node understands v1..v{SCHEMA_VERSION}")
        self._db.execute("PRAGMA journal_mode=WAL")
        # FULL (DURABILITY_POWER): a recorded transaction is on disk before we broadcast it, even across a
        # power cut; NORMAL (DURABILITY_PROCESS): it is in the OS's page cache, which a killed process cannot lose.
        self._db.execute(f"PRAGMA synchronous={_SYNCHRONOUS[self.durability]}")
        if app_id == 0:
            with self.transaction():
                for statement in _SCHEMA.split(";"):
                    if statement.strip():
                        self._db.execute(statement)
                self._db.execute(f"PRAGMA application_id={APPLICATION_ID}")
                self._db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
        elif version < SCHEMA_VERSION:
            with self.transaction():
                for step in range(version, SCHEMA_VERSION):
                    for statement in _MIGRATIONS[step]:
                        if callable(statement):  # a step SQL cannot do exactly (store_schema.py)
                            try:
                                statement(self._db)
                            except ValueError as exc:  # the transaction rolls back: the store stays as it was
                                raise StoreError(f"{self.path}: cannot migrate from v{version}: {exc}") from None
                        else:
                            self._db.execute(statement)
                self._db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def __enter__(self) -> NodeStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        """All writes inside commit together or not at all; nested calls join the outer transaction."""
        with self._lock:
            if self._depth:
                self._depth += 1
                try:
                    yield
                finally:
                    self._depth -= 1
                return
            self._db.execute("BEGIN IMMEDIATE")
            self._depth = 1
            try:
                yield
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            else:
                self._db.execute("COMMIT")
            finally:
                self._depth = 0

    def _query(self, sql: str, params: tuple = ()) -> list[tuple]:
        with self._lock:
            return self._db.execute(sql, params).fetchall()

    def _write(self, sql: str, params: tuple = ()) -> None:
        with self.transaction():
            self._db.execute(sql, params)

    # --- sent transactions -------------------------------------------------------------------------

    def record_tx(self, key: str, sender: str, request_digest: str, tx_hash: str, raw_tx: bytes, nonce: int) -> SentTx:
        """Durably record a signed transaction under `key` before it is broadcast.

        Replaces a dead record for the same key; refuses to replace a live one (that would risk sending
        the action twice) or one recorded for a different request.
        """
        now = time.time()
        with self.transaction():
            existing = self.sent_tx(key)
            if existing is not None:
                if existing.request_digest != request_digest:
                    raise IdempotencyConflict(f"key {key!r} was used before for a different transaction")
                if not existing.dead:
                    raise StoreError(f"key {key!r} already has a live transaction {existing.tx_hash}")
            self._db.execute(
                "INSERT OR REPLACE INTO sent_txs VALUES (?, ?, ?, ?, ?, ?, ?, NULL, ?, ?)",
                (
                    key,
                    sender.lower(),
                    request_digest,
                    tx_hash.lower(),
                    bytes(raw_tx),
                    _int64(nonce, "nonce"),
                    TX_SIGNED,
                    now,
                    now,
                ),
            )
        return SentTx(key, sender.lower(), request_digest, tx_hash.lower(), bytes(raw_tx), nonce, TX_SIGNED, None)

    def set_tx_status(self, key: str, status: str, block_number: int | None = None) -> None:
        self._write(
            "UPDATE sent_txs SET status = ?, block_number = COALESCE(?, block_number), updated_at = ? "
            "WHERE idempotency_key = ?",
            (status, block_number, time.time(), key),
        )

    def sent_tx(self, key: str) -> SentTx | None:
        rows = self._query(
            "SELECT idempotency_key, sender, request_digest, tx_hash, raw_tx, nonce, status, "
            "block_number FROM sent_txs WHERE idempotency_key = ?",
            (key,),
        )
        return SentTx(*rows[0]) if rows else None

    def outstanding_txs(self, sender: str) -> list[SentTx]:
        """Records of `sender` that may still be waiting to land, lowest nonce first."""
        rows = self._query(
            "SELECT idempotency_key, sender, request_digest, tx_hash, raw_tx, nonce, status, "
            "block_number FROM sent_txs WHERE sender = ? AND status IN (?, ?) ORDER BY nonce",
            (sender.lower(), TX_SIGNED, TX_SENT),
        )
        return [SentTx(*row) for row in rows]

    # --- event cursors and processed logs -----------------------------------------------------------

    def cursor(self, name: str) -> int | None:
        """Last block fully processed by the poller `name`, or None if it never ran."""
        rows = self._query("SELECT last_block FROM event_cursors WHERE name = ?", (name,))
        return rows[0][0] if rows else None

    def set_cursor(self, name: str, last_block: int) -> None:
        self._write(
            "INSERT INTO event_cursors VALUES (?, ?) ON CONFLICT(name) DO UPDATE SET last_block = excluded.last_block",
            (name, _int64(last_block, "block")),
        )

    def seen(self, log: Any, consumer: str = "") -> bool:
        """Whether `consumer` already handled this log (keyed by tx hash and log index)."""
        tx_hash, log_index = log_identity(log)
        return bool(
            self._query(
                "SELECT 1 FROM processed_logs WHERE consumer = ? AND tx_hash = ? AND log_index = ?",
                (consumer, tx_hash, log_index),
            )
        )

    def mark_seen(self, log: Any, consumer: str = "") -> None:
        """Record that `consumer` handled this log; call inside the handler's own `transaction()`. Its block is
        kept with it, so that a reorg that removes the block forgets it (`rewind_poller`)."""
        tx_hash, log_index = log_identity(log)
        block = log.get("blockNumber") if isinstance(log, Mapping) else getattr(log, "block_number", None)
        self._write(
            "INSERT OR IGNORE INTO processed_logs (consumer, tx_hash, log_index, block_number) VALUES (?, ?, ?, ?)",
            (consumer, tx_hash, log_index, None if block is None else int(block)),
        )

    # --- jobs and disputes -------------------------------------------------------------------------

    def save_job(self, job_id: int, role: str, status: str, params: Mapping[str, Any] | None = None) -> None:
        """Insert or update a job; `params=None` keeps the stored params."""
        self._save_row("jobs", "job_id", "job id", job_id, role, status, params)

    def job(self, job_id: int, role: str) -> StoredJob | None:
        row = self._row("jobs", "job_id", job_id, role)
        return StoredJob(*row) if row else None

    def jobs(self, role: str | None = None, status: str | None = None) -> list[StoredJob]:
        return [StoredJob(*row) for row in self._rows("jobs", "job_id", role, status)]

    def save_dispute(self, dispute_id: int, role: str, status: str, params: Mapping[str, Any] | None = None) -> None:
        """Insert or update a dispute; `params=None` keeps the stored params."""
        self._save_row("disputes", "dispute_id", "dispute id", dispute_id, role, status, params)

    def dispute(self, dispute_id: int, role: str) -> StoredDispute | None:
        row = self._row("disputes", "dispute_id", dispute_id, role)
        return StoredDispute(*row) if row else None

    def disputes(self, role: str | None = None, status: str | None = None) -> list[StoredDispute]:
        return [StoredDispute(*row) for row in self._rows("disputes", "dispute_id", role, status)]

    def _save_row(
        self, table: str, key: str, what: str, item_id: int, role: str, status: str, params: Mapping[str, Any] | None
    ) -> None:
        now = time.time()
        _int64(item_id, what)
        with self.transaction():
            if params is None:
                current = self._row(table, key, item_id, role)
                params = current[3] if current else {}
            self._db.execute(
                f"INSERT INTO {table} VALUES (?, ?, ?, ?, ?) ON CONFLICT({key}, role) DO UPDATE SET "
                "status = excluded.status, params = excluded.params, updated_at = excluded.updated_at",
                (item_id, role, status, json.dumps(dict(params)), now),
            )

    def _row(self, table: str, key: str, item_id: int, role: str) -> tuple | None:
        """The (id, role, status, params) row of `table` (jobs or disputes) for (item_id, role), params decoded."""
        rows = self._query(
            f"SELECT {key}, role, status, params FROM {table} WHERE {key} = ? AND role = ?", (item_id, role)
        )
        return (rows[0][0], rows[0][1], rows[0][2], json.loads(rows[0][3])) if rows else None

    def _rows(self, table: str, key: str, role: str | None, status: str | None) -> list[tuple]:
        """The rows of `table` with that role and status (None: any), in id order."""
        rows = self._query(
            f"SELECT {key}, role, status, params FROM {table} WHERE (? IS NULL OR role = ?) "
            f"AND (? IS NULL OR status = ?) ORDER BY {key}, role",
            (role, role, status, status),
        )
        return [(r[0], r[1], r[2], json.loads(r[3])) for r in rows]

    # --- secrets ----------------------------------------------------------------------------------

    def secret(self, name: str, make: Callable[[], bytes]) -> bytes:
        """The private value stored under `name`, made by `make()` and stored the first time it is asked for (in
        one transaction: two callers, or a restart, always get the same value)."""
        with self.transaction():
            rows = self._query("SELECT value FROM secrets WHERE name = ?", (name,))
            if rows:
                return bytes(rows[0][0])
            value = bytes(make())
            self._db.execute("INSERT INTO secrets VALUES (?, ?, ?)", (name, value, time.time()))
            return value

    # --- drafter salts ------------------------------------------------------------------------------

    def job_salt(self, job_id: int, role: str, make: Callable[[], int] | None = None) -> int | None:
        """The salt stored for (job, role); if there is none, `make()`'s, stored first, in one transaction (as
        `secret`: two callers, or a restart, always get the same salt), or None when `make` is None."""
        _int64(job_id, "job id")
        with self.transaction():
            rows = self._query("SELECT salt FROM job_salts WHERE job_id = ? AND role = ?", (job_id, role))
            if rows:
                return int(rows[0][0])
            if make is None:
                return None
            salt = int(make())
            if not 0 <= salt < 2**64:
                raise ValueError(f"a salt is a uint64, not {salt}")
            self._db.execute("INSERT INTO job_salts VALUES (?, ?, ?, ?)", (job_id, role, str(salt), time.time()))
            return salt

    # --- cycle transcripts --------------------------------------------------------------------------

    def save_cycle(
        self,
        job_id: int,
        role: str,
        cycle: int,
        *,
        proposals: list[int] | None = None,
        q: list[int] | None = None,
        p: list[int] | None = None,
        top_k: Any = None,
        reveal: bytes | None = None,
        accepted: int | None = None,
        emitted_tokens: list[int] | None = None,
        tx_hashes: Mapping[str, str] | None = None,
    ) -> None:
        """Merge the given fields into a cycle's transcript; fields left None keep their stored value and
        `tx_hashes` entries are added to the stored ones (a cycle is written as it progresses)."""
        _int64(job_id, "job id")
        _int64(cycle, "cycle")
        with self.transaction():
            current = self.cycle(job_id, role, cycle)
            hashes = dict(current.tx_hashes) if current else {}
            hashes.update(tx_hashes or {})
            self._db.execute(
                "INSERT INTO cycles VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT(job_id, role, cycle) DO UPDATE SET "
                "proposals = COALESCE(excluded.proposals, proposals), q = COALESCE(excluded.q, q), "
                "p = COALESCE(excluded.p, p), top_k = COALESCE(excluded.top_k, top_k), "
                "reveal = COALESCE(excluded.reveal, reveal), accepted = COALESCE(excluded.accepted, accepted), "
                "emitted_tokens = COALESCE(excluded.emitted_tokens, emitted_tokens), "
                "tx_hashes = excluded.tx_hashes, updated_at = excluded.updated_at",
                (
                    _int64(job_id, "job id"),
                    role,
                    _int64(cycle, "cycle"),
                    _json_or_none(proposals),
                    _wads_to_json(q),
                    _wads_to_json(p),
                    _json_or_none(top_k),
                    None if reveal is None else "0x" + bytes(reveal).hex(),
                    accepted,
                    _json_or_none(emitted_tokens),
                    json.dumps(hashes),
                    time.time(),
                ),
            )

    def cycle(self, job_id: int, role: str, cycle: int) -> StoredCycle | None:
        rows = self._query("SELECT * FROM cycles WHERE job_id = ? AND role = ? AND cycle = ?", (job_id, role, cycle))
        return self._cycle_from_row(rows[0]) if rows else None

    def cycles(self, job_id: int, role: str) -> list[StoredCycle]:
        rows = self._query("SELECT * FROM cycles WHERE job_id = ? AND role = ? ORDER BY cycle", (job_id, role))
        return [self._cycle_from_row(row) for row in rows]

    @staticmethod
    def _cycle_from_row(row: tuple) -> StoredCycle:
        job_id, role, cycle, proposals, q, p, top_k, reveal, accepted, emitted, tx_hashes, _updated = row
        return StoredCycle(
            job_id=job_id,
            role=role,
            cycle=cycle,
            proposals=_loads_or_none(proposals),
            q=_wads_from_json(q),
            p=_wads_from_json(p),
            top_k=_loads_or_none(top_k),
            reveal=None if reveal is None else bytes.fromhex(reveal[2:]),
            accepted=accepted,
            emitted_tokens=_loads_or_none(emitted),
            tx_hashes=json.loads(tx_hashes),
        )

    # --- transcript-mode signed messages (node/link) ---------------------------------------------------

    def save_link_message(self, m: StoredLinkMessage) -> bool:
        """Record a signed message; False when the same one is there already. Another message under the same
        (job, role, kind, position, signer) raises: nobody honest signs two for one position, so the first stays."""
        text, signature = json.dumps(m.message, sort_keys=True), "0x" + bytes(m.signature).hex()
        key = (_int64(m.job_id, "job id"), m.role, m.kind, _int64(m.position, "position"), m.signer)
        with self.transaction():
            where = "job_id = ? AND role = ? AND kind = ? AND position = ? AND signer = ?"
            rows = self._query(f"SELECT message, signature FROM link_messages WHERE {where}", key)
            if rows and rows[0] != (text, signature):
                raise IdempotencyConflict(f"job {m.job_id}: another {m.kind} {m.position} by {m.signer} is stored")
            if not rows:
                self._write(
                    "INSERT INTO link_messages VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    key + (text, signature, m.direction, time.time()),
                )
            return not rows

    def link_messages(self, job_id: int, role: str) -> list[StoredLinkMessage]:
        """A job's signed messages as this node stored them, in (kind, position) order."""
        rows = self._query(
            "SELECT job_id, role, kind, position, signer, message, signature, direction FROM link_messages "
            "WHERE job_id = ? AND role = ? ORDER BY kind, position, signer",
            (job_id, role),
        )
        return [StoredLinkMessage(*r[:5], json.loads(r[5]), bytes.fromhex(r[6][2:]), r[7]) for r in rows]
