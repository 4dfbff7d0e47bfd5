-- Groups take turns in key order, from the group last served, and a flow
-- claim finds the next group with ready work in the ready index itself: it
-- reads nothing per group, and a group without ready work costs nothing.
--   * lane_turns holds the turns of each lane whose executions have groups
--     (it replaces lane_groups, a row per group that every claim read): for
--     each priority and each set of worker capabilities, the group served
--     last ('' before the first claim). Turns are kept apart by priority, so
--     that work of one priority does not move another's turn, and by the
--     capabilities of the workers that claim, so that a worker that cannot
--     run a group's work does not pass that group's turn by. A lane with no
--     row here and none in lane_limits is claimed as before, at no extra
--     cost;
--   * the ready index orders a lane's executions by priority, then group,
--     then RunAt and id: at a priority, the first entry after a group is the
--     best execution of the next group that has ready work at that priority
--     (one probe), and a lane without groups (one group, '') reads in the
--     claim's order, as before;
--   * groups compare byte by byte (COLLATE "C"), as on SQLite, whatever the
--     database's collation.
-- The turns: at each priority, from the highest down, the groups after the
-- last served in key order, then from the first group up to it (the last
-- served ends the round); a group's first execution at a priority before any
-- group's second. A group that gets ready work starts within as many claims
-- of its lane, by workers that can run it, as there are groups with ready
-- work, itself included.
CREATE TABLE lane_turns (
    namespace    TEXT              NOT NULL,
    lane         TEXT              NOT NULL,
    priority     BIGINT            NOT NULL,
    -- The claiming workers' capabilities: a sorted, duplicate-free array.
    capabilities TEXT[]            NOT NULL,
    last_group   TEXT COLLATE "C"  NOT NULL DEFAULT '',
    PRIMARY KEY (namespace, lane, priority, capabilities),
    CONSTRAINT lane_turns_valid CHECK (namespace <> '' AND lane <> '')
);

-- Each lane's turns go on from the group it served last.
INSERT INTO lane_turns (namespace, lane, priority, capabilities, last_group)
SELECT DISTINCT ON (namespace, lane) namespace, lane, 0, '{}', group_key
FROM lane_groups
ORDER BY namespace, lane, served_seq DESC, group_key;

DROP TABLE lane_groups;

DROP INDEX executions_ready;
-- (A change of collation alone rewrites no row; it rebuilds the indexes of
-- the column.)
ALTER TABLE executions ALTER COLUMN group_key TYPE TEXT COLLATE "C";
CREATE INDEX executions_ready ON executions (namespace, lane, priority DESC, group_key, run_at_ms, id)
    WHERE state = 'waiting' AND ready;

-- The claim of a worker one of whose lanes has limits or groups, in one
-- call. Each statement of a PL/pgSQL function reads with a snapshot of its
-- own (under READ COMMITTED), so what it reads after taking a lane's claim
-- lock is what the claims before it committed; the lock is held until the
-- transaction of the call ends (the call alone, or the settle it is part of).
--
-- It returns one row per execution started, in the order taken, then one
-- row with the nil id (and no NULL: every column is set) that says what
-- held the claim back: held (how many of the worker's lanes had ready work
-- that a cap, a rate or a pause held back), next_run_at_ms (when to look
-- again: now when more may be claimable at once, else the earliest RunAt of
-- scheduled work or the end of a rate window that held a lane back; 0:
-- none) and flow (one of the worker's lanes has limits or groups). No row
-- at all: the worker is not alive.
--
-- What it takes of each lane, in the lane's order:
--   * the lane's room: what its cap (max_running less what runs) and its
--     rate (rate less the claims of the current window) allow, none when it
--     is paused;
--   * a lane without groups: its best ready executions, as many as the room
--     and the cap per group (of its one group) allow;
--   * a lane with groups: the turns above, each group at most what its cap
--     (max_running_per_group less what runs in it) allows; a group at its
--     cap is passed over.
-- Across lanes, the best of the lanes' next candidates (highest priority,
-- earliest RunAt, lowest id) is taken until the claim has as many as it
-- asked for or its payloads reach p_max_bytes (always one). The start then
-- records each grouped lane's last group served at each priority (for the
-- worker's capabilities) and each rated lane's count.
CREATE OR REPLACE FUNCTION roster_flow_claim(
    p_namespace TEXT, p_instance_id TEXT, p_now BIGINT, p_lease_ids UUID[],
    p_expires_at_ms BIGINT, p_bind BOOLEAN, p_max_bytes BIGINT
) RETURNS TABLE (
    id UUID, lease_id UUID, attempts BIGINT, epoch BIGINT, lane TEXT, payload BYTEA, metadata TEXT,
    expires_at_ms BIGINT, deadline_ms BIGINT, run_at_ms BIGINT, holder_expires_at_ms BIGINT,
    held INTEGER, next_run_at_ms BIGINT, flow BOOLEAN
) LANGUAGE plpgsql VOLATILE AS $$
#variable_conflict use_column
-- Written for what each call costs:
--   * three statements when the worker has one lane and the claim one
--     execution: the worker (its lanes' locks taken), the lane (its first
--     turn read), the start (its records written);
--   * scalar variables only (no RECORD): a statement that reads a field of
--     a RECORD variable is planned again whenever the record is assigned;
--     what only a worker of several lanes or a batch needs (the claim order
--     across lanes, a batch's later rounds) is kept only then;
--   * the capability test is written `= '{}' OR <@`, so that the planner,
--     which knows nearly every execution requires nothing, reads candidates
--     in the ready index's order and stops at the few it needs.
DECLARE
    want        BIGINT := coalesce(cardinality(p_lease_ids), 0);
    -- the worker
    w_lanes     TEXT[];
    w_caps      TEXT[];
    w_due       BOOLEAN;
    several     BOOLEAN; -- the worker has several lanes: candidates are merged across them
    locked      TEXT[];  -- the lanes whose claim lock is held
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
    l_last      TEXT COLLATE "C"; -- the group the lane served last at lvl (to workers of these capabilities)
    room        BIGINT;
    need        BIGINT;  -- what the lane may give this claim
    window_at   BIGINT;  -- the start of the lane's current rate window
    window_end  BIGINT;  -- its end, when the rate holds the lane back
    used        BIGINT;
    -- the walk of a grouped lane's turns
    lvl         BIGINT;  -- the priority walked
    wrapped     BOOLEAN; -- past the last group: from the first group up to the last served
    stepping    BOOLEAN; -- the next step is to the first group after x_group
    walk        REFCURSOR; -- the steps of a turn, when more than the lane's first is needed
    walking     BOOLEAN := false;
    x_id        UUID;
    x_group     TEXT COLLATE "C";
    x_run       BIGINT;
    x_bytes     BIGINT;
    x_running   BIGINT;  -- what runs in x_group (counted under a cap per group)
    x_prio      BIGINT;
    capped      BOOLEAN;
    n_lane      INTEGER;
    first       INTEGER;
    n_held      INTEGER := 0;
    rate_held   BIGINT := 0;
    is_flow     BOOLEAN := false;
    -- the candidates, each lane's in its order: id and payload size; the
    -- group (under a cap per group); priority and RunAt (several lanes)
    c_id        UUID[];
    c_bytes     BIGINT[];
    c_group     TEXT[] COLLATE "C";
    c_prio      BIGINT[];
    c_run       BIGINT[];
    n_cand      INTEGER := 0;
    -- several lanes: each lane's first, next and last candidate
    seg_first   INTEGER[];
    seg_next    INTEGER[];
    seg_last    INTEGER[];
    n_seg       INTEGER := 0;
    -- a batch: the groups of a priority's first round, in turn, with their
    -- first candidate, their room and what they gave
    r_group     TEXT[] COLLATE "C";
    r_run       BIGINT[];
    r_id        UUID[];
    r_room      BIGINT[];
    r_got       BIGINT[];
    n_round     INTEGER;
    k           INTEGER;
    -- what is taken, in order
    t_id        UUID[];
    n_taken     INTEGER := 0;
    bytes       BIGINT := 0;
    bounded     BOOLEAN := false;
    best        INTEGER;
    bi          INTEGER;
    i           INTEGER;
    got         INTEGER := 0;
BEGIN
    -- The worker, alive, its lanes, its lanes that have limits or groups
    -- with their claim locks taken in lane order (so that two claims never
    -- wait for each other in a cycle), and whether scheduled work is due.
    SELECT ARRAY(SELECT wl.lane FROM unnest(wk.lanes) AS wl(lane) ORDER BY wl.lane), wk.capabilities,
           ARRAY(
               SELECT fl.lane
               FROM (
                   SELECT fl.lane FROM unnest(wk.lanes) AS fl(lane)
                   WHERE EXISTS (SELECT 1 FROM lane_limits AS m WHERE m.namespace = wk.namespace AND m.lane = fl.lane)
                      OR EXISTS (SELECT 1 FROM lane_turns AS lt WHERE lt.namespace = wk.namespace AND lt.lane = fl.lane)
                   ORDER BY fl.lane
               ) AS fl
               CROSS JOIN LATERAL (SELECT pg_advisory_xact_lock(roster_lane_key(wk.namespace, fl.lane))) AS lk
           ),
           EXISTS (
               SELECT 1 FROM executions AS d
               WHERE d.namespace = wk.namespace AND d.state = 'waiting' AND NOT d.ready AND d.run_at_ms <= p_now
           ),
           cardinality(wk.lanes) > 1
    INTO w_lanes, w_caps, locked, w_due, several
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

    FOREACH ln IN ARRAY w_lanes LOOP
        -- The lane's limits, whether it has groups, and what runs in it
        -- (counted as far as a cap needs), read under its lock; when it has
        -- groups, the first step of its turns too: its highest priority with
        -- ready work, the group served last there to workers of these
        -- capabilities, and the first group after it with an execution the
        -- worker can run, that group's best such execution and what runs in
        -- it. A lane that got limits or groups since the worker was read is
        -- locked first (out of lane order: should that deadlock, the call is
        -- retried).
        LOOP
            SELECT m.lane IS NOT NULL, coalesce(m.max_running, 0), coalesce(m.max_running_per_group, 0),
                   coalesce(m.rate, 0), coalesce(m.rate_period_ms, 0), coalesce(m.paused, false),
                   coalesce(m.window_start_ms, 0), coalesce(m.window_claims, 0),
                   CASE WHEN coalesce(m.max_running, 0) > 0 OR coalesce(m.max_running_per_group, 0) > 0 THEN (
                       SELECT count(*) FROM (
                           SELECT 1 FROM executions AS r
                           WHERE r.namespace = p_namespace AND r.lane = ln AND r.state = 'running'
                           LIMIT greatest(m.max_running, m.max_running_per_group)
                       ) AS r
                   ) ELSE 0 END,
                   g.grouped, lv.priority, coalesce(lt.last_group, ''),
                   nx.id, nx.group_key, nx.run_at_ms, nx.payload_bytes, nx.running
            INTO l_limited, l_max, l_per_group, l_rate, l_period, l_paused, l_window, l_claims, l_running,
                 l_grouped, lvl, l_last, x_id, x_group, x_run, x_bytes, x_running
            FROM (SELECT EXISTS (SELECT 1 FROM lane_turns AS t WHERE t.namespace = p_namespace AND t.lane = ln) AS grouped) AS g
            LEFT JOIN lane_limits AS m ON m.namespace = p_namespace AND m.lane = ln
            LEFT JOIN LATERAL (
                SELECT x.priority FROM executions AS x
                WHERE g.grouped
                  AND x.namespace = p_namespace AND x.lane = ln AND x.state = 'waiting' AND x.ready
                ORDER BY x.priority DESC
                LIMIT 1
            ) AS lv ON true
            LEFT JOIN lane_turns AS lt
                ON lt.namespace = p_namespace AND lt.lane = ln AND lt.priority = lv.priority AND lt.capabilities = w_caps
            LEFT JOIN LATERAL (
                SELECT x.id, x.group_key, x.run_at_ms, CAST(octet_length(x.payload) AS bigint) AS payload_bytes,
                       CASE WHEN m.max_running_per_group > 0 THEN (
                           SELECT count(*) FROM (
                               SELECT 1 FROM executions AS r
                               WHERE r.namespace = p_namespace AND r.lane = ln AND r.group_key = x.group_key
                                 AND r.state = 'running'
                               LIMIT m.max_running_per_group
                           ) AS r
                       ) ELSE 0 END AS running
                FROM executions AS x
                WHERE x.namespace = p_namespace AND x.lane = ln AND x.state = 'waiting' AND x.ready
                  AND x.priority = lv.priority AND x.group_key > coalesce(lt.last_group, '')
                  AND (x.required_capabilities = '{}' OR x.required_capabilities <@ w_caps)
                ORDER BY x.group_key, x.run_at_ms, x.id
                LIMIT 1
            ) AS nx ON true;
            EXIT WHEN NOT (l_limited OR l_grouped) OR ln = ANY (locked);
            PERFORM pg_advisory_xact_lock(roster_lane_key(p_namespace, ln));
            locked := locked || ln;
        END LOOP;
        is_flow := is_flow OR l_limited OR l_grouped;

        -- The lane's room.
        room := want;
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
        need := room;
        IF NOT l_grouped AND l_per_group > 0 THEN
            need := least(need, l_per_group - l_running); -- its one group's cap
        END IF;

        IF need <= 0 THEN
            -- Held back, when it has ready work.
            IF (l_limited OR l_grouped) AND EXISTS (
                SELECT 1 FROM executions AS x
                WHERE x.namespace = p_namespace AND x.lane = ln AND x.state = 'waiting' AND x.ready
                  AND (x.required_capabilities = '{}' OR x.required_capabilities <@ w_caps)
            ) THEN
                n_held := n_held + 1;
                IF window_end > 0 AND (rate_held = 0 OR window_end < rate_held) THEN
                    rate_held := window_end;
                END IF;
            END IF;
            CONTINUE;
        END IF;

        n_lane := 0;
        capped := false;
        first := n_cand + 1;
        IF NOT l_grouped THEN
            FOR x_id, x_prio, x_run, x_bytes IN
                SELECT x.id, x.priority, x.run_at_ms, CAST(octet_length(x.payload) AS bigint)
                FROM executions AS x
                WHERE x.namespace = p_namespace AND x.lane = ln AND x.group_key = '' AND x.state = 'waiting' AND x.ready
                  AND (x.required_capabilities = '{}' OR x.required_capabilities <@ w_caps)
                ORDER BY x.priority DESC, x.run_at_ms, x.id
                LIMIT need
            LOOP
                n_lane := n_lane + 1;
                n_cand := n_cand + 1;
                c_id[n_cand] := x_id;
                c_bytes[n_cand] := x_bytes;
                IF several THEN
                    c_prio[n_cand] := x_prio;
                    c_run[n_cand] := x_run;
                END IF;
            END LOOP;
            -- Its one group's cap, not its work, bounded what it gave.
            capped := l_per_group > 0 AND n_lane >= l_per_group - l_running AND l_per_group - l_running < room;
        ELSE
            -- Its turns, priority by priority (the first step of the first
            -- came with the lane).
            stepping := false;
            LOOP
                EXIT WHEN lvl IS NULL;
                -- Round one: each group's first, in turn.
                wrapped := false;
                n_round := 0;
                LOOP
                    IF stepping THEN
                        IF NOT walking THEN
                            -- The groups from the first after x_group on
                            -- (from the first group when x_group is NULL),
                            -- one step at a time: each fetch is one probe.
                            -- (Keys hold no control character, so the least
                            -- key above x_group is x_group || chr(1) in the
                            -- groups' byte order.)
                            OPEN walk FOR
                                WITH RECURSIVE step AS (
                                    (SELECT x.id, x.group_key, x.run_at_ms, CAST(octet_length(x.payload) AS bigint) AS payload_bytes
                                     FROM executions AS x
                                     WHERE x.namespace = p_namespace AND x.lane = ln AND x.state = 'waiting' AND x.ready
                                       AND x.priority = lvl AND x.group_key >= coalesce(x_group || chr(1), '')
                                       AND (x.required_capabilities = '{}' OR x.required_capabilities <@ w_caps)
                                     ORDER BY x.group_key, x.run_at_ms, x.id
                                     LIMIT 1)
                                    UNION ALL
                                    SELECT n.id, n.group_key, n.run_at_ms, n.payload_bytes
                                    FROM step AS w
                                    CROSS JOIN LATERAL (
                                        SELECT x.id, x.group_key, x.run_at_ms, CAST(octet_length(x.payload) AS bigint) AS payload_bytes
                                        FROM executions AS x
                                        WHERE x.namespace = p_namespace AND x.lane = ln AND x.state = 'waiting' AND x.ready
                                          AND x.priority = lvl AND x.group_key > w.group_key
                                          AND (x.required_capabilities = '{}' OR x.required_capabilities <@ w_caps)
                                        ORDER BY x.group_key, x.run_at_ms, x.id
                                        LIMIT 1
                                    ) AS n
                                )
                                SELECT st.id, st.group_key, st.run_at_ms, st.payload_bytes,
                                       CASE WHEN l_per_group > 0 THEN (
                                           SELECT count(*) FROM (
                                               SELECT 1 FROM executions AS r
                                               WHERE r.namespace = p_namespace AND r.lane = ln AND r.group_key = st.group_key
                                                 AND r.state = 'running'
                                               LIMIT l_per_group
                                           ) AS r
                                       ) ELSE 0 END
                                FROM step AS st;
                            walking := true;
                        END IF;
                        FETCH walk INTO x_id, x_group, x_run, x_bytes, x_running;
                        IF NOT FOUND THEN
                            x_id := NULL;
                        END IF;
                    END IF;
                    stepping := true;
                    IF x_id IS NULL OR (wrapped AND x_group > l_last) THEN
                        IF walking THEN
                            CLOSE walk;
                            walking := false;
                        END IF;
                        EXIT WHEN wrapped;
                        -- Past the last group: from the first, up to the last served.
                        wrapped := true;
                        x_group := NULL;
                        CONTINUE;
                    END IF;
                    IF l_per_group > 0 THEN
                        -- What runs in it, and what this claim took of it
                        -- at a higher priority.
                        x_running := x_running + coalesce(cardinality(array_positions(c_group[first:n_cand], x_group)), 0);
                        IF x_running >= l_per_group THEN
                            capped := true; -- at its cap: passed over
                            CONTINUE;
                        END IF;
                    END IF;
                    n_lane := n_lane + 1;
                    n_cand := n_cand + 1;
                    c_id[n_cand] := x_id;
                    c_bytes[n_cand] := x_bytes;
                    IF l_per_group > 0 THEN
                        c_group[n_cand] := x_group;
                    END IF;
                    IF several THEN
                        c_prio[n_cand] := lvl;
                        c_run[n_cand] := x_run;
                    END IF;
                    EXIT WHEN n_lane >= need;
                    n_round := n_round + 1;
                    r_group[n_round] := x_group;
                    r_run[n_round] := x_run;
                    r_id[n_round] := x_id;
                    r_room[n_round] := CASE WHEN l_per_group > 0 THEN least(need, l_per_group - x_running) ELSE need END;
                    r_got[n_round] := 1;
                END LOOP;
                IF walking THEN
                    CLOSE walk;
                    walking := false;
                END IF;

                -- Rounds two and on: each group's second, then third...,
                -- in the same turn, as far as each group's room allows.
                IF n_lane < need AND n_round > 0 THEN
                    FOR k, x_id, x_group, x_run, x_bytes IN
                        SELECT CAST(w.pos AS integer), m.id, w.group_key, m.run_at_ms, m.payload_bytes
                        FROM unnest(r_group[1:n_round], r_run[1:n_round], r_id[1:n_round], r_room[1:n_round])
                             WITH ORDINALITY AS w(group_key, run_at_ms, id, room, pos)
                        CROSS JOIN LATERAL (
                            SELECT y.*, row_number() OVER (ORDER BY y.run_at_ms, y.id) AS turn
                            FROM (
                                SELECT x.id, x.run_at_ms, CAST(octet_length(x.payload) AS bigint) AS payload_bytes
                                FROM executions AS x
                                WHERE x.namespace = p_namespace AND x.lane = ln AND x.state = 'waiting' AND x.ready
                                  AND x.priority = lvl AND x.group_key = w.group_key
                                  AND (x.run_at_ms, x.id) > (w.run_at_ms, w.id)
                                  AND (x.required_capabilities = '{}' OR x.required_capabilities <@ w_caps)
                                ORDER BY x.run_at_ms, x.id
                                LIMIT w.room - 1
                            ) AS y
                        ) AS m
                        WHERE w.room > 1
                        ORDER BY m.turn, w.pos
                        LIMIT need - n_lane
                    LOOP
                        n_lane := n_lane + 1;
                        n_cand := n_cand + 1;
                        c_id[n_cand] := x_id;
                        c_bytes[n_cand] := x_bytes;
                        IF l_per_group > 0 THEN
                            c_group[n_cand] := x_group;
                        END IF;
                        IF several THEN
                            c_prio[n_cand] := lvl;
                            c_run[n_cand] := x_run;
                        END IF;
                        r_got[k] := r_got[k] + 1;
                    END LOOP;
                    IF n_lane < need THEN
                        -- A group's cap, not its work, bounded what it gave.
                        FOR i IN 1 .. n_round LOOP
                            capped := capped OR (r_room[i] < need AND r_got[i] >= r_room[i]);
                        END LOOP;
                    END IF;
                END IF;
                EXIT WHEN n_lane >= need OR lvl = -9223372036854775808;
                -- The next priority down, and the group served last there:
                -- its first step starts after it.
                SELECT x.priority, coalesce((
                           SELECT lt.last_group FROM lane_turns AS lt
                           WHERE lt.namespace = p_namespace AND lt.lane = ln AND lt.priority = x.priority
                             AND lt.capabilities = w_caps
                       ), '')
                INTO lvl, l_last
                FROM executions AS x
                WHERE x.namespace = p_namespace AND x.lane = ln AND x.state = 'waiting' AND x.ready
                  AND x.priority < lvl
                ORDER BY x.priority DESC
                LIMIT 1;
                x_group := l_last;
                stepping := true;
            END LOOP;
        END IF;

        -- Held back when a cap or a rate, not the work, bounded what the
        -- lane gave.
        IF capped OR (room < want AND n_lane >= room) THEN
            n_held := n_held + 1;
        END IF;
        IF several AND n_lane > 0 THEN
            n_seg := n_seg + 1;
            seg_first[n_seg] := first;
            seg_next[n_seg] := first;
            seg_last[n_seg] := n_cand;
        END IF;
    END LOOP;

    -- What is taken: one lane's candidates in its order; across several
    -- lanes, the best of each lane's next candidate (highest priority,
    -- earliest RunAt, lowest id); until the claim has what it asked for or
    -- its payloads reach the bound (always one).
    IF NOT several THEN
        FOR i IN 1 .. least(n_cand, want) LOOP
            bytes := bytes + c_bytes[i];
            IF i > 1 AND bytes > p_max_bytes THEN
                bounded := true;
                EXIT;
            END IF;
            n_taken := i;
        END LOOP;
        t_id := c_id[1:n_taken];
    ELSE
        LOOP
            EXIT WHEN n_taken >= want;
            best := 0;
            FOR s IN 1 .. n_seg LOOP
                CONTINUE WHEN seg_next[s] > seg_last[s];
                i := seg_next[s];
                IF best = 0 OR c_prio[i] > c_prio[bi]
                   OR (c_prio[i] = c_prio[bi] AND (c_run[i] < c_run[bi] OR (c_run[i] = c_run[bi] AND c_id[i] < c_id[bi]))) THEN
                    best := s;
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
        END LOOP;
    END IF;

    held := 0; next_run_at_ms := 0; flow := is_flow;
    IF n_taken > 0 THEN
        -- The start, under the worker's row share-locked: no lease outlives
        -- its worker (a MarkWorkerDead or a sweep waits for the claim; one
        -- being deleted starts nothing). One no longer ready is left out
        -- (the walk locks nothing: another claim may have started it, or
        -- started and snoozed it, since; the row's newest version is checked
        -- again once its writer is done).
        -- Then, of what started, each grouped lane's last group served at
        -- each priority to workers of these capabilities (the group of the
        -- last execution taken there) and each rated lane's count in its
        -- current window (a window older than the one counted is never
        -- counted).
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
                FROM (SELECT * FROM unnest(t_id, p_lease_ids[1:n_taken]) WITH ORDINALITY AS u(id, lease_id, ord)
                      LIMIT n_taken) AS t
                WHERE x.id = t.id AND x.state = 'waiting' AND x.ready AND EXISTS (SELECT 1 FROM holder)
                RETURNING x.id, x.lease_id, x.attempts, x.epoch, x.lane, x.priority, x.group_key, x.payload,
                          CAST(coalesce(x.metadata, '') AS text) AS metadata,
                          x.expires_at_ms, CAST(coalesce(x.deadline_ms, 0) AS bigint) AS deadline_ms, x.run_at_ms,
                          t.ord
            ), served AS (
                INSERT INTO lane_turns AS lt (namespace, lane, priority, capabilities, last_group)
                SELECT p_namespace, u.lane, u.priority, w_caps, u.group_key
                FROM (
                    SELECT DISTINCT ON (st.lane, st.priority) st.lane, st.priority, st.group_key
                    FROM started AS st
                    ORDER BY st.lane, st.priority, st.ord DESC
                ) AS u
                WHERE EXISTS (SELECT 1 FROM lane_turns AS t WHERE t.namespace = p_namespace AND t.lane = u.lane)
                ON CONFLICT (namespace, lane, priority, capabilities) DO UPDATE SET last_group = excluded.last_group
                WHERE lt.last_group <> excluded.last_group
            ), counted AS (
                UPDATE lane_limits AS m
                SET window_claims = CASE WHEN m.window_start_ms = p_now - p_now % m.rate_period_ms
                                         THEN m.window_claims + u.claims ELSE u.claims END,
                    window_start_ms = p_now - p_now % m.rate_period_ms
                FROM (SELECT st.lane, count(*) AS claims FROM started AS st GROUP BY st.lane) AS u
                WHERE m.namespace = p_namespace AND m.lane = u.lane
                  AND m.window_start_ms <= p_now - p_now % nullif(m.rate_period_ms, 0) -- a rate (its period is 0 without)
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
