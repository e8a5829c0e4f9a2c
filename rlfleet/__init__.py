"""rlfleet: distributed reinforcement-learning training (a coordinator, collector, learner and evaluator services).

The import package of every service: rlfleet.coordinator, rlfleet.collector_worker, rlfleet.learner_worker,
rlfleet.evaluator, rlfleet.launcher and the code they share, rlfleet.shared. In the repository each lives in its own
top-level folder, linked from here; a wheel holds them under rlfleet/ with the configs `rlfleet up` names.
"""

__version__ = "0.1.0"
