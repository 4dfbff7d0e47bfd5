-- Back to migration 15: nothing to undo on SQLite.
SELECT 1;
