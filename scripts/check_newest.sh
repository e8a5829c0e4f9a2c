#!/usr/bin/env bash
# The other half of the lock's promise: requirements.lock is the set the tests pass on, and pyproject.toml's ranges
# say a user's environment may hold anything up to the next major version. This builds a fresh virtualenv with the
# newest versions the ranges allow (every extra, no lock; torch stays the 2.13.0 CPU build the set-up scripts pin),
# prints which versions differ from the lock and runs the tests not marked slow with it. Not run by CI: its outcome
# depends on what the package index published today. Arguments replace the default selection (tests -m "not slow"):
# scripts/check_newest.sh tests/test_wheel.py -m slow.
# RLFLEET_NEWEST_VENV: where the virtualenv goes (default /tmp/rlfleet-venv-newest; rebuilt on every run).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${RLFLEET_NEWEST_VENV:-/tmp/rlfleet-venv-newest}"
PYTHON="${PYTHON:-python3.11}"
command -v "$PYTHON" >/dev/null 2>&1 || PYTHON=python3
cd "$ROOT"
"$PYTHON" -m venv --clear "$VENV"
# shellcheck disable=SC1091
. "$VENV/bin/activate"
python -m pip install --quiet --upgrade pip
torch_only="$VENV/torch-constraint.txt"
echo "torch==2.13.0" >"$torch_only"
python -m pip install --quiet "torch==2.13.0"
# Every extra pyproject.toml defines, as scripts/env.sh installs them, but each range's newest version.
extras="$(python -c 'import tomllib
print(",".join(tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]))')"
python -m pip install --quiet -c "$torch_only" --upgrade --upgrade-strategy eager -e ".[$extras]"
python -m pip freeze --exclude-editable >"$VENV/freeze.txt"
echo "== versions that differ from requirements.lock (the full list: $VENV/freeze.txt)"
python - "$VENV/freeze.txt" <<'EOF'
import sys

from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name


def pins(path: str) -> dict[str, str]:
    found = {}
    for line in open(path):
        name, _, version = line.partition("#")[0].strip().partition("==")
        if version:
            found[canonicalize_name(name)] = version
    return found


lock, installed = pins("requirements.lock"), pins(sys.argv[1])
for name in sorted(lock.keys() | installed.keys()):
    pinned, got = lock.get(name), installed.get(name)
    if pinned is None or got is None or not SpecifierSet(f"=={pinned}").contains(got, prereleases=True):
        print(f"{name:32} lock {pinned or '-':24} installed {got or '-'}")
EOF
echo "== pytest"
export RLFLEET_VENV="$VENV" PYTHONPATH="$ROOT"
if [ "$#" -eq 0 ]; then set -- tests -m "not slow"; fi
exec python -m pytest -q -p no:cacheprovider "$@"
