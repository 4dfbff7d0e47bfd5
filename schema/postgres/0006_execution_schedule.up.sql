-- Scheduled runs, retry backoff and cancellation.
--   * run_at_ms: not claimable before it (a new execution: its RunAt, else
--     its creation time; a retry: now + min(backoff x 2^(attempts-1), 24 h));
--   * retry_backoff_ms: 0 (a retry is claimable at once) to 24 h;
--   * state 'cancelled' for executions, and for the attempt a cancel ended.

ALTER TABLE executions ADD COLUMN run_at_ms BIGINT;
UPDATE executions SET run_at_ms = created_at_ms;
ALTER TABLE executions ALTER COLUMN run_at_ms SET NOT NULL;
ALTER TABLE executions ADD COLUMN retry_backoff_ms BIGINT NOT NULL DEFAULT 0
    CHECK (retry_backoff_ms BETWEEN 0 AND 86400000);

ALTER TABLE executions DROP CONSTRAINT executions_state_check;
ALTER TABLE executions ADD CONSTRAINT executions_state_check
    CHECK (state IN ('waiting', 'running', 'completed', 'failed', 'cancelled'));
ALTER TABLE attempts DROP CONSTRAINT attempts_state_check;
ALTER TABLE attempts ADD CONSTRAINT attempts_state_check
    CHECK (state IN ('running', 'completed', 'failed', 'reclaimed', 'cancelled'));

-- The claim: the best claimable execution of one lane, highest priority
-- first, then earliest RunAt, then lowest id.
DROP INDEX executions_claim;
CREATE INDEX executions_claim ON executions (namespace, lane, priority DESC, run_at_ms, id)
    WHERE state = 'waiting';

-- ListExecutions, in id order under every combination of its filters.
CREATE INDEX executions_namespace ON executions (namespace, id);
CREATE INDEX executions_namespace_lane ON executions (namespace, lane, id);
CREATE INDEX executions_namespace_state ON executions (namespace, state, id);
CREATE INDEX executions_namespace_lane_state ON executions (namespace, lane, state, id);
CREATE INDEX executions_lane ON executions (lane, id);
CREATE INDEX executions_lane_state ON executions (lane, state, id);
CREATE INDEX executions_state ON executions (state, id);
