-- Wake-ups across processes: a statement that makes work claimable (a new
-- execution, a retry, a reclaim, a released lease) calls roster_wake with the
-- namespace; it notifies the channel of this schema, on which every Store
-- running a worker listens (one connection each). It returns 1, so that a
-- statement can call it in a condition it must evaluate. NOTIFY is delivered
-- at commit and is only a hint: workers also poll.
CREATE FUNCTION roster_wake(namespace TEXT) RETURNS INTEGER LANGUAGE sql VOLATILE AS $$
    SELECT pg_notify('roster_' || md5(current_schema()), namespace);
    SELECT 1;
$$;
