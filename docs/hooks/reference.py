"""MkDocs hook: the configuration and service-settings references, rendered from the pydantic models at build time.

A hand-copied table of fields drifts the first time someone adds a field; these pages are instead generated from
the models the code validates with (the run config, every registered algorithm's hyperparameters, the services'
RLFLEET_* settings), so every field's type, bounds, default and description are the ones in force. A page asks
for a reference with a marker comment on a line of its own; `mkdocs build` replaces it.
"""

from __future__ import annotations

import enum
import inspect
import json
import os
import re
import sys
import types
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import annotated_types
from pydantic import BaseModel
from pydantic.fields import FieldInfo

# The models of this checkout, whatever rlfleet the environment has installed; descriptions come from attribute
# docstrings, which services may switch off to start faster (shared/__init__.py) but a reference needs.
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
os.environ["RLFLEET_FIELD_DOCS"] = "1"

RUN_CONFIG_MARKER = "<!-- reference: run config -->"
SETTINGS_MARKER = "<!-- reference: service settings -->"


@dataclass(frozen=True)
class Section:
    """One model's table under a dotted config path, e.g. `collector.epsilon`, or `algo` when `name: ppo`."""

    path: str
    model: type[BaseModel]
    anchor: str
    variant: str | None = None  # the discriminator value of the union member it belongs to, e.g. `ppo`
    member: bool = False  # this section is that member itself (its `name` field selects it), not nested in it
    kind: str | None = None  # a member of a union selected by `kind` (e.g. `algo.net.encoder`), its value

    @property
    def title(self) -> str:
        if not self.path:
            return "The run config (top level)"
        selectors = [f"`name: {self.variant}`"] if self.variant else []
        selectors += [f"`kind: {self.kind}`"] if self.kind else []
        return f"`{self.path}` ({', '.join(selectors)})" if selectors else f"`{self.path}`"

    @property
    def level(self) -> str:
        return "##" if "." not in self.path else "###"


def on_page_markdown(markdown: str, **_: Any) -> str:
    """MkDocs event: expand the reference markers of a page."""
    if RUN_CONFIG_MARKER in markdown:
        markdown = markdown.replace(RUN_CONFIG_MARKER, run_config_reference())
    if SETTINGS_MARKER in markdown:
        markdown = markdown.replace(SETTINGS_MARKER, settings_reference())
    return markdown


def run_config_reference() -> str:
    """Every section of the run config, top level first, each nested model as a section of its own."""
    from rlfleet.shared.config.run_config import RunConfig

    out: list[str] = []
    for section, links in _walk(Section("", RunConfig, "top-level")):
        out.append(f"{section.level} {section.title} {{ #{section.anchor} }}\n")
        doc = _doc(section.model)
        if doc:
            out.append(f"{doc}\n")
        variant_field = "name" if section.member else "kind" if section.kind else None
        out.append(_table(section.model, links, variant_field=variant_field))
    return "\n".join(out)


def settings_reference() -> str:
    """The services' RLFLEET_* environment variables, one table per kind of process."""
    from rlfleet.coordinator.settings import CoordinatorSettings
    from rlfleet.shared.worker.settings import WorkerSettings

    out = []
    for title, model in (("Coordinator", CoordinatorSettings), ("Workers (collector, learner, evaluator)",
                                                                WorkerSettings)):
        prefix = str(model.model_config.get("env_prefix", ""))
        out.append(f"## {title}\n")
        out.append("| variable | type | default | meaning |\n|---|---|---|---|")
        for name, field in model.model_fields.items():
            out.append(f"| `{prefix}{name.upper()}` | {_type(field.annotation, {})}{_bounds(field)} | "
                       f"{_default(field, machine_dependent=True)} | {_cell(field.description)} |")
        out.append("")
    return "\n".join(out)


def _walk(section: Section) -> Iterator[tuple[Section, dict[type[BaseModel], str]]]:
    """Depth first: a section with the anchors its table links to, then the sections of its nested models."""
    children = []
    for name, field in section.model.model_fields.items():
        path = f"{section.path}.{name}" if section.path else name
        nested = list(_models_in(field.annotation))
        for suffix, sub in nested:
            variant = _literal_default(sub, "name") if len(nested) > 1 else None
            kind = _literal_default(sub, "kind") if len(nested) > 1 and variant is None else None
            anchor = _slug(path + suffix, variant or section.variant) + (f"-{kind}" if kind else "")
            children.append(Section(path + suffix, sub, anchor, variant or section.variant, variant is not None,
                                    kind))
    yield section, {child.model: child.anchor for child in children}
    for child in children:
        yield from _walk(child)


def _slug(path: str, variant: str | None) -> str:
    """Unique per place: a model nested under one algorithm's section gets that algorithm in its anchor."""
    slug = re.sub(r"[^a-z0-9]+", "-", path.lower()).strip("-")
    return f"{slug}-{variant}" if variant else slug


def _models_in(annotation: Any, suffix: str = "") -> Iterator[tuple[str, type[BaseModel]]]:
    """The models a field holds, with how they are reached: directly, in a list (`[]`) or as map values."""
    origin = get_origin(annotation)
    if origin is Annotated:
        yield from _models_in(get_args(annotation)[0], suffix)
    elif origin in (Union, types.UnionType):
        for arg in get_args(annotation):
            yield from _models_in(arg, suffix)
    elif origin in (list, tuple, set, frozenset):
        for arg in get_args(annotation):
            if arg is not Ellipsis:
                yield from _models_in(arg, suffix + "[]")
    elif origin is dict:
        yield from _models_in(get_args(annotation)[1], suffix + ".<key>")
    elif inspect.isclass(annotation) and issubclass(annotation, BaseModel):
        yield suffix, annotation


def _table(model: type[BaseModel], links: dict[type[BaseModel], str], variant_field: str | None) -> str:
    rows = ["| field | type | default | meaning |", "|---|---|---|---|"]
    for name, field in model.model_fields.items():
        kind = _type(field.annotation, links)
        default = "selects this section" if name == variant_field else _default(field)
        rows.append(f"| `{name}` | {kind}{_bounds(field)} | {default} | {_cell(field.description)} |")
    return "\n".join(rows) + "\n"


def _type(annotation: Any, anchors: dict[type[BaseModel], str]) -> str:
    """A type as a reader of YAML or JSON thinks of it; models link to their own section."""
    origin = get_origin(annotation)
    args = get_args(annotation)
    if annotation is type(None):
        return "null"
    if origin is Annotated:
        return _type(args[0], anchors)
    if origin is Literal:
        return " or ".join(f"`{json.dumps(_plain(a))}`" for a in args)
    if origin in (Union, types.UnionType):
        return " or ".join(_type(a, anchors) for a in args)
    if origin in (list, tuple, set, frozenset):
        items = [a for a in args if a is not Ellipsis]
        return "list of " + (" or ".join(_type(a, anchors) for a in items) if items else "values")
    if origin is dict:
        return f"map of {_type(args[0], anchors)} to {_type(args[1], anchors)}"
    if inspect.isclass(annotation):
        if issubclass(annotation, BaseModel):
            anchor = anchors.get(annotation)
            return f"[{annotation.__name__}](#{anchor})" if anchor else annotation.__name__
        if issubclass(annotation, enum.Enum):
            return " or ".join(f"`{json.dumps(m.value)}`" for m in annotation)
        names = {str: "string", int: "integer", float: "number", bool: "boolean", Path: "path"}
        return names.get(annotation, annotation.__name__)
    return str(annotation).replace("typing.", "")  # JsonValue and other aliases


def _bounds(field: FieldInfo) -> str:
    """The constraints pydantic enforces, read from the field's metadata (Ge, Le, MaxLen, pattern...)."""
    found = []
    symbols: tuple[tuple[type, str, str], ...] = (
        (annotated_types.Ge, "ge", "≥"), (annotated_types.Gt, "gt", ">"), (annotated_types.Le, "le", "≤"),
        (annotated_types.Lt, "lt", "<"), (annotated_types.MinLen, "min_length", "length ≥"),
        (annotated_types.MaxLen, "max_length", "length ≤"))
    for item in _constraints(field):
        for kind, attr, symbol in symbols:
            if isinstance(item, kind):
                found.append(f"{symbol} {getattr(item, attr)}")
        pattern = getattr(item, "pattern", None)
        if isinstance(pattern, str):
            found.append(f"matching `{pattern}`")
    return f" ({', '.join(found)})" if found else ""


def _constraints(field: FieldInfo) -> Iterator[Any]:
    yield from field.metadata
    args = get_args(field.annotation)  # an Optional[Annotated[...]] keeps its bounds inside the union
    for arg in args:
        if get_origin(arg) is Annotated:
            for meta in get_args(arg)[1:]:
                yield from getattr(meta, "metadata", [meta])


def _default(field: FieldInfo, machine_dependent: bool = False) -> str:
    """The default as written in YAML. A service setting's computed default (a lambda: the host name) depends on
    the machine, so the page says so instead of printing the build machine's value."""
    if field.is_required():
        return "**required**"
    factory: Callable[[], Any] | None = field.default_factory  # type: ignore[assignment]
    if machine_dependent and factory is not None and getattr(factory, "__name__", "") == "<lambda>":
        return "computed on each machine"
    value = factory() if factory is not None else field.default
    if isinstance(value, BaseModel):
        return "its section's defaults"
    return f"`{json.dumps(_plain(value))}`"


def _plain(value: Any) -> Any:
    """A default as YAML/JSON would write it (tuples as lists, paths as strings, enums as values)."""
    if isinstance(value, enum.Enum):
        return _plain(value.value)
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, (tuple, list, set, frozenset)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    return value


def _literal_default(model: type[BaseModel], name: str) -> str | None:
    field = model.model_fields.get(name)
    return str(field.default) if field is not None and isinstance(field.default, str) else None


def _doc(model: type[BaseModel]) -> str:
    """The model's own docstring (not an inherited one), as a paragraph."""
    doc = model.__dict__.get("__doc__")
    return " ".join(inspect.cleandoc(doc).split()) if doc else ""


def _cell(text: str | None) -> str:
    """Text inside a table cell: one line, pipes escaped."""
    return " ".join((text or "").split()).replace("|", "\\|") or "-"
