"""The node's SQLite store: schema and file checks, tx records, cursors, processed logs, transcripts."""

from __future__ import annotations

import sqlite3
import threading

import pytest

from node.store import (
    SCHEMA_VERSION,
    TX_MINED,
    TX_REJECTED,
    TX_SENT,
    TX_SIGNED,
    TX_SUPERSEDED,
    IdempotencyConflict,
    NodeStore,
    StoredCycle,
    StoredDispute,
    StoreError,
)

ADDRESS = "0x" + "ab" * 20
HASH_A = "0x" + "11" * 32
HASH_B = "0x" + "22" * 32


@pytest.fixture
def path(tmp_path):
    return tmp_path / "node.db"


@pytest.fixture
def store(path):
    with NodeStore(path) as node_store:
        yield node_store


# --- the file ---------------------------------------------------------------------------------------


def test_new_store_is_versioned_and_in_wal_mode(store, path):
    raw = sqlite3.connect(path)
    assert raw.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    assert raw.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    raw.close()


def test_durability_is_an_explicit_choice(path, tmp_path):
    from node.store import DURABILITY_POWER, DURABILITY_PROCESS

    assert NodeStore(path).durability == DURABILITY_POWER  # the library default: fsync every commit
    for durability, synchronous in ((DURABILITY_POWER, 2), (DURABILITY_PROCESS, 1)):  # FULL, NORMAL
        with NodeStore(tmp_path / f"{durability}.db", durability=durability) as store:
            assert store._db.execute("PRAGMA synchronous").fetchone()[0] == synchronous
            assert store._db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    with pytest.raises(ValueError, match="durability"):
        NodeStore(tmp_path / "x.db", durability="sometimes")


def test_a_commit_without_fsync_survives_the_process_being_killed(tmp_path):
    """DURABILITY_PROCESS: a record committed by a process that is then killed (SIGKILL, no cleanup) is there."""
    import os
    import signal
    import subprocess
    import sys

    path = tmp_path / "killed.db"
    code = (
        "import os, signal, sys; from node.store import NodeStore, DURABILITY_PROCESS\n"
        "s = NodeStore(sys.argv[1], durability=DURABILITY_PROCESS)\n"
        f"s.record_tx('k', '{ADDRESS}', 'd', '{HASH_A}', b'raw', 5)\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    done = subprocess.run([sys.executable, "-c", code, str(path)], cwd=os.getcwd())
    assert done.returncode == -signal.SIGKILL
    with NodeStore(path) as store:
        assert store.sent_tx("k").tx_hash == HASH_A and store.sent_tx("k").status == TX_SIGNED


def test_data_survives_reopening(path):
    with NodeStore(path) as store:
        store.set_cursor("market", 41)
        store.save_job(7, "drafter", "running", {"gamma": 4})
    with NodeStore(path) as store:
        assert store.cursor("market") == 41
        assert store.job(7, "drafter").params == {"gamma": 4}


def test_file_that_is_not_sqlite_is_refused(path):
    path.write_bytes(b"definitely not a database" * 100)
    with pytest.raises(StoreError, match="not a usable node store"):
        NodeStore(path)


def test_sqlite_file_of_another_application_is_refused(path):
    foreign = sqlite3.connect(path)
    foreign.execute("CREATE TABLE invoices (id INTEGER)")
    foreign.commit()
    foreign.close()
    with pytest.raises(StoreError, match="another application"):
        NodeStore(path)
    assert sqlite3.connect(path).execute("SELECT name FROM sqlite_master").fetchall() == [("invoices",)]


def test_store_from_an_unknown_schema_version_is_refused(path):
    NodeStore(path).close()
    raw = sqlite3.connect(path)
    raw.execute(f"PRAGMA user_version={SCHEMA_VERSION + 1}")
    raw.close()
    with pytest.raises(StoreError, match=f"v{SCHEMA_VERSION + 1}"):
        NodeStore(path)


def test_failed_transaction_writes_nothing(store):
    with pytest.raises(RuntimeError), store.transaction():
        store.set_cursor("market", 10)
        store.save_job(1, "verifier", "open")
        raise RuntimeError("handler failed")
    assert store.cursor("market") is None
    assert store.job(1, "verifier") is None


def test_concurrent_writers_from_threads_do_not_interfere(store):
    def write(thread: int) -> None:
        for i in range(50):
            store.save_cycle(thread, "drafter", i, proposals=[i])

    threads = [threading.Thread(target=write, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(len(store.cycles(t, "drafter")) == 50 for t in range(4))


# --- sent transactions ------------------------------------------------------------------------------


def test_recorded_tx_round_trips(store):
    store.record_tx("job:1:cycle:0:commitDraft", ADDRESS, "digest", HASH_A, b"\x02raw", 5)
    store.set_tx_status("job:1:cycle:0:commitDraft", TX_MINED, block_number=12)
    record = store.sent_tx("job:1:cycle:0:commitDraft")
    assert (record.tx_hash, record.raw_tx, record.nonce, record.status, record.block_number) == (
        HASH_A,
        b"\x02raw",
        5,
        TX_MINED,
        12,
    )
    assert store.sent_tx("job:1:cycle:1:commitDraft") is None


def test_live_tx_is_never_replaced_but_a_dead_one_is(store):
    store.record_tx("k", ADDRESS, "digest", HASH_A, b"a", 0)
    with pytest.raises(StoreError, match="live transaction"):
        store.record_tx("k", ADDRESS, "digest", HASH_B, b"b", 1)
    store.set_tx_status("k", TX_SUPERSEDED)
    store.record_tx("k", ADDRESS, "digest", HASH_B, b"b", 1)
    assert (store.sent_tx("k").tx_hash, store.sent_tx("k").status) == (HASH_B, TX_SIGNED)


def test_key_reused_for_a_different_request_is_refused(store):
    store.record_tx("k", ADDRESS, "digest-1", HASH_A, b"a", 0)
    store.set_tx_status("k", TX_REJECTED)
    with pytest.raises(IdempotencyConflict):
        store.record_tx("k", ADDRESS, "digest-2", HASH_B, b"b", 1)


def test_outstanding_txs_are_the_unconfirmed_ones_by_nonce(store):
    for key, nonce, status in [("c", 2, TX_SENT), ("a", 0, TX_MINED), ("d", 3, TX_SIGNED), ("b", 1, TX_REJECTED)]:
        store.record_tx(key, ADDRESS, key, "0x" + f"{nonce:064x}", b"", nonce)
        store.set_tx_status(key, status)
    store.record_tx("other", "0x" + "cd" * 20, "x", HASH_B, b"", 0)
    assert [r.key for r in store.outstanding_txs(ADDRESS.upper().replace("0X", "0x"))] == ["c", "d"]


# --- events -----------------------------------------------------------------------------------------


def test_cursor_starts_unset_and_moves(store):
    assert store.cursor("market") is None
    store.set_cursor("market", 3)
    store.set_cursor("market", 9)
    assert store.cursor("market") == 9
    assert store.cursor("registry") is None


def test_seen_identifies_logs_by_tx_hash_and_index_in_any_shape(store):
    class Decoded:
        tx_hash = HASH_A.upper().replace("0X", "0x")
        log_index = 3

    raw_log = {"transactionHash": bytes.fromhex(HASH_A[2:]), "logIndex": 3}
    assert not store.seen(Decoded())
    store.mark_seen(raw_log)
    store.mark_seen(raw_log)  # idempotent
    assert store.seen(Decoded())
    assert not store.seen({"transactionHash": HASH_A, "logIndex": 4})
    assert not store.seen(raw_log, consumer="watchdog")  # each consumer keeps its own record


# --- transcripts ------------------------------------------------------------------------------------


def test_job_status_updates_keep_params(store):
    store.save_job(3, "verifier", "open", {"gamma": 5, "maxTokens": 64})
    store.save_job(3, "verifier", "running")
    store.save_job(3, "drafter", "running", {"gamma": 5})
    assert store.job(3, "verifier").status == "running"
    assert store.job(3, "verifier").params == {"gamma": 5, "maxTokens": 64}
    assert [j.role for j in store.jobs(status="running")] == ["drafter", "verifier"]
    assert [j.job_id for j in store.jobs(role="drafter")] == [3]


def test_disputes_are_kept_apart_from_jobs(store):
    store.save_job(4, "referee", "active")
    store.save_dispute(4, "referee", "drawn", {})
    store.save_dispute(4, "referee", "judged", {"verdict": 2, "salt": "0x01"})
    store.save_dispute(4, "referee", "done")  # params kept
    assert store.dispute(4, "referee").params == {"verdict": 2, "salt": "0x01"}
    assert [(d.dispute_id, d.status) for d in store.disputes(role="referee")] == [(4, "done")]
    assert [(j.job_id, j.status) for j in store.jobs()] == [(4, "active")]
    assert store.dispute(4, "drafter") is None and store.job(5, "referee") is None


V1_JOBS_TABLE = (
    "CREATE TABLE jobs (job_id INTEGER NOT NULL, role TEXT NOT NULL, status TEXT NOT NULL, "
    "params TEXT NOT NULL, updated_at REAL NOT NULL, PRIMARY KEY (job_id, role))"
)


def test_a_v1_store_is_migrated_with_its_disputes_in_their_own_table(path):
    """Schema v1 kept disputes in `jobs` with the role "<role>-dispute": opening such a store moves them (a referee's
    verdict and salt must survive an upgrade, or it could not reveal what it committed)."""
    from node.store import APPLICATION_ID

    NodeStore(path).close()  # a current store, taken back to v1: no disputes table, disputes as jobs rows
    raw = sqlite3.connect(path)
    raw.execute("DROP TABLE job_salts")
    raw.execute("DROP TABLE chain_binding")
    raw.execute("DROP TABLE secrets")
    raw.execute("DROP TABLE link_messages")
    raw.execute("DROP TABLE poller_blocks")
    raw.execute("ALTER TABLE processed_logs DROP COLUMN block_number")
    raw.execute("DROP TABLE disputes")
    raw.execute("DROP TABLE jobs")
    raw.execute(V1_JOBS_TABLE)
    raw.executemany(
        "INSERT INTO jobs VALUES (?, ?, ?, ?, 0)",
        [
            (7, "drafter", "active", '{"verifier": "0x01"}'),
            (7, "drafter-dispute", "open", '{"job": 7}'),
            (3, "referee-dispute", "judged", '{"verdict": 2, "salt": "0xab"}'),
            (8, "verifier", "done", "{}"),
        ],
    )
    raw.execute("PRAGMA user_version=1")
    raw.commit()
    raw.close()
    with NodeStore(path) as store:
        assert [(j.job_id, j.role, j.status) for j in store.jobs()] == [
            (7, "drafter", "active"),
            (8, "verifier", "done"),
        ]
        assert store.dispute(3, "referee") == StoredDispute(3, "referee", "judged", {"verdict": 2, "salt": "0xab"})
        assert store.dispute(7, "drafter").params == {"job": 7}
        assert store.job(7, "drafter").params == {"verifier": "0x01"}
    raw = sqlite3.connect(path)
    assert raw.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    assert raw.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
    raw.close()


def test_cycle_transcript_is_merged_as_the_cycle_progresses(store):
    big_wad = 2**64 - 1  # past int64: must come back exact
    store.save_cycle(
        9,
        "verifier",
        0,
        proposals=[5, 17, 2],
        q=[big_wad, 10**18, 1],
        top_k=[[[5, 0.7], [6, 0.3]]],
        tx_hashes={"commitDraft": HASH_A},
    )
    store.save_cycle(
        9,
        "verifier",
        0,
        p=[10**18, 0, 3],
        reveal=b"\x01" * 32,
        accepted=1,
        emitted_tokens=[5, 6],
        tx_hashes={"submitVerification": HASH_B},
    )
    store.save_cycle(9, "verifier", 1, proposals=[1])

    assert store.cycle(9, "verifier", 0) == StoredCycle(
        job_id=9,
        role="verifier",
        cycle=0,
        proposals=[5, 17, 2],
        q=[big_wad, 10**18, 1],
        p=[10**18, 0, 3],
        top_k=[[[5, 0.7], [6, 0.3]]],
        reveal=b"\x01" * 32,
        accepted=1,
        emitted_tokens=[5, 6],
        tx_hashes={"commitDraft": HASH_A, "submitVerification": HASH_B},
    )
    assert [c.cycle for c in store.cycles(9, "verifier")] == [0, 1]
    assert store.cycle(9, "drafter", 0) is None


def test_ids_beyond_int64_are_refused_clearly(store):
    with pytest.raises(ValueError, match="job id"):
        store.save_job(2**64, "drafter", "open")


# --- the chain binding --------------------------------------------------------------------------------

CHAIN_A = dict(chain_id=31337, genesis_hash="0x" + "aa" * 32, addresses={"InferenceMarket": "0x" + "01" * 20})
CHAIN_B = dict(chain_id=31337, genesis_hash="0x" + "bb" * 32, addresses={"InferenceMarket": "0x" + "01" * 20})


def _binding(chain: dict):
    from node.store import StoreBinding

    return StoreBinding.of(**chain)


def test_a_store_is_bound_to_the_chain_it_is_first_opened_with(path):
    with NodeStore(path, binding=_binding(CHAIN_A)) as store:
        assert store.binding() == _binding(CHAIN_A) and store.replaced is None
        store.set_cursor("events", 69)
    with NodeStore(path, binding=_binding(CHAIN_A)) as store:  # the same chain: the same store
        assert store.cursor("events") == 69 and store.replaced is None
    with NodeStore(path) as store:  # opened without a binding (tools, tests): nothing changes
        assert store.binding() == _binding(CHAIN_A) and store.cursor("events") == 69


@pytest.mark.parametrize(
    "other",
    [
        CHAIN_B,  # a restarted dev chain: same id and addresses, another genesis block
        {**CHAIN_A, "chain_id": 1},
        {**CHAIN_A, "addresses": {"InferenceMarket": "0x" + "02" * 20}},  # a second deployment on the same chain
    ],
)
def test_a_store_of_another_chain_is_moved_aside_and_a_fresh_one_started(path, other, caplog):
    with NodeStore(path, binding=_binding(CHAIN_A)) as store:
        store.set_cursor("events", 69)
        store.save_job(1, "verifier", "done")
    with caplog.at_level("WARNING", logger="verispec.store"):
        store = NodeStore(path, binding=_binding(other))
    with store:
        assert store.binding() == _binding(other)
        assert store.cursor("events") is None and store.jobs() == []  # job 1 of the new chain is a new job
        backup = store.replaced
    assert backup == path.with_name(f"node.db.{_binding(CHAIN_A).tag}.bak") and backup.name.startswith("node.db.31337-")
    [record] = [r for r in caplog.records if r.name == "verispec.store"]
    assert str(backup.name) in record.getMessage() and "fresh store" in record.getMessage()
    with NodeStore(backup) as old:  # the old store is kept whole, still bound to its chain
        assert old.cursor("events") == 69 and old.job(1, "verifier").status == "done"
        assert old.binding() == _binding(CHAIN_A)
    # back and forth: a second store of chain A moved aside does not overwrite the first backup
    with NodeStore(path, binding=_binding(CHAIN_A)) as store:
        assert store.replaced.name.endswith(".bak") and store.replaced != backup
    assert backup.exists()


def test_a_salt_is_made_once_and_kept_across_reopening(path):
    from node.jobs.sessions import drafter_salt

    with NodeStore(path) as store:
        assert store.job_salt(4, "drafter") is None
        assert store.job_salt(4, "drafter", make=lambda: 2**64 - 1) == 2**64 - 1  # a uint64 past int64: exact
        assert store.job_salt(4, "drafter", make=lambda: 5) == 2**64 - 1  # made once: the stored one stays
        assert store.job_salt(4, "verifier") is None  # per (job, role)
        with pytest.raises(ValueError, match="uint64"):
            store.job_salt(5, "drafter", make=lambda: 2**64)
        assert store.job_salt(5, "drafter") is None  # nothing stored by the refused one
        salt = drafter_salt(store, 6, "drafter")  # the one draw site: stored before it is returned
    with NodeStore(path) as store:
        assert store.job_salt(4, "drafter") == 2**64 - 1
        assert drafter_salt(store, 6, "drafter") == salt == store.job_salt(6, "drafter")


def test_a_v6_store_is_migrated_with_its_salts_out_of_the_transcripts(path):
    """Schema v6 kept a drafter's salt in its cycle-0 transcript's `top_k` JSON (under "salt"): opening such a store
    moves it to `job_salts`, exactly (a uint64), and leaves the rest of the transcript as it was. A restart of the
    drafter must find the salt it committed with, or a resend of commitFirstDraft would carry another."""
    q_top = [[[5, 700], [6, 300]]]
    with NodeStore(path) as store:  # a current store, taken back to v6: no job_salts, the salt in top_k
        store.save_cycle(7, "drafter", 0, proposals=[5], q=[700], top_k={"q_top": q_top, "salt": 2**64 - 1})
        store.save_cycle(8, "drafter", 0, proposals=[5], q=[700], top_k={"q_top": q_top, "salt": 3})
        store.save_cycle(8, "drafter", 1, proposals=[6], q=[300], top_k={"q_top": q_top})
        store.save_cycle(9, "drafter", 0, proposals=[5], q=[700], top_k={"q_top": q_top})  # decided, never sent
        store.save_cycle(7, "verifier", 0, p=[1], top_k={"out_token": 2, "p_top": q_top})
        store.save_cycle(10, "verifier", 0, p=[1])
    raw = sqlite3.connect(path)
    raw.execute("DROP TABLE job_salts")
    raw.execute("PRAGMA user_version=6")
    raw.commit()
    raw.close()
    with NodeStore(path) as store:
        assert store.job_salt(7, "drafter") == 2**64 - 1 and store.job_salt(8, "drafter") == 3
        assert store.job_salt(9, "drafter") is None and store.job_salt(7, "verifier") is None
        assert store.cycle(7, "drafter", 0).top_k == {"q_top": q_top}  # the salt is out of the transcript
        assert store.cycle(8, "drafter", 0).top_k == store.cycle(8, "drafter", 1).top_k == {"q_top": q_top}
        assert store.cycle(7, "verifier", 0).top_k == {"out_token": 2, "p_top": q_top}
        assert store.cycle(10, "verifier", 0).top_k is None
    raw = sqlite3.connect(path)
    assert raw.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 7
    raw.close()


def test_a_v6_store_with_a_salt_no_node_wrote_is_refused_and_left_as_it_was(path):
    """A cycle-0 transcript whose "salt" is not a uint64 was not written by a node: opening the store is one
    StoreError naming it, and the migration's transaction rolls back (still v6, the transcript untouched)."""
    with NodeStore(path) as store:
        store.save_cycle(7, "drafter", 0, proposals=[5], q=[700], top_k={"salt": 2**64})
    raw = sqlite3.connect(path)
    raw.execute("DROP TABLE job_salts")
    raw.execute("PRAGMA user_version=6")
    raw.commit()
    raw.close()
    with pytest.raises(StoreError, match=r"cannot migrate from v6: job 7: the stored salt 18446744073709551616"):
        NodeStore(path)
    raw = sqlite3.connect(path)
    assert raw.execute("PRAGMA user_version").fetchone()[0] == 6
    assert raw.execute("SELECT top_k FROM cycles WHERE job_id = 7").fetchone()[0] == '{"salt": 18446744073709551616}'
    raw.close()


def test_a_v2_store_is_migrated_and_bound_keeping_its_data(path):
    NodeStore(path).close()  # a current store taken back to v2 (no tables of v3 on)
    raw = sqlite3.connect(path)
    raw.execute("DROP TABLE job_salts")
    raw.execute("DROP TABLE chain_binding")
    raw.execute("DROP TABLE secrets")
    raw.execute("DROP TABLE link_messages")
    raw.execute("DROP TABLE poller_blocks")
    raw.execute("ALTER TABLE processed_logs DROP COLUMN block_number")
    raw.execute("PRAGMA user_version=2")
    raw.execute("INSERT INTO event_cursors VALUES ('verifier-events', 12)")
    raw.commit()
    raw.close()
    with NodeStore(path, binding=_binding(CHAIN_A)) as store:
        assert store.replaced is None and store.cursor("verifier-events") == 12
        assert store.binding() == _binding(CHAIN_A)
    raw = sqlite3.connect(path)
    assert raw.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 7
    raw.close()
