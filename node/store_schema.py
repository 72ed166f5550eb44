"""The SQLite schema of the node's store (node/store.py) and the migrations that bring an older store to it.

Every table is created by `_SCHEMA` in a new store; an older store gets the tables of the versions it lacks, one
`_MIGRATIONS` step per version, in one store transaction (`NodeStore._open`).
"""

from __future__ import annotations

# v2: disputes have their own table (v1 kept them in `jobs` as role "<role>-dispute"); v3: the chain binding;
# v4: secrets; v5: `link_messages`, the signed messages of transcript-mode jobs (node/link); v6: `poller_blocks`,
# the hashes of the blocks an event poller processed (reorg detection, node/chain/events.py), a processed log's block
SCHEMA_VERSION = 6
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
"""


def _create_table(name: str) -> str:
    """The `CREATE TABLE` statement of `name` in _SCHEMA (what a migration adds)."""
    return _SCHEMA[_SCHEMA.index(f"CREATE TABLE {name} ") :].split(";")[0]


# How a store of an older schema is brought to SCHEMA_VERSION, one step per version, in one store transaction.
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
}
