DROP TABLE attempts;
DROP TABLE executions;
