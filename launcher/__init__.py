"""The `rlfleet` command: each service's entry point, and `up`, which runs the service table locally.

Every service runs single-threaded math (the learner sets torch's threads from its settings): a BLAS pool
per process spins on the cores the other services need. Measured: a collector with OpenBLAS's default
threads used 181% CPU for a batch-8 MLP and slowed the whole stack. Set before numpy is first imported.
"""

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
