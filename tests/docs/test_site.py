"""The documentation site: it builds with `mkdocs build --strict`, opens from file:// with no network, every
internal link and anchor resolves, and the configuration reference is the one generated from the models.

`--strict` already fails on a broken Markdown link; these tests look at the built HTML, which is what a reader's
browser loads: a theme asset fetched from a CDN, a web font, or a link to a directory (which file:// cannot open)
would pass the build and still break the offline site.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

from rlfleet.shared.algorithms import REGISTRY
from rlfleet.shared.config.run_config import RunConfig

REPO = Path(__file__).resolve().parents[2]
# Attributes through which a page makes the browser load something (an <a href> is only a link a reader may follow).
LOADS = {("script", "src"), ("link", "href"), ("img", "src"), ("iframe", "src"), ("source", "src"),
         ("source", "srcset"), ("video", "src"), ("audio", "src"), ("embed", "src"), ("object", "data")}
EXTERNAL = re.compile(r"^(?:[a-z][a-z0-9+.-]*:)?//", re.I)


class Page(HTMLParser):
    """What one built page loads, links to, and names as anchors."""

    def __init__(self) -> None:
        super().__init__()
        self.loads: list[str] = []
        self.links: list[str] = []
        self.ids: set[str] = set()
        self.styles: list[str] = []
        self.text: list[str] = []
        self._in_style = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if value is None:
                continue
            if name in ("id", "name") and tag != "meta":
                self.ids.add(value)
            if (tag, name) in LOADS:
                self.loads.append(value)
            if tag == "a" and name == "href":
                self.links.append(value)
            if name == "style":
                self.styles.append(value)
        self._in_style = tag == "style"

    def handle_endtag(self, tag: str) -> None:
        self._in_style = False

    def handle_data(self, data: str) -> None:
        if self._in_style:
            self.styles.append(data)
        self.text.append(data)

    def plain_text(self) -> str:
        """What a reader sees, whitespace collapsed (markup such as <code> gone)."""
        return " ".join("".join(self.text).split())


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site as `scripts/test.sh` builds it, into a fresh directory."""
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1", "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)], cwd=REPO,
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"mkdocs build --strict failed:\n{done.stderr[-4000:]}"
    return out


@pytest.fixture(scope="module")
def pages(site: Path) -> dict[Path, Page]:
    parsed = {}
    for html in sorted(site.rglob("*.html")):
        page = Page()
        page.feed(html.read_text(encoding="utf-8"))
        parsed[html] = page
    assert len(parsed) >= 20, f"only {len(parsed)} pages built"
    return parsed


def test_no_page_loads_anything_from_the_network(site: Path, pages: dict[Path, Page]) -> None:
    remote = [(str(html.relative_to(site)), url) for html, page in pages.items() for url in page.loads
              if EXTERNAL.match(url)]
    remote += [(str(html.relative_to(site)), url) for html, page in pages.items()
               for style in page.styles for url in _css_urls(style) if EXTERNAL.match(url)]
    assert not remote, f"pages load from outside the site: {remote[:10]}"


def test_no_stylesheet_or_script_reaches_for_web_fonts_or_remote_assets(site: Path) -> None:
    for asset in [*site.rglob("*.css"), *site.rglob("*.js"), *site.rglob("*.html")]:
        text = asset.read_text(encoding="utf-8", errors="replace")
        assert "fonts.googleapis.com" not in text and "fonts.gstatic.com" not in text, asset
        if asset.suffix == ".css":
            remote = [url for url in _css_urls(text) if EXTERNAL.match(url)]
            assert not remote, f"{asset.relative_to(site)} loads {remote[:5]}"


def test_search_works_from_file_urls(site: Path, pages: dict[Path, Page]) -> None:
    """A file:// page can neither fetch the JSON index nor start a web worker: the offline plugin inlines the index
    into a script, and iframe-worker's shim (vendored, not from a CDN) runs the search worker in an iframe."""
    index = site / "search" / "search_index.js"
    assert index.is_file() and "Configuration reference" in index.read_text(encoding="utf-8")
    shim = site / "assets" / "javascripts" / "iframe-worker" / "shim.js"
    assert shim.is_file()
    for html, page in pages.items():
        if html.name == "404.html":  # served by a web server at any depth: its links are absolute by design
            continue
        loaded = {(html.parent / unquote(urlsplit(url).path)).resolve() for url in page.loads
                  if not EXTERNAL.match(url)}
        assert shim.resolve() in loaded, f"{html.relative_to(site)} does not load the iframe-worker shim"
        config = json.loads(re.search(r'<script id="__config" type="application/json">(.*?)</script>',
                                      html.read_text(encoding="utf-8"), re.S).group(1))  # type: ignore[union-attr]
        worker = html.parent / config["search"]  # relative to the page, like every asset
        assert worker.is_file(), f"{html.relative_to(site)}: search worker {config['search']} is not in the site"


def test_every_internal_link_and_anchor_resolves(site: Path, pages: dict[Path, Page]) -> None:
    broken = []
    for html, page in pages.items():
        if html.name == "404.html":  # served by a web server at any depth: its links are absolute by design
            continue
        for url in [*page.links, *page.loads]:
            if EXTERNAL.match(url) or url.startswith(("mailto:", "javascript:", "data:")):
                continue
            parts = urlsplit(url)
            assert not parts.path.startswith("/"), f"{html.relative_to(site)}: absolute path {url!r} breaks file://"
            target = (html.parent / unquote(parts.path)).resolve() if parts.path else html
            if not target.is_file() or (  # a directory link opens nothing from file://
                    target.suffix == ".html" and parts.fragment and parts.fragment not in pages[target].ids):
                broken.append((str(html.relative_to(site)), url))
    assert not broken, f"links that do not resolve in the built site: {broken[:10]}"


def test_the_committed_openapi_document_is_published(site: Path) -> None:
    published = site / "reference" / "openapi.json"
    assert published.read_bytes() == (REPO / "docs" / "reference" / "openapi.json").read_bytes()


def test_configuration_reference_is_generated_from_the_models(site: Path, pages: dict[Path, Page]) -> None:
    """Every run-config field and every registered algorithm has its row or section, with the model's own
    description: the page cannot fall behind the code."""
    html = site / "user-guide" / "config-reference.html"
    text = html.read_text(encoding="utf-8")
    seen = pages[html].plain_text()
    ids = pages[html].ids
    for name, field in RunConfig.model_fields.items():
        assert f"<code>{name}</code>" in text, name
        if field.description:  # as rendered: Markdown's backticks become <code>, so compare the visible text
            assert " ".join(field.description.replace("`", "").split()) in seen, name
    for name, spec in REGISTRY.items():
        assert f"algo-{name}" in ids, f"no section for algorithm {name!r}"
        for param in spec.params.model_fields:
            assert f"<code>{param}</code>" in text, (name, param)
    for section in ("collector", "replay", "sampling", "learner", "evaluation", "budget", "env"):
        assert section in ids, section
    settings = (site / "user-guide" / "settings-reference.html").read_text(encoding="utf-8")
    for variable in ("RLFLEET_LEASE_SECONDS", "RLFLEET_ORPHAN_GRACE_SECONDS", "RLFLEET_COORDINATOR_URL",
                     "RLFLEET_STORE_URL"):
        assert f"<code>{variable}</code>" in settings, variable


def test_every_encoder_kind_has_its_own_section_in_the_reference(site: Path, pages: dict[Path, Page]) -> None:
    """`algo.net.encoder` is a union chosen by `kind`: each kind's fields under an anchor of its own."""
    html = site / "user-guide" / "config-reference.html"
    for kind in ("mlp", "cnn", "nature", "impala"):
        assert f"algo-net-encoder-ppo-{kind}" in pages[html].ids, kind
    assert "<code>kind: impala</code>" in html.read_text(encoding="utf-8")


def test_readme_is_short_and_its_links_resolve() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) < 250
    assert "bash scripts/train.sh" in readme and "bash scripts/test.sh" in readme  # CI runs the latter
    broken = [target for target in _markdown_links(readme)
              if not EXTERNAL.match(target) and not (REPO / unquote(target.split("#")[0])).exists()]
    assert not broken, f"README links to missing files: {broken}"


def _css_urls(css: str) -> Iterator[str]:
    for match in re.finditer(r"url\(\s*['\"]?([^'\")]+)|@import\s+['\"]([^'\"]+)", css):
        yield (match.group(1) or match.group(2)).strip()


def _markdown_links(markdown: str) -> Iterator[str]:
    yield from (m.group(1) for m in re.finditer(r"\]\(([^)\s]+)\)", markdown))
