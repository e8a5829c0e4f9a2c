"""The coordinator service: owns a run's registry, task queues, replay metadata, policies and evaluations."""
