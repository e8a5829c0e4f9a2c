"""The loop kinds' workloads (coordinator/operations/workload.py says what one is), one module per kind; the
kinds' entries in shared/loops/ name them. A layer above the operations: a workload composes core components and
operations with its own."""
