-- Base schema. Times are Unix milliseconds (UTC); durations are microseconds.
-- Text columns are NOT NULL DEFAULT '' so that readers never meet NULL strings.

CREATE TABLE sessions (
    id               TEXT PRIMARY KEY,
    title            TEXT NOT NULL DEFAULT '',
    agent            TEXT NOT NULL DEFAULT '',
    model            TEXT NOT NULL DEFAULT '',
    engine_profile   TEXT NOT NULL DEFAULT '',
    -- A child reads its parent's messages in place, so a parent cannot go while children exist.
    parent_id        TEXT REFERENCES sessions (id) ON DELETE RESTRICT,
    link_kind        TEXT NOT NULL DEFAULT '',
    inherit_from     INTEGER,
    inherit_to       INTEGER,
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL,
    prompt_tokens    INTEGER NOT NULL DEFAULT 0,
    cached_tokens    INTEGER NOT NULL DEFAULT 0,
    generated_tokens INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX sessions_parent ON sessions (parent_id);
CREATE INDEX sessions_agent ON sessions (agent, updated_at);

CREATE TABLE turns (
    id         INTEGER PRIMARY KEY,
    session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    status     TEXT NOT NULL DEFAULT 'open', -- open, done, interrupted
    started_at INTEGER NOT NULL,
    ended_at   INTEGER
);
CREATE INDEX turns_session_status ON turns (session_id, status);

-- AUTOINCREMENT: ids are never reused, because forks, logs and users refer to messages by id.
CREATE TABLE messages (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id       TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    turn_id          INTEGER REFERENCES turns (id) ON DELETE SET NULL,
    prelude          INTEGER NOT NULL DEFAULT 0, -- 1: shown before the inherited messages (a summary)
    role             TEXT NOT NULL,
    content          TEXT NOT NULL DEFAULT '',
    reasoning        TEXT NOT NULL DEFAULT '',
    tool_call_id     TEXT NOT NULL DEFAULT '',
    tool_name        TEXT NOT NULL DEFAULT '',
    finish_reason    TEXT NOT NULL DEFAULT '',
    interrupted      INTEGER NOT NULL DEFAULT 0,
    has_timings      INTEGER NOT NULL DEFAULT 0,
    prompt_tokens    INTEGER NOT NULL DEFAULT 0,
    cached_tokens    INTEGER NOT NULL DEFAULT 0,
    generated_tokens INTEGER NOT NULL DEFAULT 0,
    tokens_per_second REAL NOT NULL DEFAULT 0,
    draft_tokens     INTEGER NOT NULL DEFAULT 0,
    draft_accepted   INTEGER NOT NULL DEFAULT 0,
    ttft_us          INTEGER NOT NULL DEFAULT 0,
    duration_us      INTEGER NOT NULL DEFAULT 0,
    created_at       INTEGER NOT NULL
);
CREATE INDEX messages_session ON messages (session_id, id);

CREATE TABLE tool_calls (
    message_id INTEGER NOT NULL REFERENCES messages (id) ON DELETE CASCADE,
    position   INTEGER NOT NULL,
    call_id    TEXT NOT NULL DEFAULT '',
    name       TEXT NOT NULL DEFAULT '',
    arguments  TEXT NOT NULL DEFAULT '', -- byte for byte as the model produced it, valid JSON or not
    PRIMARY KEY (message_id, position)
) WITHOUT ROWID;

-- Images are content-addressed: a screenshot sent twice, or inherited by a fork, is stored once.
CREATE TABLE blobs (
    sha256 TEXT PRIMARY KEY,
    mime   TEXT NOT NULL DEFAULT '',
    width  INTEGER NOT NULL DEFAULT 0,
    height INTEGER NOT NULL DEFAULT 0,
    size   INTEGER NOT NULL,
    data   BLOB NOT NULL
);

CREATE TABLE message_images (
    message_id INTEGER NOT NULL REFERENCES messages (id) ON DELETE CASCADE,
    position   INTEGER NOT NULL,
    sha256     TEXT NOT NULL REFERENCES blobs (sha256),
    PRIMARY KEY (message_id, position)
) WITHOUT ROWID;
CREATE INDEX message_images_sha256 ON message_images (sha256);

CREATE TABLE tool_runs (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id  TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    turn_id     INTEGER REFERENCES turns (id) ON DELETE SET NULL,
    message_id  INTEGER REFERENCES messages (id) ON DELETE CASCADE,
    call_id     TEXT NOT NULL DEFAULT '',
    name        TEXT NOT NULL,
    arguments   TEXT NOT NULL DEFAULT '',
    result      TEXT NOT NULL DEFAULT '',
    error       TEXT NOT NULL DEFAULT '',
    duration_us INTEGER NOT NULL DEFAULT 0,
    started_at  INTEGER NOT NULL
);
CREATE INDEX tool_runs_session ON tool_runs (session_id, id);

CREATE TABLE engine_events (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id  TEXT REFERENCES sessions (id) ON DELETE CASCADE,
    kind        TEXT NOT NULL,
    at          INTEGER NOT NULL,
    duration_us INTEGER NOT NULL DEFAULT 0,
    detail      TEXT NOT NULL DEFAULT ''
);
CREATE INDEX engine_events_session ON engine_events (session_id, at);
CREATE INDEX engine_events_at ON engine_events (at);

-- The search index (search_fts) and the triggers that keep it in step with deletes are made by the
-- store itself (index.go), because which full-text module it uses depends on how SQLite was compiled.
