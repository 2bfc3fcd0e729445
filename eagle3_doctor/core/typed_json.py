"""Typed results as JSON: one declaration gives both the document and its JSON Schema.

A result is a dataclass. :func:`fields_json` writes its fields under their own names, capture points
as their names and nested results through their own ``to_dict``; :func:`json_schema` reads the same
fields and type hints, so the schema under ``schemas/`` is the dataclasses' serialisation (generated
by ``tools/gen_schemas.py``, kept in sync by a test) rather than a second description that can drift.

Where a document is not its fields one for one, the class says how, in :class:`JsonFields`'s class
attributes: renamed keys, fields left out when None, keys required even when others are not, and the
schema of a key whose value ``to_dict`` writes differently.
"""

from __future__ import annotations

import types
import typing
from dataclasses import fields, is_dataclass
from typing import Any, ClassVar

from .taps import CapturePoint


class JsonFields:
    """Mixin for result dataclasses: ``to_dict()`` writes the fields (see the module docstring)."""

    JSON_NAMES: ClassVar[dict[str, str]] = {}  # field -> key written
    JSON_OMIT_NONE: ClassVar[tuple[str, ...]] = ()  # fields left out of the document when None
    JSON_REQUIRED: ClassVar[tuple[str, ...] | None] = None  # keys always written (default: every field not omitted)
    JSON_SCHEMA: ClassVar[dict[str, dict[str, Any]]] = {}  # key -> schema, where to_dict writes something else

    def to_dict(self) -> dict[str, Any]:
        return fields_json(self)


def to_json(value: Any) -> Any:
    """A value as written: capture points by name, results through their ``to_dict``, sequences as lists."""
    if isinstance(value, CapturePoint):
        return str(value)
    if is_dataclass(value) and not isinstance(value, type):
        return value.to_dict()  # type: ignore[attr-defined]  # every result dataclass defines to_dict
    if isinstance(value, (list, tuple)):
        return [to_json(v) for v in value]
    if isinstance(value, dict):
        return {k: to_json(v) for k, v in value.items()}
    return value


def fields_json(obj: Any) -> dict[str, Any]:
    """Every field of a result dataclass under its JSON name, less the None fields it omits."""
    names, omit = getattr(obj, "JSON_NAMES", {}), getattr(obj, "JSON_OMIT_NONE", ())
    out = {}
    for f in fields(obj):
        v = getattr(obj, f.name)
        if not (v is None and f.name in omit):
            out[names.get(f.name, f.name)] = to_json(v)
    return out


def json_schema(cls: type, defs: dict[str, Any]) -> dict[str, Any]:
    """A reference to ``cls``'s schema, which is added to ``defs`` (with every result class it contains)."""
    name = cls.__name__
    if name not in defs:
        defs[name] = {}  # placeholder: a class that contains itself refers to it
        hints = typing.get_type_hints(cls)
        names, omit = getattr(cls, "JSON_NAMES", {}), getattr(cls, "JSON_OMIT_NONE", ())
        overrides: dict[str, Any] = getattr(cls, "JSON_SCHEMA", {})
        props = {names.get(f.name, f.name): _type_schema(hints[f.name], defs) for f in fields(cls)}
        props.update(overrides)
        required = getattr(cls, "JSON_REQUIRED", None)
        if required is None:
            required = tuple(names.get(f.name, f.name) for f in fields(cls) if f.name not in omit)
        doc = (cls.__doc__ or "").strip().split("\n")[0]
        defs[name] = {
            "description": doc,
            "type": "object",
            "properties": props,
            "required": list(required),
            "additionalProperties": False,
        }
    return {"$ref": f"#/$defs/{name}"}


def _type_schema(tp: Any, defs: dict[str, Any]) -> dict[str, Any]:
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if tp is Any:
        return {}
    if tp is type(None):
        return {"type": "null"}
    if origin in (typing.Union, types.UnionType):
        return {"anyOf": [_type_schema(a, defs) for a in args]}
    if tp is float:  # null: a figure with nothing to measure (io.outputs.write_json writes NaN so)
        return {"type": ["number", "null"]}
    simple = {bool: "boolean", int: "integer", str: "string", CapturePoint: "string"}
    if tp in simple:
        return {"type": simple[tp]}
    if origin in (list, tuple) or tp in (list, tuple):
        items = [a for a in args if a is not Ellipsis]
        out: dict[str, Any] = {"type": "array"}
        if items:
            out["items"] = _type_schema(items[0], defs)
        if origin is tuple and Ellipsis not in args and args:
            out["minItems"] = out["maxItems"] = len(args)
        return out
    if origin is dict or tp is dict:
        return {"type": "object"}
    if isinstance(tp, type) and is_dataclass(tp):  # a hint is a class, never an instance
        return json_schema(tp, defs)
    raise TypeError(f"no JSON schema for {tp!r}")
