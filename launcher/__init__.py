"""The `rlfleet` command: each service's entry point, and `up`, which runs the compose services locally."""
