#!/usr/bin/env bash
# The long soak: SIGKILL a random service every 12 s for SECONDS (default 300) while runs train; prints every
# run's kills and counters. CI runs the same test for 60 s (and on until every kind of service was killed).
. "$(dirname "$0")/env.sh"
RLFLEET_SOAK_SECONDS="${1:-300}" exec python -m pytest -q -s -p no:cacheprovider --timeout 3600 \
  tests/integration/test_soak.py
