"""A config's validation errors as one line per problem for a person: the field, the value it has, and what to
write instead (the close matches among the keys that exist there, for a misspelt key).

pydantic's own report spreads each problem over three lines with a link, and says of a typo only "Extra inputs are
not permitted"; every command that reads a config prints these lines instead.
"""

from __future__ import annotations

import types
import typing
from typing import Any, Literal, Union

from pydantic import BaseModel, ValidationError

from rlfleet.shared.config.hints import did_you_mean

MAX_VALUE_CHARS = 60


def config_problems(exc: ValidationError, model: type[BaseModel]) -> list[str]:
    """One line per error of `exc`, raised validating `model`: 'field: problem (value ...)', with a suggestion."""
    lines = []
    for err in exc.errors():
        loc = tuple(err["loc"])
        field = ".".join(map(str, loc)) or "(top level)"
        if err["type"] == "extra_forbidden":
            known = sorted(known_keys(model, loc[:-1]))
            hint = did_you_mean(str(loc[-1]), known).strip(" ()") or f"the keys there are {', '.join(known)}"
            lines.append(f"{field}: unknown key (value {_short(err.get('input'))}); {hint}")
            continue
        message = str(err["msg"]).removeprefix("Value error, ").removeprefix("Assertion failed, ")
        # a missing field has no value, and a whole config's (a check across sections) says nothing new
        value = "" if err["type"] == "missing" or not loc else f" (value {_short(err.get('input'))})"
        lines.append(f"{field}: {message}{value}")
    return lines


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= MAX_VALUE_CHARS else text[:MAX_VALUE_CHARS - 3] + "..."


def known_keys(model: type[BaseModel], loc: tuple[str | int, ...]) -> set[str]:
    """The keys a mapping at `loc` inside `model` may have: the fields of the models found there (of every member
    of a union, or of the one a tagged union's tag picks)."""
    models = [model]
    for part in loc:
        found: list[type[BaseModel]] = []
        for current in models:
            field = current.model_fields.get(str(part))
            if field is not None:
                found += _models_in(field.annotation)
            elif isinstance(part, int) or _tagged(current, str(part)):
                found.append(current)  # a list index, or a tagged union's tag: the same model, one level down
        models = found or models
    return {name for current in models for name in current.model_fields}


def _tagged(model: type[BaseModel], tag: str) -> bool:
    return any(typing.get_origin(field.annotation) is Literal and tag in typing.get_args(field.annotation)
               for field in model.model_fields.values())


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    """The models an annotation may hold: itself, or inside Optional, unions, Annotated and containers."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    origin = typing.get_origin(annotation)
    if origin is None:
        return []
    args = typing.get_args(annotation)
    if origin is typing.Annotated:
        args = args[:1]
    elif origin not in (Union, types.UnionType, list, tuple, dict, set, frozenset):
        return []
    return [model for arg in args for model in _models_in(arg)]
