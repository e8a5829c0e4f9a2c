"""What the coordinator shows about a run: the status document, Prometheus metrics, learning curves and the
metrics timeline."""
