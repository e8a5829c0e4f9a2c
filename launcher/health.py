"""`rlfleet health URL`: the coordinator's healthcheck, in Python so that the image needs no curl."""

from __future__ import annotations


def healthy(url: str) -> bool:
    """Whether URL answers 200 within 3 s."""
    import httpx

    try:
        return httpx.get(url, timeout=3).status_code == 200
    except httpx.HTTPError:
        return False
