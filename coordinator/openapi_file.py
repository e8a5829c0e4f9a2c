"""The committed copy of the OpenAPI document (docs/reference/openapi.json): what third parties write clients
against and the docs site links, kept equal to the served one by tests/coordinator/test_openapi_snapshot.py.

`python -m rlfleet.coordinator.openapi_file docs/reference/openapi.json` writes it anew after a deliberate change to a
route or a wire model.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

from rlfleet.coordinator.main import create_app
from rlfleet.coordinator.settings import CoordinatorSettings
from rlfleet.shared.tokens import generate_tokens_file


def write_openapi(path: Path) -> None:
    """Write the served document with sorted keys (a diff shows what changed). The app is built over a
    throwaway tokens file: the document does not depend on the run."""
    with tempfile.TemporaryDirectory() as tmp:
        tokens = Path(tmp) / "tokens.json"
        generate_tokens_file(tokens)
        spec = create_app(CoordinatorSettings(data_dir=Path(tmp), tokens_file=tokens)).openapi()
    path.write_text(json.dumps(spec, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    write_openapi(Path(sys.argv[1]))
