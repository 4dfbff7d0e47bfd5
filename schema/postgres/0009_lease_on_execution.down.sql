ALTER TABLE attempts ALTER COLUMN ended_at_ms DROP NOT NULL;
ALTER TABLE attempts ALTER COLUMN state SET DEFAULT 'running';
ALTER TABLE attempts DROP CONSTRAINT attempts_state_check;
ALTER TABLE attempts ADD CONSTRAINT attempts_state_check
    CHECK (state IN ('running', 'completed', 'failed', 'reclaimed', 'cancelled'));
ALTER TABLE attempts ADD CONSTRAINT attempts_check CHECK ((state = 'running') = (ended_at_ms IS NULL));
ALTER TABLE attempts DROP CONSTRAINT attempts_pkey;
ALTER TABLE attempts ADD CONSTRAINT attempts_pkey PRIMARY KEY (execution_id, attempt_index);
ALTER TABLE attempts ADD CONSTRAINT attempts_execution_id_epoch_key UNIQUE (execution_id, epoch);
ALTER TABLE attempts ADD CONSTRAINT attempts_lease_id UNIQUE (lease_id);

-- The leases of running executions become running attempts again.
INSERT INTO attempts (execution_id, attempt_index, epoch, lease_id, namespace, instance_id, state,
                      claimed_at_ms, expires_at_ms, revoked_at_ms)
SELECT id, attempts, epoch, lease_id, namespace, holder, 'running', claimed_at_ms, expires_at_ms, revoked_at_ms
FROM executions WHERE state = 'running';

CREATE UNIQUE INDEX attempts_running ON attempts (execution_id) WHERE state = 'running';
CREATE INDEX attempts_expiry ON attempts (expires_at_ms, execution_id) WHERE state = 'running';
CREATE INDEX attempts_namespace_expiry ON attempts (namespace, expires_at_ms, execution_id)
    WHERE state = 'running';
CREATE INDEX attempts_holder ON attempts (namespace, instance_id, expires_at_ms) WHERE state = 'running';

DROP INDEX executions_finished;
DROP INDEX executions_holder;
DROP INDEX executions_expiry;
DROP INDEX executions_scheduled_lane;
DROP INDEX executions_scheduled;
DROP INDEX executions_ready_any;
DROP INDEX executions_ready;

CREATE INDEX executions_claim ON executions (namespace, lane, priority DESC, run_at_ms, id)
    WHERE state = 'waiting';
CREATE INDEX executions_live ON executions (namespace, lane, state, run_at_ms)
    WHERE state IN ('waiting', 'running');
CREATE INDEX executions_namespace_lane ON executions (namespace, lane, id);
CREATE INDEX executions_namespace_state ON executions (namespace, state, id);
CREATE INDEX executions_namespace_lane_state ON executions (namespace, lane, state, id);
CREATE INDEX executions_lane ON executions (lane, id);
CREATE INDEX executions_lane_state ON executions (lane, state, id);

ALTER TABLE executions RESET (fillfactor);
ALTER TABLE executions
    DROP CONSTRAINT executions_finished,
    DROP CONSTRAINT executions_lease,
    DROP COLUMN finished_at_ms,
    DROP COLUMN revoked_at_ms,
    DROP COLUMN expires_at_ms,
    DROP COLUMN claimed_at_ms,
    DROP COLUMN holder,
    DROP COLUMN lease_id,
    DROP COLUMN ready;
