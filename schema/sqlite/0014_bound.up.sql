-- Liveness with one write per worker, and runs with a time limit:
--   * executions.timeout_ms: how long one run may hold its execution (0:
--     no limit); deadline_ms: the current (or last) lease's claim plus that
--     limit (NULL: none); no renewal moves expires_at_ms past it;
--   * executions.bound: the current (or last) lease is bound to its holder's
--     registration: it holds while the worker row (namespace, holder) is
--     alive, and its own expires_at_ms is only its deadline (or the largest
--     integer: never), until the registration ends and the lease is revoked
--     at the registration's end;
--   * executions_holder: the running leases of one holder, for the end of a
--     registration (mark-dead, sweep, a lapsed row taken over) and the scan
--     of bound leases whose holder lapsed, which walks the lapsed workers
--     (workers_expiry) and probes this index, never the running work;
--   * agents.holder_namespace and holder_instance_id: the worker registration
--     of the runtime that runs the agent (both or neither), and the index of
--     live agents by holder that the end of a registration walks.

ALTER TABLE executions ADD COLUMN timeout_ms INTEGER NOT NULL DEFAULT 0
    CHECK (timeout_ms BETWEEN 0 AND 2592000000);
ALTER TABLE executions ADD COLUMN deadline_ms INTEGER;
ALTER TABLE executions ADD COLUMN bound INTEGER NOT NULL DEFAULT 0 CHECK (bound IN (0, 1));

-- A schedule's runs carry its template's timeout.
ALTER TABLE schedules ADD COLUMN timeout_ms INTEGER NOT NULL DEFAULT 0
    CHECK (timeout_ms BETWEEN 0 AND 2592000000);

CREATE INDEX executions_holder ON executions (namespace, holder) WHERE state = 'running';

ALTER TABLE agents ADD COLUMN holder_namespace TEXT CHECK (holder_namespace <> '');
ALTER TABLE agents ADD COLUMN holder_instance_id TEXT
    CHECK (holder_instance_id <> '' AND (holder_instance_id IS NULL) = (holder_namespace IS NULL));

CREATE INDEX agents_live_holder ON agents (holder_namespace, holder_instance_id)
    WHERE state <> 'terminal' AND holder_namespace IS NOT NULL;
