"""Work: activity starts through SQS, the worker that runs plan steps, executions, scheduled jobs."""
