-- A newer customer message asks the session's earlier turns to stop, through the
-- database, so a turn running in another process sees it.
ALTER TABLE turns ADD COLUMN cancel_requested INTEGER NOT NULL DEFAULT 0;
CREATE INDEX turns_by_session_status ON turns (session_id, status);
