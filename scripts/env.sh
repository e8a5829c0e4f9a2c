# Sourced by the other scripts: create (once) and activate the project's virtualenv with the locked versions
# (requirements.lock).
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
if [ ! -f "$stamp" ] || [ "$ROOT/pyproject.toml" -nt "$stamp" ] || [ "$ROOT/requirements.lock" -nt "$stamp" ]; then
  python -m pip install --quiet --upgrade pip
  # Every extra, at the lock's versions (the set the tests pass on); torch is the lock's 2.13.0 CPU build.
  python -m pip install --quiet -c "$ROOT/requirements.lock" "torch==2.13.0"
  python -m pip install --quiet -c "$ROOT/requirements.lock" \
    -e "$ROOT[dev,bench,video,docs,plot,s3,games,box2d,onnx,popgym,mujoco,atari,minatar,envpool,wandb,mlflow,report,minari,sweep]"
  touch "$stamp"
fi
cd "$ROOT"
