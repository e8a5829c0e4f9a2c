"""What the coordinator shows about a run: the status document, Prometheus metrics, learning curves, the
metrics timeline, and the experiment trackers (W&B, MLflow) that receive the curves."""
