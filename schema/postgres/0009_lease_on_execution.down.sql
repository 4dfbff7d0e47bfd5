CREATE OR REPLACE FUNCTION roster_wake(namespace TEXT) RETURNS INTEGER LANGUAGE sql VOLATILE AS $$
    SELECT pg_notify('roster_' || md5(current_schema()), namespace);
    SELECT 1;
$$;

DELETE FROM attempts AS a WHERE NOT EXISTS (SELECT 1 FROM executions AS x WHERE x.id = a.execution_id);
ALTER TABLE attempts ADD CONSTRAINT attempts_execution_id_fkey
    FOREIGN KEY (execution_id) REFERENCES executions (id) ON DELETE CASCADE;
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

-- The last lease of a completed execution becomes its completed attempt
-- (schema 9 records none), the leases of running executions running ones.
INSERT INTO attempts (execution_id, attempt_index, epoch, lease_id, namespace, instance_id, state,
                      claimed_at_ms, expires_at_ms, ended_at_ms, revoked_at_ms)
SELECT x.id, x.attempts, x.epoch, x.lease_id, x.namespace, x.holder, 'completed', x.claimed_at_ms,
       x.expires_at_ms, x.finished_at_ms, x.revoked_at_ms
FROM executions AS x
WHERE x.state = 'completed' AND x.lease_id IS NOT NULL
  AND NOT EXISTS (SELECT 1 FROM attempts AS a WHERE a.execution_id = x.id AND a.epoch = x.epoch);

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
DROP INDEX executions_state;
CREATE INDEX executions_state ON executions (state, id);
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
    DROP CONSTRAINT executions_valid,
    ADD CONSTRAINT executions_namespace_check CHECK (namespace <> ''),
    ADD CONSTRAINT executions_lane_check CHECK (lane <> ''),
    ADD CONSTRAINT executions_state_check
        CHECK (state IN ('waiting', 'running', 'completed', 'failed', 'cancelled')),
    ADD CONSTRAINT executions_max_attempts_check CHECK (max_attempts >= 1),
    ADD CONSTRAINT executions_reclaim_count_check CHECK (reclaim_count >= 0),
    ADD CONSTRAINT executions_check CHECK (epoch >= attempts),
    ADD CONSTRAINT executions_check1 CHECK (attempts BETWEEN 0 AND max_attempts),
    ADD CONSTRAINT executions_retry_backoff_ms_check CHECK (retry_backoff_ms BETWEEN 0 AND 86400000),
    DROP COLUMN finished_at_ms,
    DROP COLUMN revoked_at_ms,
    DROP COLUMN expires_at_ms,
    DROP COLUMN claimed_at_ms,
    DROP COLUMN holder,
    DROP COLUMN lease_id,
    DROP COLUMN ready;
