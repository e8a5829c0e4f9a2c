"""Where the repository is, for tests that read its committed files or start its commands in it."""

from pathlib import Path

REPO = Path(__file__).resolve().parent.parent.parent
