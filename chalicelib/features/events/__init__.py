"""Events: domain events (the outbox written with each change, published from the table stream) and UI telemetry."""
