"""The SQLite schema of the node's store (node/store.py) and the migrations that bring an older store to it.

Every table is created by `_SCHEMA` in a new store; an older store gets the tables of the versions it lacks, one
`_MIGRATIONS` step per version, in one store transaction (`NodeStore._open`).
"""

from __future__ import annotations

import json

# v2: disputes have their own table (v1 kept them in `jobs` as role "<role>-dispute"); v3: the chain binding;
# v4: secrets; v5: `link_messages`, the signed messages of transcript-mode jobs (node/link); v6: `poller_blocks`,
# the hashes of the blocks an event poller processed (reorg detection, node/chain/events.py), a processed log's block;
# v7: `job_salts`, a drafter's per-job salt in its own table (v6 kept it in its cycle-0 transcript's `top_k` JSON)
SCHEMA_VERSION = 7
# PRAGMA application_id marks the file as ours, so a foreign SQLite file is refused instead of mutated.
APPLICATION_ID = 0x76737063  # "vspc"

_SCHEMA = """
CREATE TABLE sent_txs (
    idempotency_key TEXT PRIMARY KEY,
    sender          TEXT NOT NULL,
    request_digest  TEXT NOT NULL,
    tx_hash         TEXT NOT NULL,
    raw_tx          BLOB NOT NULL,
    nonce           INTEGER NOT NULL,
    status          TEXT NOT NULL,
    block_number    INTEGER,
    created_at      REAL NOT NULL,
    updated_at      REAL NOT NULL
);
CREATE INDEX sent_txs_by_sender ON sent_txs (sender, status, nonce);

CREATE TABLE event_cursors (
    name       TEXT PRIMARY KEY,
    last_block INTEGER NOT NULL
);

CREATE TABLE processed_logs (
    consumer  TEXT NOT NULL,
    tx_hash   TEXT NOT NULL,
    log_index INTEGER NOT NULL,
    block_number INTEGER,
    PRIMARY KEY (consumer, tx_hash, log_index)
);

-- The last blocks an event poller (`name`) processed up to, with their hashes and when it first saw them (wall
-- time): a block of that number with another hash on the chain is a reorg (node/chain/events.py).
CREATE TABLE poller_blocks (
    name    TEXT NOT NULL,
    number  INTEGER NOT NULL,
    hash    TEXT NOT NULL,
    seen_at REAL NOT NULL,
    PRIMARY KEY (name, number)
);

CREATE TABLE jobs (
    job_id     INTEGER NOT NULL,
    role       TEXT NOT NULL,
    status     TEXT NOT NULL,
    params     TEXT NOT NULL,
    updated_at REAL NOT NULL,
    PRIMARY KEY (job_id, role)
);

CREATE TABLE disputes (
    dispute_id INTEGER NOT NULL,
    role       TEXT NOT NULL,
    status     TEXT NOT NULL,
    params     TEXT NOT NULL,
    updated_at REAL NOT NULL,
    PRIMARY KEY (dispute_id, role)
);

CREATE TABLE cycles (
    job_id         INTEGER NOT NULL,
    role           TEXT NOT NULL,
    cycle          INTEGER NOT NULL,
    proposals      TEXT,
    q              TEXT,
    p              TEXT,
    top_k          TEXT,
    reveal         TEXT,
    accepted       INTEGER,
    emitted_tokens TEXT,
    tx_hashes      TEXT NOT NULL DEFAULT '{}',
    updated_at     REAL NOT NULL,
    PRIMARY KEY (job_id, role, cycle)
);

CREATE TABLE chain_binding (
    singleton    INTEGER PRIMARY KEY CHECK (singleton = 0),
    chain_id     INTEGER NOT NULL,
    genesis_hash TEXT NOT NULL,
    addresses    TEXT NOT NULL
);

CREATE TABLE secrets (
    name       TEXT PRIMARY KEY,
    value      BLOB NOT NULL,
    created_at REAL NOT NULL
);

-- The signed messages of a transcript-mode job (docs/node.md, "Transcript link"), every one a node received or
-- sent, written before the node acts on it. `position` is the cycle (Draft, Verification) or the cycle count
-- (Settlement), `signer` tells the two signatures of one Settlement apart, `message` is the EIP-712 message as JSON.
-- (No semicolon in these comments: _SCHEMA is split into statements at each one.)
CREATE TABLE link_messages (
    job_id     INTEGER NOT NULL,
    role       TEXT NOT NULL,
    kind       TEXT NOT NULL,
    position   INTEGER NOT NULL,
    signer     TEXT NOT NULL,
    message    TEXT NOT NULL,
    signature  TEXT NOT NULL,
    direction  TEXT NOT NULL,
    created_at REAL NOT NULL,
    PRIMARY KEY (job_id, role, kind, position, signer)
);

-- A drafter's per-job salt (docs/protocol.md, section 3), drawn once and stored before anything carrying it is
-- signed or sent, so that a restart or a resend carries the same one (node/jobs/sessions.py `drafter_salt`). Decimal
-- text: a salt is a uint64, which SQLite's INTEGER (int64) does not hold.
CREATE TABLE job_salts (
    job_id     INTEGER NOT NULL,
    role       TEXT NOT NULL,
    salt       TEXT NOT NULL,
    created_at REAL NOT NULL,
    PRIMARY KEY (job_id, role)
);
"""


def _create_table(name: str) -> str:
    """The `CREATE TABLE` statement of `name` in _SCHEMA (what a migration adds)."""
    return _SCHEMA[_SCHEMA.index(f"CREATE TABLE {name} ") :].split(";")[0]


def _salts_out_of_top_k(db) -> None:
    """v6 -> v7: every salt kept in a cycle-0 transcript's `top_k` JSON (under "salt") moves to `job_salts`.

    In Python, not SQL: SQLite's json_extract reads an integer past int64 as a float, and a salt is a uint64."""
    rows = db.execute("SELECT job_id, role, top_k, updated_at FROM cycles WHERE cycle = 0 AND top_k IS NOT NULL")
    for job_id, role, top_k, updated_at in rows.fetchall():
        extra = json.loads(top_k)
        if not isinstance(extra, dict) or "salt" not in extra:
            continue
        salt = int(extra.pop("salt"))
        if not 0 <= salt < 2**64:  # the contract's uint64: a store holding another value was not written by a node
            raise ValueError(f"job {job_id}: the stored salt {salt} is not a uint64")
        db.execute("INSERT INTO job_salts VALUES (?, ?, ?, ?)", (job_id, role, str(salt), updated_at))
        db.execute(
            "UPDATE cycles SET top_k = ? WHERE job_id = ? AND role = ? AND cycle = 0", (json.dumps(extra), job_id, role)
        )


# How a store of an older schema is brought to SCHEMA_VERSION, one step per version, in one store transaction: each
# step a list of SQL statements, or of functions of the connection where SQL cannot do it exactly.
_MIGRATIONS = {
    1: [  # v1 -> v2: disputes move out of `jobs`, where they were rows with role "<role>-dispute", keyed by dispute id
        _create_table("disputes"),
        "INSERT INTO disputes SELECT job_id, substr(role, 1, length(role) - length('-dispute')), status, params, "
        "updated_at FROM jobs WHERE role LIKE '%-dispute'",
        "DELETE FROM jobs WHERE role LIKE '%-dispute'",
    ],
    2: [_create_table("chain_binding")],  # v2 -> v3: unbound (bound when next opened with a binding)
    3: [_create_table("secrets")],  # v3 -> v4: a node's private values that never leave the store (audit seeds)
    4: [_create_table("link_messages")],  # v4 -> v5: transcript-mode jobs' signed messages (node/link)
    5: [  # v5 -> v6: reorg detection (logs processed before it have no block: a reorg never forgets them)
        _create_table("poller_blocks"),
        "ALTER TABLE processed_logs ADD COLUMN block_number INTEGER",
    ],
    6: [_create_table("job_salts"), _salts_out_of_top_k],  # v6 -> v7: the drafter's salt out of `top_k`
}
