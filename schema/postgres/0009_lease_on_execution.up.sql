-- The queue, made lean for the hot path (each job: one insert and two updates
-- of its execution, one insert of history):
--   * the current lease lives on the execution row (lease_id, holder,
--     claimed_at_ms, expires_at_ms, revoked_at_ms; after the attempt ends they
--     describe the last lease), so a claim and an outcome each change one row;
--   * attempts becomes history: one row per attempt that ended without
--     completing (failed, reclaimed, cancelled), written once; a completed
--     attempt is the execution's last lease, and a released one never ran:
--     neither leaves a row;
--   * finished_at_ms: when the execution became completed, failed or
--     cancelled (NULL while live), for bounded history (PruneExecutions);
--   * ready: a waiting execution whose RunAt had come when it started waiting
--     is ready; one waiting for a later RunAt is scheduled (not ready), kept
--     in an index of its own and made ready once due, so scheduled work never
--     lies in the way of a claim;
--   * fewer indexes: every index costs an entry per row version on
--     PostgreSQL (three versions per job), so lists keep (namespace, id) and
--     (state, id) and filter the rest, and the other indexes are partial
--     (a claim adds entries to three indexes, a completion to four);
--   * attempts keeps no foreign key: its check locked the execution row once
--     more per job (a WAL record and a trigger); pruning deletes an
--     execution's attempts with it, and roster check counts orphans;
--   * roster_wake becomes PL/pgSQL, whose plan is kept across calls (a SQL
--     function of two statements was planned at every call).

ALTER TABLE executions
    ADD COLUMN ready          BOOLEAN NOT NULL DEFAULT true,
    ADD COLUMN lease_id       UUID,
    ADD COLUMN holder         TEXT,
    ADD COLUMN claimed_at_ms  BIGINT,
    ADD COLUMN expires_at_ms  BIGINT,
    ADD COLUMN revoked_at_ms  BIGINT,
    ADD COLUMN finished_at_ms BIGINT;

-- Each execution's latest attempt becomes its lease: the current one of a
-- running execution, else the last one; running attempts leave history.
UPDATE executions AS x
SET lease_id = a.lease_id, holder = a.instance_id, claimed_at_ms = a.claimed_at_ms,
    expires_at_ms = a.expires_at_ms, revoked_at_ms = a.revoked_at_ms
FROM (
    SELECT DISTINCT ON (execution_id) execution_id, lease_id, instance_id, claimed_at_ms, expires_at_ms, revoked_at_ms
    FROM attempts
    ORDER BY execution_id, epoch DESC
) AS a
WHERE a.execution_id = x.id;
DELETE FROM attempts WHERE state = 'running';

-- A finished execution finished when its last attempt ended, else (cancelled
-- while waiting) at the latest when it was created.
UPDATE executions AS x
SET finished_at_ms = coalesce((SELECT max(a.ended_at_ms) FROM attempts AS a WHERE a.execution_id = x.id), x.created_at_ms)
WHERE x.state IN ('completed', 'failed', 'cancelled');

-- Waiting executions whose RunAt is still ahead are scheduled.
UPDATE executions SET ready = false
WHERE state = 'waiting' AND run_at_ms > (extract(epoch FROM clock_timestamp()) * 1000)::bigint;

-- The rules of a row, in one CHECK: PostgreSQL reads and prepares each
-- CHECK of a table anew for every statement that writes it, so ten of them
-- cost a tenth of the server's time per job; one costs a fraction of that.
ALTER TABLE executions
    DROP CONSTRAINT executions_namespace_check,
    DROP CONSTRAINT executions_lane_check,
    DROP CONSTRAINT executions_state_check,
    DROP CONSTRAINT executions_max_attempts_check,
    DROP CONSTRAINT executions_reclaim_count_check,
    DROP CONSTRAINT executions_check,
    DROP CONSTRAINT executions_check1,
    DROP CONSTRAINT executions_retry_backoff_ms_check,
    ADD CONSTRAINT executions_valid CHECK (
        namespace <> '' AND lane <> ''
        AND state IN ('waiting', 'running', 'completed', 'failed', 'cancelled')
        AND max_attempts >= 1 AND attempts BETWEEN 0 AND max_attempts AND epoch >= attempts
        AND reclaim_count >= 0 AND retry_backoff_ms BETWEEN 0 AND 86400000
        -- A running execution holds a lease.
        AND (state <> 'running' OR (lease_id IS NOT NULL AND holder IS NOT NULL
                                    AND claimed_at_ms IS NOT NULL AND expires_at_ms IS NOT NULL))
        -- Finished exactly when completed, failed or cancelled.
        AND (state IN ('completed', 'failed', 'cancelled')) = (finished_at_ms IS NOT NULL)
    );

-- Rows are rewritten three times per job: room for the new versions on
-- their page.
ALTER TABLE executions SET (fillfactor = 85);

DROP INDEX executions_claim;
DROP INDEX executions_live;
DROP INDEX executions_namespace_lane;
DROP INDEX executions_namespace_state;
DROP INDEX executions_namespace_lane_state;
DROP INDEX executions_lane;
DROP INDEX executions_lane_state;

-- Claims: the best ready execution of one lane, or (a worker of several
-- lanes) of the namespace, highest priority first, then earliest RunAt, then
-- lowest id.
CREATE INDEX executions_ready ON executions (namespace, lane, priority DESC, run_at_ms, id)
    WHERE state = 'waiting' AND ready;
CREATE INDEX executions_ready_any ON executions (namespace, priority DESC, run_at_ms, id)
    WHERE state = 'waiting' AND ready;
-- Scheduled executions by RunAt: a claim makes those of its namespace that
-- are due ready; the earliest of a worker's lanes says when it should look
-- again.
CREATE INDEX executions_scheduled ON executions (namespace, run_at_ms, id)
    WHERE state = 'waiting' AND NOT ready;
CREATE INDEX executions_scheduled_lane ON executions (namespace, lane, run_at_ms)
    WHERE state = 'waiting' AND NOT ready;
-- Running leases by expiry (reclaim, expired-lease lists; a dead worker's
-- leases and the running list read all of them: they are live rows).
CREATE INDEX executions_expiry ON executions (expires_at_ms, id) WHERE state = 'running';
-- Lists by state in id order; running executions are listed from the index
-- above, so a claim adds no entry here.
DROP INDEX executions_state;
CREATE INDEX executions_state ON executions (state, id) WHERE state <> 'running';
-- Finished executions by age, to prune history.
CREATE INDEX executions_finished ON executions (finished_at_ms, id) WHERE finished_at_ms IS NOT NULL;

-- History: one row per ended attempt, keyed by its epoch.
DROP INDEX attempts_running;
DROP INDEX attempts_expiry;
DROP INDEX attempts_namespace_expiry;
DROP INDEX attempts_holder;
ALTER TABLE attempts DROP CONSTRAINT attempts_lease_id;
ALTER TABLE attempts DROP CONSTRAINT attempts_execution_id_fkey;
ALTER TABLE attempts DROP CONSTRAINT attempts_execution_id_epoch_key;
ALTER TABLE attempts DROP CONSTRAINT attempts_pkey;
ALTER TABLE attempts ADD CONSTRAINT attempts_pkey PRIMARY KEY (execution_id, epoch);
ALTER TABLE attempts DROP CONSTRAINT attempts_state_check;
ALTER TABLE attempts ADD CONSTRAINT attempts_state_check
    CHECK (state IN ('completed', 'failed', 'reclaimed', 'cancelled'));
ALTER TABLE attempts DROP CONSTRAINT attempts_check;
ALTER TABLE attempts ALTER COLUMN state DROP DEFAULT;
ALTER TABLE attempts ALTER COLUMN ended_at_ms SET NOT NULL;

CREATE OR REPLACE FUNCTION roster_wake(namespace TEXT) RETURNS INTEGER LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    PERFORM pg_notify('roster_' || md5(current_schema()), namespace);
    RETURN 1;
END;
$$;
