-- Migration 11 orders the row locks of PostgreSQL's agent count trigger.
-- SQLite has one writer at a time, so its trigger cannot deadlock: nothing
-- changes here (the migration keeps both engines' versions in step).
SELECT 1;
