DROP TABLE worker_events;
DROP TABLE workers;
