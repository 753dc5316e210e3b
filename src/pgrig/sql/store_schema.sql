-- The results store's tables, for SQLite and PostgreSQL alike: pgrig.store
-- gives runs.id each one's auto-increment primary key in place of the
-- placeholder. No semicolon in comments here: the PostgreSQL backend splits
-- this file on them.
CREATE TABLE IF NOT EXISTS meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS studies (
    id            TEXT PRIMARY KEY,
    name          TEXT NOT NULL,
    target        TEXT NOT NULL,
    status        TEXT NOT NULL,
    started_at    TEXT NOT NULL,
    finished_at   TEXT,
    params        TEXT NOT NULL,
    pgrig_version TEXT NOT NULL,
    environment   TEXT,
    target_environments TEXT
);
CREATE TABLE IF NOT EXISTS runs (
    id            {serial},
    study_id      TEXT NOT NULL REFERENCES studies(id),
    key           TEXT NOT NULL,
    kind          TEXT NOT NULL,
    target        TEXT NOT NULL,
    params        TEXT NOT NULL,
    status        TEXT NOT NULL CHECK (status IN ('ok', 'failed', 'skipped')),
    reason        TEXT,
    result        TEXT,
    raw           TEXT NOT NULL,
    tool_versions TEXT NOT NULL,
    started_at    TEXT NOT NULL,
    finished_at   TEXT NOT NULL,
    UNIQUE (study_id, key)
);
-- A run's per-second samples (the monitor's), one row each, written with the
-- run in one transaction as they are read from the monitor's spool: a long
-- run's are never all in pgrig's memory. The run's result keeps an empty
-- "samples" list in their place. Stores from before (schema 1) hold them in
-- the result's JSON: both are read.
CREATE TABLE IF NOT EXISTS samples (
    run_id BIGINT NOT NULL REFERENCES runs(id),
    n      INTEGER NOT NULL,
    value  TEXT NOT NULL,
    PRIMARY KEY (run_id, n)
);
