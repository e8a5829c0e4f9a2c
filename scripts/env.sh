# Sourced by the other scripts: create (once) and activate the project's virtualenv with pinned deps.
# Only Python 3.11, pip and gcc are assumed; torch is pinned to the 2.13.0 CPU build.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${RLFLEET_VENV:-$ROOT/.venv}"
PYTHON="${PYTHON:-python3.11}"
command -v "$PYTHON" >/dev/null 2>&1 || PYTHON=python3
if [ ! -x "$VENV/bin/python" ]; then
  "$PYTHON" -m venv "$VENV"
fi
# shellcheck disable=SC1091
. "$VENV/bin/activate"
stamp="$VENV/.rlfleet-installed"
if [ ! -f "$stamp" ] || [ "$ROOT/pyproject.toml" -nt "$stamp" ]; then
  python -m pip install --quiet --upgrade pip
  python -m pip install --quiet -e "$ROOT[dev,video,docs,mujoco,atari,minatar,envpool,onnx]"
  touch "$stamp"
fi
cd "$ROOT"
