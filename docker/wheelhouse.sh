#!/usr/bin/env bash
# Fill docker/wheels/ with a wheel of every dependency in pyproject.toml (torch's CPU build only), so that
# docker/Dockerfile installs offline (`pip install --no-index --find-links`). The wheels must suit the image's
# Python, so this runs with a Python 3.11 (PYTHON, default python3); skipped while pyproject.toml is unchanged.
#
#   PYTHON=python3.11 bash docker/wheelhouse.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
PY="${PYTHON:-python3}"
"$PY" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' || { echo "$PY is not Python 3.11 (set PYTHON)" >&2; exit 1; }
stamp="docker/wheels/.pyproject.sha256"
want="$(sha256sum pyproject.toml | cut -d' ' -f1)"
if [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
  echo "wheelhouse: docker/wheels is up to date"
  exit 0
fi
echo "wheelhouse: pip wheel into docker/wheels"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
find docker/wheels -name '*.whl' -delete
"$PY" -c 'import tomllib; print("\n".join(tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"]))' \
  >"$tmp/requirements.txt"
# setuptools: the project's build backend, which `pip install .` in the image needs offline too.
"$PY" -m pip wheel --quiet --wheel-dir docker/wheels -r "$tmp/requirements.txt" "setuptools>=68" 2>"$tmp/pip.log" \
  || { tail -n 20 "$tmp/pip.log" >&2; echo "pip wheel failed" >&2; exit 1; }
ls docker/wheels/torch-2.13.0+cpu-*.whl >/dev/null 2>&1 || { echo "no CPU build of torch 2.13.0 in docker/wheels" >&2; exit 1; }
if ls docker/wheels/nvidia_* >/dev/null 2>&1; then echo "CUDA wheels in docker/wheels: refusing" >&2; exit 1; fi
echo "$want" >"$stamp"
