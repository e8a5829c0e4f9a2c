"""/docs and /redoc must render on a machine without internet: every asset they load is served by the
coordinator itself, none comes from a CDN."""

from __future__ import annotations

import re

import pytest
from fastapi.testclient import TestClient


@pytest.mark.parametrize("page", ["/docs", "/redoc"])
def test_docs_pages_load_only_local_assets(client: TestClient, page: str) -> None:
    resp = client.get(page)
    assert resp.status_code == 200
    assets = re.findall(r"""(?:src|href)=["']([^"']+)["']""", resp.text)
    assert assets, resp.text[:500]
    assert not re.search(r"https?://", " ".join(assets)), assets
    assert "cdn" not in resp.text.lower()
    for asset in assets:
        served = client.get(asset)
        assert served.status_code == 200 and len(served.content) > 100, asset
