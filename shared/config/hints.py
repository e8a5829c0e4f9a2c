"""Suggestions for a misspelt name in bad input: the few close matches among the names that would work."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def did_you_mean(name: str, candidates: Iterable[str]) -> str:
    """' (did you mean 'a', 'b'?)' for up to three close matches of `name`, or '' when none is close."""
    close = difflib.get_close_matches(name, list(candidates), n=3)
    return f" (did you mean {', '.join(map(repr, close))}?)" if close else ""
