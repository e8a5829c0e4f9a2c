"""What a command's process sets up before its work: its logging, and whether models read their field docs."""

from __future__ import annotations

import logging
import os
import sys


def without_field_docs() -> None:
    """For commands that never render a schema, before they import the models: their attribute docstrings are
    not read (shared/__init__.py), nor in the processes they start, unless those set their own environment."""
    from rlfleet import shared

    shared.FIELD_DOCS = False
    os.environ["RLFLEET_FIELD_DOCS"] = "0"



def with_field_docs() -> None:
    """For a command that renders a schema, before it imports the models: their field descriptions are read
    from the attribute docstrings even where RLFLEET_FIELD_DOCS=0 was inherited."""
    from rlfleet import shared

    shared.FIELD_DOCS = True


def configure_logging() -> None:
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per request drowns the useful ones
