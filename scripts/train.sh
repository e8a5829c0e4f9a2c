#!/usr/bin/env bash
# Set up (first time only) and train the default run: DQN on CartPole-v1 with 2 collectors, as local processes.
# Extra arguments go to `rlfleet up`, e.g. `scripts/train.sh --collectors 3 --seed 1`.
. "$(dirname "$0")/env.sh"
exec rlfleet up --config configs/cartpole_dqn.yaml "$@"
