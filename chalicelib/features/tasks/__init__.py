"""Tasks: task and execution actions beyond CRUD (setTaskStatus, take-next), task groups and their history."""
