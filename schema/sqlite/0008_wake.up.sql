-- Wake-ups across processes need nothing in a SQLite file: a worker checks
-- PRAGMA data_version, which changes with every commit of another
-- connection, and writes nothing. This version exists so that version N
-- means the same features on both engines (PostgreSQL adds roster_wake).
SELECT 1;
