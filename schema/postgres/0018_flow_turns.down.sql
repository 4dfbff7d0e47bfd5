-- Back to migration 17: a row per group in lane_groups (every group that
-- executions of a lane with turns were ever created in, and the group '' of
-- each such lane, none of them served yet), the ready index by group first
-- and groups in the database's collation, and the flow claim of migration
-- 17, which reads them.
CREATE TABLE lane_groups (
    namespace  TEXT   NOT NULL,
    lane       TEXT   NOT NULL,
    group_key  TEXT   NOT NULL,
    served_seq BIGINT NOT NULL DEFAULT 0 CHECK (served_seq >= 0),
    PRIMARY KEY (namespace, lane, group_key)
);

INSERT INTO lane_groups (namespace, lane, group_key)
SELECT DISTINCT lt.namespace, lt.lane, '' FROM lane_turns AS lt
UNION
SELECT DISTINCT e.namespace, e.lane, e.group_key
FROM executions AS e
WHERE EXISTS (SELECT 1 FROM lane_turns AS lt WHERE lt.namespace = e.namespace AND lt.lane = e.lane);

DROP TABLE lane_turns;

DROP INDEX executions_ready;
ALTER TABLE executions ALTER COLUMN group_key TYPE TEXT COLLATE "default";
CREATE INDEX executions_ready ON executions (namespace, lane, group_key, priority DESC, run_at_ms, id)
    WHERE state = 'waiting' AND ready;

-- roster_flow_claim as in migration 17.
CREATE OR REPLACE FUNCTION roster_flow_claim(
    p_namespace TEXT, p_instance_id TEXT, p_now BIGINT, p_lease_ids UUID[],
    p_expires_at_ms BIGINT, p_bind BOOLEAN, p_max_bytes BIGINT
) RETURNS TABLE (
    id UUID, lease_id UUID, attempts BIGINT, epoch BIGINT, lane TEXT, payload BYTEA, metadata TEXT,
    expires_at_ms BIGINT, deadline_ms BIGINT, run_at_ms BIGINT, holder_expires_at_ms BIGINT,
    held INTEGER, next_run_at_ms BIGINT, flow BOOLEAN
) LANGUAGE plpgsql VOLATILE AS $$
#variable_conflict use_column
-- Scalar variables only (no RECORD): a statement that reads a field of a
-- RECORD variable is planned again whenever the record is assigned anew.
DECLARE
    want        BIGINT := coalesce(cardinality(p_lease_ids), 0);
    -- the worker
    w_lanes     TEXT[];
    w_caps      TEXT[];
    w_flow      TEXT[];
    w_due       BOOLEAN;
    locked      TEXT[];
    -- the lane
    ln          TEXT;
    l_limited   BOOLEAN;
    l_max       BIGINT;
    l_per_group BIGINT;
    l_rate      BIGINT;
    l_period    BIGINT;
    l_paused    BOOLEAN;
    l_window    BIGINT;
    l_claims    BIGINT;
    l_running   BIGINT;
    l_grouped   BOOLEAN;
    room        BIGINT;
    window_at   BIGINT;  -- the start of the lane's current rate window (NULL: no rate)
    window_end  BIGINT;  -- its end, when the rate holds the lane back
    used        BIGINT;
    base        BIGINT;  -- the highest served sequence of the lane's groups
    -- a candidate
    x_id        UUID;
    x_group     TEXT;
    x_prio      BIGINT;
    x_run       BIGINT;
    x_bytes     BIGINT;
    x_lim       BIGINT;
    x_in_group  BIGINT;
    x_ready     BOOLEAN;
    capped      BOOLEAN;
    full_ready  BOOLEAN;
    n_lane      INTEGER;
    first       INTEGER;
    n_held      INTEGER := 0;
    rate_held   BIGINT := 0;
    is_flow     BOOLEAN := false;
    -- the candidates, each lane's in its order; each lane's first, next and last
    c_id        UUID[] := '{}';
    c_lane      TEXT[] := '{}';
    c_prio      BIGINT[] := '{}';
    c_run       BIGINT[] := '{}';
    c_bytes     BIGINT[] := '{}';
    c_base      BIGINT[] := '{}'; -- the lane's base (NULL: the lane has no groups)
    c_window    BIGINT[] := '{}'; -- the lane's rate window (NULL: no rate)
    seg_first   INTEGER[] := '{}';
    seg_next    INTEGER[] := '{}';
    seg_last    INTEGER[] := '{}';
    n_cand      INTEGER := 0;
    -- what is taken, in order
    t_id        UUID[] := '{}';
    t_base      BIGINT[] := '{}';
    t_window    BIGINT[] := '{}';
    n_taken     INTEGER := 0;
    bytes       BIGINT := 0;
    bounded     BOOLEAN := false;
    best        INTEGER;
    bi          INTEGER;
    i           INTEGER;
    got         INTEGER := 0;
BEGIN
    -- The worker, alive, its lanes that have limits or groups (the claim
    -- locks to take, in lane order), and whether scheduled work is due.
    SELECT ARRAY(SELECT wl.lane FROM unnest(wk.lanes) AS wl(lane) ORDER BY wl.lane), wk.capabilities,
           ARRAY(
               SELECT fl.lane FROM unnest(wk.lanes) AS fl(lane)
               WHERE EXISTS (SELECT 1 FROM lane_limits AS m WHERE m.namespace = wk.namespace AND m.lane = fl.lane)
                  OR EXISTS (SELECT 1 FROM lane_groups AS lg WHERE lg.namespace = wk.namespace AND lg.lane = fl.lane)
               ORDER BY fl.lane
           ),
           EXISTS (
               SELECT 1 FROM executions AS d
               WHERE d.namespace = wk.namespace AND d.state = 'waiting' AND NOT d.ready AND d.run_at_ms <= p_now
           )
    INTO w_lanes, w_caps, w_flow, w_due
    FROM workers AS wk
    WHERE wk.namespace = p_namespace AND wk.instance_id = p_instance_id
      AND wk.last_heartbeat_ms + wk.ttl_ms > p_now;
    IF NOT FOUND THEN
        RETURN;
    END IF;

    IF w_due THEN
        -- Due scheduled executions become ready first, so that they compete.
        UPDATE executions SET ready = true
        WHERE id = ANY (ARRAY(
            SELECT d.id FROM executions AS d
            WHERE d.namespace = p_namespace AND d.state = 'waiting' AND NOT d.ready AND d.run_at_ms <= p_now
            ORDER BY d.run_at_ms
            LIMIT 1000
            FOR UPDATE SKIP LOCKED
        ));
    END IF;

    -- The claim locks, in lane order, so that two claims never wait for
    -- each other in a cycle.
    FOREACH ln IN ARRAY w_flow LOOP
        PERFORM pg_advisory_xact_lock(roster_lane_key(p_namespace, ln));
    END LOOP;
    locked := w_flow;

    FOREACH ln IN ARRAY w_lanes LOOP
        -- The lane's limits and counts, read under its lock. A lane that
        -- got limits or groups since the worker was read is locked first
        -- (out of lane order: should that deadlock, the call is retried).
        LOOP
            SELECT m.lane IS NOT NULL, coalesce(m.max_running, 0), coalesce(m.max_running_per_group, 0),
                   coalesce(m.rate, 0), coalesce(m.rate_period_ms, 0), coalesce(m.paused, false),
                   coalesce(m.window_start_ms, 0), coalesce(m.window_claims, 0),
                   CASE WHEN coalesce(m.max_running, 0) > 0 OR coalesce(m.max_running_per_group, 0) > 0 THEN (
                       SELECT count(*) FROM executions AS r
                       WHERE r.namespace = p_namespace AND r.lane = ln AND r.state = 'running'
                   ) ELSE 0 END,
                   EXISTS (SELECT 1 FROM lane_groups AS lg WHERE lg.namespace = p_namespace AND lg.lane = ln)
            INTO l_limited, l_max, l_per_group, l_rate, l_period, l_paused, l_window, l_claims, l_running, l_grouped
            FROM (SELECT 1) AS one
            LEFT JOIN lane_limits AS m ON m.namespace = p_namespace AND m.lane = ln;
            EXIT WHEN NOT (l_limited OR l_grouped) OR ln = ANY (locked);
            PERFORM pg_advisory_xact_lock(roster_lane_key(p_namespace, ln));
            locked := locked || ln;
        END LOOP;
        is_flow := is_flow OR l_limited OR l_grouped;

        -- The lane's room.
        room := want;
        window_at := NULL;
        window_end := 0;
        IF l_paused THEN
            room := 0;
        ELSE
            IF l_max > 0 THEN
                room := least(room, l_max - l_running);
            END IF;
            IF l_rate > 0 THEN
                window_at := p_now - p_now % l_period;
                IF l_window > window_at THEN
                    -- A claim of a later window committed first: nothing
                    -- until this claim's clock reaches that window.
                    room := 0;
                    window_end := l_window;
                ELSE
                    used := CASE WHEN l_window = window_at THEN l_claims ELSE 0 END;
                    IF l_rate - used < room THEN
                        room := l_rate - used;
                        IF room <= 0 THEN
                            window_end := window_at + l_period;
                        END IF;
                    END IF;
                END IF;
            END IF;
        END IF;

        -- Its groups (a lane without groups has one: ''), each with its
        -- room (MaxRunningPerGroup less what runs in it) and up to that many
        -- of its best ready executions (a row without one when it has none),
        -- in the lane's fair order; a group without room says whether it has
        -- ready work (held back). The first `room` are the lane's candidates.
        n_lane := 0;
        capped := false;
        full_ready := false;
        first := n_cand + 1;
        FOR base, x_ready, x_id, x_group, x_prio, x_run, x_bytes, x_lim, x_in_group IN
            WITH grp AS (
                SELECT lg.group_key, lg.served_seq,
                       CASE WHEN l_per_group > 0 THEN least(room, want, l_per_group - (
                           SELECT count(*) FROM executions AS r
                           WHERE r.namespace = lg.namespace AND r.lane = lg.lane AND r.group_key = lg.group_key
                             AND r.state = 'running'
                       )) ELSE least(room, want) END AS lim
                FROM lane_groups AS lg
                WHERE l_grouped AND lg.namespace = p_namespace AND lg.lane = ln
                UNION ALL
                SELECT '', 0, CASE WHEN l_per_group > 0 THEN least(room, want, l_per_group - l_running) ELSE least(room, want) END
                WHERE NOT l_grouped
            ), pick AS (
                SELECT q.served_seq, q.lim, max(q.served_seq) OVER () AS base,
                       CASE WHEN q.lim <= 0 THEN EXISTS (
                           SELECT 1 FROM executions AS x
                           WHERE x.namespace = p_namespace AND x.lane = ln AND x.group_key = q.group_key
                             AND x.state = 'waiting' AND x.ready
                             AND (x.required_capabilities = '{}' OR x.required_capabilities <@ w_caps)
                       ) ELSE false END AS ready,
                       e.id, e.group_key, e.priority, e.run_at_ms, e.payload_bytes
                FROM grp AS q
                LEFT JOIN LATERAL (
                    SELECT x.id, x.group_key, x.priority, x.run_at_ms, CAST(octet_length(x.payload) AS bigint) AS payload_bytes
                    FROM executions AS x
                    WHERE x.namespace = p_namespace AND x.lane = ln AND x.group_key = q.group_key
                      AND x.state = 'waiting' AND x.ready
                      AND (x.required_capabilities = '{}' OR x.required_capabilities <@ w_caps)
                    ORDER BY x.priority DESC, x.run_at_ms, x.id
                    LIMIT greatest(q.lim, 0)
                ) AS e ON true
            )
            SELECT p.base, p.ready, p.id, p.group_key, p.priority, p.run_at_ms, p.payload_bytes, p.lim,
                   count(p.id) OVER (PARTITION BY p.group_key)
            FROM (
                SELECT pk.*, row_number() OVER (PARTITION BY pk.group_key, pk.priority ORDER BY pk.run_at_ms, pk.id) AS turn
                FROM pick AS pk
            ) AS p
            ORDER BY p.id IS NULL, p.priority DESC, p.turn, p.served_seq, p.run_at_ms, p.id
        LOOP
            IF x_id IS NULL THEN
                full_ready := full_ready OR x_ready;
                CONTINUE;
            END IF;
            -- A group's cap, not its work, bounded what it gave.
            capped := capped OR (x_lim < least(room, want) AND x_in_group >= x_lim);
            n_lane := n_lane + 1;
            CONTINUE WHEN n_lane > room;
            n_cand := n_cand + 1;
            c_id[n_cand] := x_id;
            c_lane[n_cand] := ln;
            c_prio[n_cand] := x_prio;
            c_run[n_cand] := x_run;
            c_bytes[n_cand] := x_bytes;
            c_base[n_cand] := CASE WHEN l_grouped THEN base END;
            c_window[n_cand] := window_at;
        END LOOP;

        IF room <= 0 THEN
            -- Held back, when it has ready work.
            IF (l_limited OR l_grouped) AND full_ready THEN
                n_held := n_held + 1;
                IF window_end > 0 AND (rate_held = 0 OR window_end < rate_held) THEN
                    rate_held := window_end;
                END IF;
            END IF;
            CONTINUE;
        END IF;
        IF full_ready THEN
            n_held := n_held + 1; -- groups at their cap hold back what they have ready
        END IF;
        -- Held back when the lane's cap or rate, or a group's cap, not the
        -- work, bounded what was found.
        IF (room < want AND n_lane >= room) OR capped THEN
            n_held := n_held + 1;
        END IF;
        IF n_cand >= first THEN
            i := cardinality(seg_first) + 1;
            seg_first[i] := first;
            seg_next[i] := first;
            seg_last[i] := n_cand;
        END IF;
    END LOOP;

    -- Across lanes: the best of each lane's next candidate, until the claim
    -- has what it asked for or its payloads reach the bound.
    LOOP
        EXIT WHEN n_taken >= want;
        best := 0;
        FOR k IN 1 .. cardinality(seg_first) LOOP
            CONTINUE WHEN seg_next[k] > seg_last[k];
            i := seg_next[k];
            IF best = 0 OR c_prio[i] > c_prio[bi]
               OR (c_prio[i] = c_prio[bi] AND (c_run[i] < c_run[bi] OR (c_run[i] = c_run[bi] AND c_id[i] < c_id[bi]))) THEN
                best := k;
                bi := i;
            END IF;
        END LOOP;
        EXIT WHEN best = 0;
        bytes := bytes + c_bytes[bi];
        IF n_taken > 0 AND bytes > p_max_bytes THEN
            bounded := true;
            EXIT;
        END IF;
        seg_next[best] := seg_next[best] + 1;
        n_taken := n_taken + 1;
        t_id[n_taken] := c_id[bi];
        t_base[n_taken] := c_base[bi];
        t_window[n_taken] := c_window[bi];
    END LOOP;

    held := 0; next_run_at_ms := 0; flow := is_flow;
    IF n_taken > 0 THEN
        -- The start, under the worker's row share-locked: no lease outlives
        -- its worker (a MarkWorkerDead or a sweep waits for the claim; one
        -- being deleted starts nothing). One no longer ready is left out
        -- (the pick locks nothing: another claim may have started it, or
        -- started and snoozed it, since; the row's newest version is checked
        -- again once its writer is done).
        -- Then each served group's turn (the lane's claims counted on from
        -- its highest served sequence, the group served last the highest)
        -- and each rated lane's count in its window (a window older than the
        -- one counted is never counted), of what started.
        FOR id, lease_id, attempts, epoch, lane, payload, metadata, expires_at_ms, deadline_ms, run_at_ms,
            holder_expires_at_ms IN
            WITH holder AS (
                SELECT hw.last_heartbeat_ms + hw.ttl_ms AS expires_at_ms FROM workers AS hw
                WHERE hw.namespace = p_namespace AND hw.instance_id = p_instance_id
                  AND hw.last_heartbeat_ms + hw.ttl_ms > p_now
                FOR KEY SHARE OF hw SKIP LOCKED
            ), started AS (
                UPDATE executions AS x
                SET state = 'running', attempts = x.attempts + 1, epoch = x.epoch + 1,
                    lease_id = t.lease_id, holder = p_instance_id, claimed_at_ms = p_now,
                    bound = p_bind,
                    deadline_ms = CASE WHEN x.timeout_ms > 0 THEN p_now + x.timeout_ms END,
                    expires_at_ms = CASE WHEN x.timeout_ms > 0 THEN least(p_expires_at_ms, p_now + x.timeout_ms)
                        ELSE p_expires_at_ms END,
                    revoked_at_ms = NULL
                -- (LIMIT n_taken: the planner then looks each id up by its key.)
                FROM (SELECT * FROM unnest(t_id, p_lease_ids[1:n_taken], t_base, t_window) WITH ORDINALITY
                      AS u(id, lease_id, base, window_at, ord) LIMIT n_taken) AS t
                WHERE x.id = t.id AND x.state = 'waiting' AND x.ready AND EXISTS (SELECT 1 FROM holder)
                RETURNING x.id, x.lease_id, x.attempts, x.epoch, x.lane, x.group_key, x.payload,
                          CAST(coalesce(x.metadata, '') AS text) AS metadata,
                          x.expires_at_ms, CAST(coalesce(x.deadline_ms, 0) AS bigint) AS deadline_ms, x.run_at_ms,
                          t.base, t.window_at, t.ord
            ), served AS (
                INSERT INTO lane_groups AS lg (namespace, lane, group_key, served_seq)
                SELECT p_namespace, u.lane, u.group_key, max(u.seq)
                FROM (
                    SELECT st.lane, st.group_key, st.base + row_number() OVER (PARTITION BY st.lane ORDER BY st.ord) AS seq
                    FROM started AS st
                    WHERE st.base IS NOT NULL
                ) AS u
                GROUP BY u.lane, u.group_key
                ON CONFLICT (namespace, lane, group_key) DO UPDATE SET served_seq = excluded.served_seq
            ), counted AS (
                UPDATE lane_limits AS m
                SET window_claims = CASE WHEN m.window_start_ms = u.window_at THEN m.window_claims + u.claims ELSE u.claims END,
                    window_start_ms = u.window_at
                FROM (
                    SELECT st.lane, st.window_at, count(*) AS claims
                    FROM started AS st
                    WHERE st.window_at IS NOT NULL
                    GROUP BY st.lane, st.window_at
                ) AS u
                WHERE m.namespace = p_namespace AND m.lane = u.lane AND m.window_start_ms <= u.window_at
            )
            SELECT st.id, st.lease_id, st.attempts, st.epoch, st.lane, st.payload, st.metadata, st.expires_at_ms,
                   st.deadline_ms, st.run_at_ms, (SELECT h.expires_at_ms FROM holder AS h)
            FROM started AS st ORDER BY st.ord
        LOOP
            got := got + 1;
            RETURN NEXT;
        END LOOP;
    END IF;

    -- What held the claim back, and when to look again.
    id := '00000000-0000-0000-0000-000000000000'; lease_id := id; attempts := 0; epoch := 0;
    lane := ''; payload := ''; metadata := '';
    expires_at_ms := 0; deadline_ms := 0; run_at_ms := 0; holder_expires_at_ms := 0;
    held := n_held;
    IF bounded OR (got < n_taken AND got < want) THEN
        -- Stopped at the bound on payloads with work left, or an execution
        -- taken was no longer ready (another claim took it): more may be
        -- claimable now.
        next_run_at_ms := p_now;
    ELSIF got < want THEN
        SELECT coalesce(min((
            SELECT sc.run_at_ms FROM executions AS sc
            WHERE sc.namespace = p_namespace AND sc.lane = wl.lane
              AND sc.state = 'waiting' AND NOT sc.ready AND sc.run_at_ms > p_now
            ORDER BY sc.run_at_ms
            LIMIT 1
        )), 0)
        INTO next_run_at_ms
        FROM unnest(w_lanes) AS wl(lane);
        IF rate_held > 0 AND (next_run_at_ms = 0 OR rate_held < next_run_at_ms) THEN
            next_run_at_ms := rate_held;
        END IF;
    END IF;
    RETURN NEXT;
END
$$;
