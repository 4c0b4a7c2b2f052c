-- A turn's tool calls, recorded before each is sent and again when it returns, so a turn
-- that runs again (its process died, it was handed back at shutdown, another replica took
-- its lease) reuses what an earlier attempt did instead of doing it twice. The id is the
-- call's idempotency key: derived from the turn, the tool and how many calls of that tool
-- the turn decided before it.
CREATE TABLE tool_calls (
    id TEXT PRIMARY KEY,
    turn_id TEXT NOT NULL REFERENCES turns (id) ON DELETE CASCADE,
    tool TEXT NOT NULL,
    occurrence INTEGER NOT NULL,
    arguments TEXT NOT NULL,
    consequential INTEGER NOT NULL,
    state TEXT NOT NULL,
    outcome TEXT,
    sends INTEGER NOT NULL,
    worker TEXT NOT NULL,
    started_us INTEGER NOT NULL,
    finished_us INTEGER,
    UNIQUE (turn_id, tool, occurrence)
);
CREATE INDEX tool_calls_by_state ON tool_calls (state, started_us);
