"""The `rlfleet` command: each service's entry point, and `up`, which runs the service table locally.

Every service runs single-threaded math (the learner sets torch's threads from its settings): a BLAS pool
per process spins on the cores the other services need. Measured: a collector with OpenBLAS's default
threads used 181% CPU for a batch-8 MLP and slowed the whole stack. Set before numpy is first imported.

OpenMP threads sleep as soon as they are idle (OMP_WAIT_POLICY=PASSIVE) instead of spinning for a while first: a
learner computing with several threads otherwise keeps spinning on cores the collectors need between its updates.
Measured on Pong (configs/pong_ppo.yaml, 2 cores, 30,720 env steps, evaluation.every_versions 10): the learner
at two threads trained 112 env steps/s spinning (its training thread waited for data 67% of the time, collectors
starved) and 286 sleeping; at one thread, 192. Read by libgomp when torch loads, hence here.
"""

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
