"""Parse 'key=value;other.key=value' config overrides; values are YAML scalars (numbers, booleans, strings)."""

from __future__ import annotations

import yaml


def parse_overrides(text: str) -> dict[str, object]:
    result: dict[str, object] = {}
    for item in filter(None, (part.strip() for part in text.replace("\n", ";").split(";"))):
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"override {item!r} must look like key=value (e.g. seed=3)")
        result[key.strip()] = yaml.safe_load(value)
    return result
