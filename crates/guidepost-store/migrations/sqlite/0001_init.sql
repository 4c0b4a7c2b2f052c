-- Guidepost store, SQLite schema 1.
--
-- Definition entities (agents, guidelines, journeys, ...) are JSON documents with a version
-- for compare-and-set updates; every change to one bumps the definition revision, so the
-- server knows when an agent's compiled definition is stale. Sessions, events and turns are
-- relational: offsets are dense per session and unique, enforced here.

CREATE TABLE definition_revision (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    revision INTEGER NOT NULL
);
INSERT INTO definition_revision (id, revision) VALUES (1, 0);

CREATE TABLE documents (
    collection TEXT NOT NULL,
    id TEXT NOT NULL,
    created_us INTEGER NOT NULL,
    origin TEXT NOT NULL,
    version INTEGER NOT NULL,
    data TEXT NOT NULL,
    PRIMARY KEY (collection, id)
);
CREATE INDEX documents_by_creation ON documents (collection, created_us, id);
CREATE INDEX documents_by_origin ON documents (origin, collection);

CREATE TABLE variable_values (
    variable_id TEXT NOT NULL,
    key TEXT NOT NULL,
    id TEXT NOT NULL,
    last_modified_us INTEGER NOT NULL,
    data TEXT NOT NULL,
    PRIMARY KEY (variable_id, key)
);

CREATE TABLE sessions (
    id TEXT PRIMARY KEY,
    agent_id TEXT NOT NULL,
    customer_id TEXT NOT NULL,
    created_us INTEGER NOT NULL,
    next_offset INTEGER NOT NULL,
    version INTEGER NOT NULL,
    data TEXT NOT NULL
);
CREATE INDEX sessions_by_creation ON sessions (created_us, id);
CREATE INDEX sessions_by_agent ON sessions (agent_id, created_us);
CREATE INDEX sessions_by_customer ON sessions (customer_id, created_us);

CREATE TABLE events (
    id TEXT PRIMARY KEY,
    session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    "offset" INTEGER NOT NULL,
    source TEXT NOT NULL,
    kind TEXT NOT NULL,
    created_us INTEGER NOT NULL,
    trace_id TEXT NOT NULL,
    data TEXT NOT NULL,
    metadata TEXT NOT NULL,
    deleted INTEGER NOT NULL DEFAULT 0,
    UNIQUE (session_id, "offset")
);
CREATE INDEX events_by_trace ON events (session_id, trace_id);

CREATE TABLE turns (
    id TEXT PRIMARY KEY,
    session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    status TEXT NOT NULL,
    trigger_offset INTEGER NOT NULL,
    created_us INTEGER NOT NULL,
    started_us INTEGER,
    finished_us INTEGER,
    lease_owner TEXT,
    lease_until_us INTEGER,
    attempts INTEGER NOT NULL DEFAULT 0,
    error TEXT,
    state TEXT,
    trace TEXT
);
CREATE INDEX turns_by_session ON turns (session_id, created_us);
CREATE INDEX turns_by_status ON turns (status, created_us);

CREATE TABLE embeddings (
    key TEXT PRIMARY KEY,
    model TEXT NOT NULL,
    text TEXT NOT NULL,
    dims INTEGER NOT NULL,
    vector BLOB NOT NULL,
    created_us INTEGER NOT NULL
);
CREATE INDEX embeddings_by_model ON embeddings (model);
