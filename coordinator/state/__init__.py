"""The components that own the coordinator's state: each holds its rules and persists itself
(coordinator/journal/component.py)."""
