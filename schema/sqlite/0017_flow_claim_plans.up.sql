-- Nothing changes on SQLite: PostgreSQL's migration 17 makes the plans of
-- roster_flow_claim robust. The version is kept so that both engines'
-- schemas have the same numbers.
SELECT 1;
