DROP FUNCTION roster_wake(TEXT);
