"""The context mapping: how a framework's tool call becomes the DSL pair (q, a) the rules read (docs/runtime.md, "The
context-mapping contract").

A tool is declared with a :class:`ToolSignature` — from a Python function's annotations or an OpenAI/MCP JSON Schema
— naming its scalar parameters (visible to rules as ``action.<param>``) and its opaque ones (arrays, objects:
accepted, never visible to rules). A call of an undeclared tool, with an undeclared argument, without a required
one, or with a value of another type than declared does not fit: :class:`ContextMappingError` (fail closed). The
context q is a flat mapping of names to DSL values; keys may not start with ``action.``.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from scars.agents.runtime.errors import ContextMappingError
from scars.synthesis.dsl import Action
from scars.synthesis.errors import ConfigError

_ANY_SCALAR: tuple[type, ...] = (str, int, float, bool)

_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
}
_PY_TYPES: dict[Any, tuple[type, ...]] = {str: (str,), int: (int,), float: (int, float), bool: (bool,)}


@dataclass(frozen=True)
class ToolSignature:
    """A tool as the context mapping declares it.

    params:   scalar parameter → accepted value types (visible to rules as ``action.<param>``).
    required: parameters a call must pass.
    opaque:   parameters accepted with any value but invisible to rules (arrays, objects, unknown types).
    """

    name: str
    params: Mapping[str, tuple[type, ...]] = field(default_factory=dict)
    required: frozenset[str] = frozenset()
    opaque: frozenset[str] = frozenset()

    @classmethod
    def from_function(cls, fn: Callable[..., Any], name: str | None = None) -> ToolSignature:
        """From a function's signature: parameters annotated str/int/float/bool (or Optional of one) and
        unannotated ones are scalar; any other annotation, ``*args`` and ``**kwargs`` are opaque."""
        try:
            hints = typing.get_type_hints(fn)
        except Exception:  # unresolvable forward references: read the raw annotations
            hints = {}
        params: dict[str, tuple[type, ...]] = {}
        required, opaque = set(), set()
        for p in inspect.signature(fn).parameters.values():
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                continue
            annotation = hints.get(p.name, p.annotation)
            types = _scalar_types(annotation)
            if types is None:
                opaque.add(p.name)
            else:
                params[p.name] = types
            if p.default is p.empty:
                required.add(p.name)
        return cls(name or fn.__name__, params, frozenset(required), frozenset(opaque))

    @classmethod
    def from_json_schema(cls, name: str, schema: Mapping[str, Any] | None) -> ToolSignature:
        """From a JSON Schema of the arguments (an OpenAI function's ``parameters``, an MCP tool's
        ``inputSchema``): string/integer/number/boolean properties (or an enum of such values) are scalar, the
        rest opaque."""
        schema = schema or {}
        if not isinstance(schema, Mapping) or schema.get("type", "object") != "object":
            raise ContextMappingError(
                f"tool {name!r}: the argument schema must be a JSON Schema object, got {schema!r:.200}"
            )
        params: dict[str, tuple[type, ...]] = {}
        opaque = set()
        for prop, sub in (schema.get("properties") or {}).items():
            types = _json_types(sub if isinstance(sub, Mapping) else {})
            if types is None:
                opaque.add(prop)
            else:
                params[prop] = types
        return cls(name, params, frozenset(schema.get("required") or ()), frozenset(opaque))


def _scalar_types(annotation: Any) -> tuple[type, ...] | None:
    if annotation is inspect.Parameter.empty or annotation is Any:
        return _ANY_SCALAR
    if annotation in _PY_TYPES:
        return _PY_TYPES[annotation]
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if args and len(args) < len(typing.get_args(annotation)) and all(a in _PY_TYPES for a in args):
        return tuple(dict.fromkeys(t for a in args for t in _PY_TYPES[a]))  # Optional[scalar]
    return None


def _json_types(sub: Mapping[str, Any]) -> tuple[type, ...] | None:
    kind = sub.get("type")
    if kind is None and "enum" in sub:
        values = sub["enum"]
        if values and all(v is None or isinstance(v, _ANY_SCALAR) for v in values):
            return tuple(dict.fromkeys(type(v) for v in values if v is not None)) or None
        return None
    kinds = [k for k in (kind if isinstance(kind, list) else [kind]) if k != "null"]
    if kinds and all(k in _JSON_TYPES for k in kinds):
        return tuple(dict.fromkeys(t for k in kinds for t in _JSON_TYPES[k]))
    return None


def _type_names(types: tuple[type, ...]) -> str:
    return " or ".join(t.__name__ for t in types)


class ContextMapping:
    """How a framework's tool call becomes a DSL decision (module docstring): declared tools and, optionally,
    declared context keys (name → accepted types; then any other key is an error)."""

    def __init__(
        self,
        tools: Iterable[ToolSignature] = (),
        *,
        context_keys: Mapping[str, type | tuple[type, ...]] | None = None,
    ) -> None:
        self._tools: dict[str, ToolSignature] = {}
        for spec in tools:
            self.declare(spec)
        self.context_keys: dict[str, tuple[type, ...]] | None = None
        if context_keys is not None:
            self.context_keys = {}
            for key, types in context_keys.items():
                flat = types if isinstance(types, tuple) else (types,)
                accepted = tuple(dict.fromkeys(t for x in flat for t in _PY_TYPES.get(x, ())))
                if not accepted or len(accepted) < len(flat):
                    raise ConfigError(
                        f"context key {key!r}: types must be str, int, float or bool, got {types!r}"
                    )
                self.context_keys[key] = accepted

    def declare(self, spec: ToolSignature) -> None:
        """Declare (or re-declare) a tool."""
        self._tools[spec.name] = spec

    @property
    def tools(self) -> tuple[str, ...]:
        return tuple(self._tools)

    def signature(self, name: str) -> ToolSignature | None:
        return self._tools.get(name)

    def action(self, name: str, arguments: Mapping[str, Any] | None) -> Action:
        """The DSL action of a call, or ``ContextMappingError`` naming what does not fit."""
        spec = self._tools.get(name)
        if spec is None:
            known = ", ".join(sorted(self._tools)) or "none"
            raise ContextMappingError(
                f"tool {name!r} is not declared in the context mapping (declared: {known})"
            )
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, Mapping):
            raise ContextMappingError(
                f"tool {name!r}: arguments must be a mapping of names to values, got {type(arguments).__name__}"
            )
        missing = spec.required - arguments.keys()
        if missing:
            raise ContextMappingError(
                f"tool {name!r}: missing required argument(s) {', '.join(sorted(missing))}"
            )
        args = []
        for key, value in arguments.items():
            types = spec.params.get(key)
            if types is None:
                if key in spec.opaque:
                    continue
                allowed = ", ".join(sorted({*spec.params, *spec.opaque})) or "none"
                raise ContextMappingError(f"tool {name!r}: undeclared argument {key!r} (declared: {allowed})")
            if value is None:
                continue  # an absent value: the feature is missing for the rules
            if value.__class__ not in types:
                raise ContextMappingError(
                    f"tool {name!r}: argument {key!r} = {value!r:.80} is a {type(value).__name__}; "
                    f"the mapping declares {_type_names(types)}"
                )
            args.append((key, value))
        args.sort()
        return Action("tool", name, tuple(args))

    def context(self, context: Mapping[str, Any] | None) -> dict[str, Any]:
        """The DSL context q of a call — a copy, so a framework that keeps mutating its session state does not change
        what was decided and recorded; ``None`` values are left out (absent) — or ``ContextMappingError``."""
        if context is None:
            return {}
        if not isinstance(context, Mapping):
            raise ContextMappingError(
                f"the context must be a mapping of names to values, got {type(context).__name__}"
            )
        declared = self.context_keys
        for key, value in context.items():
            if not isinstance(key, str) or key.startswith("action."):
                raise ContextMappingError(
                    f"context key {key!r}: keys are strings not starting with 'action.' (the candidate action's part)"
                )
            if declared is not None:
                types = declared.get(key)
                if types is None:
                    raise ContextMappingError(
                        f"context key {key!r} is not declared (declared: {', '.join(sorted(declared)) or 'none'})"
                    )
            else:
                types = _ANY_SCALAR
            if value is not None and value.__class__ not in types:
                raise ContextMappingError(
                    f"context value {key!r} = {value!r:.80} is a {type(value).__name__}; allowed: {_type_names(types)}"
                )
        return {k: v for k, v in context.items() if v is not None}
