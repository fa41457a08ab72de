"""The store's schema: the same tables on SQLite (results/farm.db, WAL) and PostgreSQL, versioned by
migrations.

Other packages (analysis, report, live, status) read these tables; keep them stable. A change is a
NEW migration appended to MIGRATIONS (never edit a shipped one), written in SQLite's DDL with the
types both backends take (TEXT, INTEGER, REAL; REAL becomes DOUBLE PRECISION on PostgreSQL). The
number of migrations applied is `PRAGMA user_version` on SQLite, the farm_schema table on
PostgreSQL.

Tables (the doc of each is in TABLE_DOCS, and repeated as SQL comments):

- experiments: one row per experiment name; the last loaded spec (JSON) and its hash.
- executions: one row per `farm run` process (pid, hostname, heartbeat, results folder); owner of
  leases and RUNNING runs, so a restarted farm can tell a dead process's work from a live one's.
- runs: one row per planned run (stable run_id from the planner); state PENDING, RUNNING, DONE,
  FAILED or SKIPPED; written before any phone is touched.
- attempts: one row per try of a run on a phone (outcome, error, achieved load, environment).
- devices: every phone ever seen, identity `host/serial`; capabilities from the probe; and the
  "charging disabled" marker that crash recovery uses to turn charging back on.
- metrics: per-run metrics (name, value, unit); (run_id, name) is unique so inserting the same
  result twice is harmless.
- events: an append-only log (faults, retries, state changes) shown by `farm status` and reports.
- leases: which execution holds which phone, with a heartbeat; two farm processes never use one
  phone at once.
- schedule_firings (migration 2): one row per slot a nightly schedule handled (run or skipped);
  the daemon's memory of what it did, and `farm schedule list`'s last outcome.
- layers (migration 6): per-run, per-layer results of programs that report layers (cnn's `layer`
  events): time, FLOPs, bytes, g and the im2col GEMM shape; (run_id, layer_index) is unique.

Times are UNIX seconds (REAL, UTC). JSON columns hold compact JSON text.
"""

from __future__ import annotations

TABLE_DOCS: dict[str, str] = {
    "experiments": "One row per experiment name: the last spec loaded (JSON) and its sha256.",
    "executions": (
        "One row per `farm run` process: pid, hostname, start/heartbeat/finish, status, and "
        "results_dir, the absolute folder on that hostname its runs' artifacts_dir are relative to."
    ),
    "runs": (
        "One row per planned run, keyed by the planner's stable run_id. state is PENDING, RUNNING, "
        "DONE, FAILED or SKIPPED; attempts counts tries; reason says why FAILED/SKIPPED; "
        "factors_json is the cell's factor assignment; device_id the phone it is bound to "
        "(or the phone it ran on when spread over equivalent phones)."
    ),
    "attempts": (
        "One row per try of a run: phone, execution, outcome (done, failed, timeout, lost, "
        "interrupted), error text, exit code, achieved background load, environment snapshot (JSON)."
    ),
    "devices": (
        "Every phone seen: device_id `host/serial`, identity, capabilities (probe JSON), last state, "
        "battery and temperature; charging_disabled=1 with charging_node/charging_enable_value "
        "while farm has charging off, so a restarted farm can restore it; clocks_restore_json "
        "(nodes and their old values, fixed performance mode) while farm holds the phone's clocks; "
        "screen_timeout_restore (the phone's own screen_off_timeout) while farm holds its screen on; "
        "quarantined_at, quarantine_reason and quarantined_by (execution) when a sweep's recovery "
        "ladder gave up on the phone (cleared when a sweep uses it again)."
    ),
    "metrics": "Per-run metrics: (run_id, name) unique; value REAL; unit text (ms, mJ, mW, ratio...).",
    "events": "Append-only log: time, experiment, run, phone, kind (fault, retry, state...), message.",
    "leases": (
        "Which execution holds which phone, with heartbeat_at (database clock); a lease whose "
        "execution stopped heartbeating for HEARTBEAT_STALE_S (or whose process is gone) expires "
        "and may be taken over, by exactly one claimant."
    ),
    "schedule_firings": (
        "One row per cron slot a schedule handled: schedule name, slot_at, trigger (cron, catch_up, "
        "manual), the experiment name the nightly's runs are stored under, outcome (running, ok, "
        "incomplete, error, timeout, interrupted, skipped), run counts, regressions flagged."
    ),
    "layers": (
        "Per-run layer results (programs that report layers, cnn): (run_id, layer_index) unique; "
        "name, kind (conv, maxpool, avgpool), time_ms (median over the run's iterations), min_ms, "
        "flops, bytes_moved, g (direct convs), conv_path, gemm_m/n/k (the im2col GEMM), fused_with."
    ),
}

_V1 = """
-- experiments: one row per experiment name; the last spec loaded (JSON) and its sha256.
CREATE TABLE experiments (
    name        TEXT PRIMARY KEY,
    spec_json   TEXT NOT NULL,
    spec_sha256 TEXT NOT NULL,
    source_path TEXT,
    created_at  REAL NOT NULL,
    updated_at  REAL NOT NULL
);

-- executions: one row per `farm run` process; owner of leases and RUNNING runs.
CREATE TABLE executions (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    experiment   TEXT,
    pid          INTEGER NOT NULL,
    hostname     TEXT NOT NULL,
    argv_json    TEXT,
    farm_version TEXT,
    started_at   REAL NOT NULL,
    heartbeat_at REAL NOT NULL,
    finished_at  REAL,
    status       TEXT NOT NULL DEFAULT 'running'   -- running | finished | interrupted | crashed
);

-- runs: one row per planned run; the unit of durability.
CREATE TABLE runs (
    run_id        TEXT PRIMARY KEY,
    experiment    TEXT NOT NULL,
    cell_id       TEXT NOT NULL,
    factors_json  TEXT NOT NULL,
    repetition    INTEGER NOT NULL,
    device_id     TEXT,                 -- bound phone (host/serial); NULL = any equivalent phone
    seq           INTEGER NOT NULL,     -- position in the planned order
    state         TEXT NOT NULL DEFAULT 'PENDING',
    attempts      INTEGER NOT NULL DEFAULT 0,
    reason        TEXT,
    execution_id  INTEGER,              -- the execution that holds it while RUNNING
    ran_on        TEXT,                 -- phone of the last attempt
    artifacts_dir TEXT,                 -- relative to the results dir
    created_at    REAL NOT NULL,
    started_at    REAL,
    finished_at   REAL
);
CREATE INDEX runs_by_experiment ON runs (experiment, state, seq);

-- attempts: one row per try of a run on a phone.
CREATE TABLE attempts (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id        TEXT NOT NULL REFERENCES runs (run_id),
    attempt       INTEGER NOT NULL,
    device_id     TEXT NOT NULL,
    execution_id  INTEGER,
    started_at    REAL NOT NULL,
    finished_at   REAL,
    outcome       TEXT,                 -- done | failed | timeout | lost | interrupted
    error         TEXT,
    exit_code     INTEGER,
    load_target   REAL,
    load_achieved REAL,
    env_json      TEXT,
    UNIQUE (run_id, attempt)
);

-- devices: every phone seen; charging_disabled marks phones farm must restore.
CREATE TABLE devices (
    device_id              TEXT PRIMARY KEY,  -- host/serial
    host                   TEXT NOT NULL,
    serial                 TEXT NOT NULL,
    adb_serial             TEXT,
    model                  TEXT,
    abi                    TEXT,
    capabilities_json      TEXT,
    state                  TEXT,
    battery_pct            REAL,
    temperature_c          REAL,
    last_seen              REAL,
    charging_disabled      INTEGER NOT NULL DEFAULT 0,
    charging_node          TEXT,
    charging_enable_value  TEXT
);

-- metrics: per-run metrics, idempotent on (run_id, name).
CREATE TABLE metrics (
    run_id TEXT NOT NULL REFERENCES runs (run_id),
    name   TEXT NOT NULL,
    value  REAL,
    unit   TEXT,
    PRIMARY KEY (run_id, name)
);

-- events: append-only log.
CREATE TABLE events (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    ts         REAL NOT NULL,
    experiment TEXT,
    run_id     TEXT,
    device_id  TEXT,
    kind       TEXT NOT NULL,
    message    TEXT NOT NULL,
    data_json  TEXT
);
CREATE INDEX events_by_experiment ON events (experiment, ts);

-- leases: which execution holds which phone.
CREATE TABLE leases (
    device_id    TEXT PRIMARY KEY,
    execution_id INTEGER NOT NULL,
    pid          INTEGER NOT NULL,
    hostname     TEXT NOT NULL,
    acquired_at  REAL NOT NULL,
    heartbeat_at REAL NOT NULL
);
"""

# Migration 2 (additive): nightly schedules (farm.schedule) record each slot they handled.
_V2 = """
-- schedule_firings: one row per cron slot a schedule handled (run or skipped).
CREATE TABLE schedule_firings (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    schedule        TEXT NOT NULL,
    slot_at         REAL NOT NULL,       -- the cron slot (or the moment of a manual run)
    trigger         TEXT NOT NULL,       -- cron | catch_up | manual
    experiment      TEXT,                -- qualified name the nightly's runs are stored under
    base_experiment TEXT,                -- qualified name of the experiment file it re-runs
    started_at      REAL NOT NULL,
    finished_at     REAL,
    outcome         TEXT NOT NULL,       -- farm.schedule.model.Outcome: running, ok, timeout, ...
    done            INTEGER,
    failed          INTEGER,
    pending         INTEGER,
    regressions     INTEGER,
    message         TEXT
);
CREATE INDEX schedule_firings_by_schedule ON schedule_firings (schedule, slot_at);
"""

# Migration 3 (additive): where each execution writes run folders, so a report on another machine
# can say which runs' artifacts live elsewhere (runs.artifacts_dir is relative to that folder).
_V3 = """
-- executions.results_dir: absolute local results folder of that farm process (on its hostname).
ALTER TABLE executions ADD COLUMN results_dir TEXT;
"""

# Migration 4 (additive): the clock-restore marker (farm.engine.clocks), like charging's.
_V4 = """
-- devices.clocks_restore_json: set while farm holds the phone's clocks; what puts them back.
ALTER TABLE devices ADD COLUMN clocks_restore_json TEXT;
"""

# Migration 5 (additive): the recovery ladder's last word on a phone (farm.engine.ladder).
_V5 = """
-- devices.quarantined_*: set when a sweep gave up on the phone, cleared when one uses it again.
ALTER TABLE devices ADD COLUMN quarantined_at REAL;
ALTER TABLE devices ADD COLUMN quarantine_reason TEXT;
ALTER TABLE devices ADD COLUMN quarantined_by INTEGER;
"""

# Migration 6 (additive): per-layer results (farm.store.layers), so reports and the resource model
# read what each layer measured without the run folders (a shared store's are on other machines).
_V6 = """
-- layers: per-run, per-layer results of programs that report layers (cnn).
CREATE TABLE layers (
    run_id      TEXT NOT NULL REFERENCES runs (run_id),
    layer_index INTEGER NOT NULL,
    name        TEXT NOT NULL,
    kind        TEXT NOT NULL,       -- conv | maxpool | avgpool
    time_ms     REAL NOT NULL,       -- median over the run's measured iterations
    min_ms      REAL,
    flops       REAL,                -- multiply-add = 2
    bytes_moved REAL,                -- input + weights + output at the storage precision
    g           INTEGER,             -- output maps per work item (direct convs)
    conv_path   TEXT,                -- im2col-gemm | direct
    gemm_m      INTEGER,
    gemm_n      INTEGER,
    gemm_k      INTEGER,
    fused_with  TEXT,                -- the other layer of a fused expand pair
    PRIMARY KEY (run_id, layer_index)
);
"""

# Append only. Index i holds the SQL that takes schema version i to i + 1 (on both backends:
# farm.store.backend.sql.postgres_ddl renders the two type names that differ).
# Migration 7 (additive): the screen-timeout restore marker (farm.engine.lifecycle), like charging's.
_V7 = """
-- devices.screen_timeout_restore: set while farm holds the screen on (the user-activity timeout
-- at its maximum); the phone's own screen_off_timeout to put back ('null': the setting was unset).
ALTER TABLE devices ADD COLUMN screen_timeout_restore TEXT;
"""

MIGRATIONS: tuple[str, ...] = (_V1, _V2, _V3, _V4, _V5, _V6, _V7)

SCHEMA_VERSION = len(MIGRATIONS)
