#!/usr/bin/env bash
# Fill docker/wheels/ with a wheel of every dependency the image installs (pyproject.toml's core and the extras in
# IMAGE_EXTRAS, at requirements.lock's versions; torch's CPU build only), so that
# docker/Dockerfile installs offline (`pip install --no-index --find-links`). The wheels must suit the image's
# Python, so this runs with a Python 3.11 (PYTHON, default python3); skipped while pyproject.toml and the lock are unchanged.
#
#   PYTHON=python3.11 bash docker/wheelhouse.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
PY="${PYTHON:-python3}"
"$PY" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' || { echo "$PY is not Python 3.11 (set PYTHON)" >&2; exit 1; }
stamp="docker/wheels/.pyproject.sha256"
want="$(cat pyproject.toml requirements.lock | sha256sum | cut -d' ' -f1)"
if [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
  echo "wheelhouse: docker/wheels is up to date"
  exit 0
fi
echo "wheelhouse: pip wheel into docker/wheels"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
find docker/wheels -name '*.whl' -delete
# The extras docker/Dockerfile installs: object stores (the s3 profile), board games, learning-curve plots, trackers.
"$PY" - >"$tmp/requirements.txt" <<'PYEOF'
import tomllib
project = tomllib.load(open("pyproject.toml", "rb"))["project"]
extras = ("s3", "games", "plot", "wandb", "mlflow")
print("\n".join([*project["dependencies"], *(d for e in extras for d in project["optional-dependencies"][e])]))
PYEOF
# setuptools: the project's build backend, which `pip install .` in the image needs offline too.
"$PY" -m pip wheel --quiet --wheel-dir docker/wheels -c requirements.lock -r "$tmp/requirements.txt" "setuptools>=68" 2>"$tmp/pip.log" \
  || { tail -n 20 "$tmp/pip.log" >&2; echo "pip wheel failed" >&2; exit 1; }
ls docker/wheels/torch-2.13.0+cpu-*.whl >/dev/null 2>&1 || { echo "no CPU build of torch 2.13.0 in docker/wheels" >&2; exit 1; }
if ls docker/wheels/nvidia_* >/dev/null 2>&1; then echo "CUDA wheels in docker/wheels: refusing" >&2; exit 1; fi
echo "$want" >"$stamp"
