"""The gate: any framework's tool calls decided by the scars control plane (issue 18, ``scars-runtime``).

A tool call becomes a DSL decision (q, a) through the **context mapping** (:class:`ContextMapping`):

- the action a is ``Action("tool", name, args)``: the tool's name and its arguments, each a DSL value (str, int,
  float, bool). A tool is declared with a :class:`ToolSignature` — from a Python function's annotations or an
  OpenAI/MCP JSON Schema — naming its scalar parameters (visible to rules as ``action.<param>``) and its opaque ones
  (arrays, objects: accepted, never visible to rules). A call of an undeclared tool, with an undeclared argument,
  without a required one, or with a value of another type than declared does not fit the mapping: it raises
  :class:`ContextMappingError` and is blocked (fail closed).
- the context q is a flat mapping of names to DSL values (the framework's session state: user role, data scope,
  budget left, …); keys may not start with ``action.`` (the DSL reads the candidate action there).

Rules fire on (q, a) with the meaning of ``synthesis.dsl.semantics`` (``ControlPlane.fired_rules``): the core schema
H (read-only, from a rule file) and the active scars of the ledger. A call is allowed exactly when no rule fires.
Every decision is appended to an in-memory queue and written to the decision log (``<ledger>.decisions.sqlite``) in
batches by a background thread, so recording never waits for the disk; ``flush()`` / ``close()`` (and interpreter
exit) write what is queued.
"""

from __future__ import annotations

import atexit
import contextlib
import contextvars
import functools
import inspect
import json
import sqlite3
import threading
import time
import typing
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scars.agents.runtime.accommodation import AccommodationConfig, Accommodator, Outcome
from scars.agents.runtime.ledger import VerifyReport
from scars.agents.runtime.scar import Scar
from scars.envs.api import Verdict, read_rules
from scars.synthesis.dsl import Action, Rule, parse_rule
from scars.synthesis.errors import ConfigError, ScarsError
from scars.synthesis.fragments import Verifier

_ANY_SCALAR: tuple[type, ...] = (str, int, float, bool)


class GateError(ScarsError):
    """Base of the gate's errors: each one means the call did not reach the tool."""


class ContextMappingError(GateError, ValueError):
    """A tool call (or context) that does not fit the declared context mapping; the call is blocked."""


class ScarBlocked(GateError):
    """A rule of H or an active scar forbids this call in this context; it did not reach the tool."""

    def __init__(self, decision: GateDecision) -> None:
        self.decision = decision
        super().__init__(
            f"tool call {decision.tool!r} blocked in this context by rule(s) {', '.join(decision.fired)}"
        )


@dataclass(frozen=True, slots=True)
class GateDecision:
    """One gate decision. allowed: no rule fired and the call fit the mapping. fired: ids of the rules that fired
    (``H:<hash>`` for the core schema, a scar id otherwise). error: the mapping error of a call that did not fit."""

    allowed: bool
    tool: str
    action: Action | None
    fired: tuple[str, ...] = ()
    error: ContextMappingError | None = None

    @property
    def reason(self) -> str:
        if self.allowed:
            return "allowed"
        return str(self.error) if self.error is not None else f"blocked by {', '.join(self.fired)}"


# ------------------------------------------------------------------------------------------ context mapping
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


# ------------------------------------------------------------------------------------------ the decision log
_LOG_SCHEMA = """
CREATE TABLE IF NOT EXISTS decisions (
    id        INTEGER PRIMARY KEY,
    time_us   INTEGER NOT NULL,
    tool      TEXT NOT NULL,
    action    TEXT,  -- the DSL action's arguments (JSON object); NULL when the call did not fit the mapping
    context   TEXT NOT NULL,
    allowed   INTEGER NOT NULL,
    fired     TEXT NOT NULL,
    error     TEXT,
    schema_version INTEGER NOT NULL
);
"""


class DecisionLog:
    """Every gate decision, written in batches by a background thread (the call only appends to a queue).

    Rows: time, tool, the call's DSL arguments (``action``) and context as JSON, allowed, the fired rule ids, the mapping error and the
    schema version (the ledger event count the decision was taken under). ``flush()`` waits until everything queued
    so far is written; ``close()`` flushes and stops the thread. Not hash-chained: the ledger is the evidence of what
    was enforced; this log is what was decided under it.
    """

    def __init__(self, path: str | Path, *, interval_s: float = 0.25, batch: int = 2048) -> None:
        self.path = Path(path)
        self.interval_s, self.batch = interval_s, batch
        self._queue: deque[tuple] = deque()
        self._requested = (
            0  # flush requests made / served: a served request wrote everything queued before it
        )
        self._served = 0
        self._done = threading.Condition()
        self._wake = threading.Event()
        self._closing = False
        self._error: BaseException | None = None
        conn = sqlite3.connect(self.path)  # created here so a bad path fails at open, not later
        conn.executescript(_LOG_SCHEMA)
        conn.close()
        self._thread = threading.Thread(target=self._run, name="scars-decision-log", daemon=True)
        self._thread.start()

    def append(self, row: tuple) -> None:
        self._queue.append(row)
        if len(self._queue) >= self.batch:
            self._wake.set()

    def _run(self) -> None:
        conn = sqlite3.connect(self.path)
        try:
            while True:
                self._wake.wait(self.interval_s)
                self._wake.clear()
                with self._done:
                    request = self._requested
                self._write(conn)
                with self._done:
                    self._served = request
                    self._done.notify_all()
                if self._closing and not self._queue:
                    return
        except BaseException as exc:  # reported by flush/close
            self._error = exc
            with self._done:
                self._done.notify_all()
        finally:
            conn.close()

    def _write(self, conn: sqlite3.Connection) -> None:
        rows = []
        dumps = json.dumps
        while self._queue:
            t, tool, action, context, allowed, fired, error, version = self._queue.popleft()
            rows.append(
                (
                    t,
                    tool,
                    None if action is None else dumps(dict(action.args), sort_keys=True),
                    dumps(context, sort_keys=True, default=str) if context else "{}",
                    int(allowed),
                    dumps(fired) if fired else "[]",
                    error,
                    version,
                )
            )
        if rows:
            with conn:
                conn.executemany(
                    "INSERT INTO decisions (time_us, tool, action, context, allowed, fired, error, schema_version) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    rows,
                )

    def flush(self, timeout: float = 30.0) -> None:
        """Wait until every decision queued before this call is written."""
        with self._done:
            self._requested += 1
            request = self._requested
        self._wake.set()
        with self._done:
            ok = self._done.wait_for(lambda: self._served >= request or self._error is not None, timeout)
        if self._error is not None:
            raise GateError(f"the decision log {self.path} failed: {self._error!r}") from self._error
        if not ok:
            raise GateError(f"the decision log {self.path} was not written within {timeout}s")

    def close(self) -> None:
        if self._closing:
            return
        self._closing = True
        self._wake.set()
        self._thread.join(timeout=30.0)
        if self._error is not None:
            raise GateError(f"the decision log {self.path} failed: {self._error!r}") from self._error

    def rows(self) -> list[dict[str, Any]]:
        """The written decisions, oldest first (call ``flush()`` first to include the queued ones)."""
        conn = sqlite3.connect(self.path)
        try:
            conn.row_factory = sqlite3.Row
            out = []
            for row in conn.execute("SELECT * FROM decisions ORDER BY id"):
                d = dict(row)
                d["allowed"] = bool(d["allowed"])
                d["fired"] = json.loads(d["fired"])
                d["context"] = json.loads(d["context"])
                d["action"] = None if d["action"] is None else json.loads(d["action"])
                out.append(d)
            return out
        finally:
            conn.close()


# ------------------------------------------------------------------------------------------ the gate
_RAISE = object()
_NO_CONTEXT: Mapping[str, Any] = {}


def _binder(f: Callable[..., Any], spec: ToolSignature) -> Callable[[tuple, dict], dict[str, Any]]:
    """(args, kwargs) → the named arguments of a call of ``f`` (defaults filled in; ``*args``/``**kwargs`` left out),
    as ``inspect.Signature.bind`` would, without its cost on the common path; a call it cannot bind raises
    ``TypeError`` from ``bind`` itself."""
    signature = inspect.signature(f)
    params = list(signature.parameters.values())
    positional = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    keywords = {p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    defaults = {
        p.name: p.default
        for p in params
        if p.default is not p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
    }
    required = {
        p.name for p in params if p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
    }
    simple = all(p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) for p in params)
    declared = set(spec.params) | set(spec.opaque)

    def slow(args: tuple, kwargs: dict) -> dict[str, Any]:
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        return {k: v for k, v in bound.arguments.items() if k in declared}

    if not simple:
        return slow

    def bind(args: tuple, kwargs: dict) -> dict[str, Any]:
        if len(args) > len(positional):
            return slow(args, kwargs)
        arguments = dict(defaults)
        arguments.update(zip(positional, args, strict=False))
        if kwargs:
            taken = positional[: len(args)]
            if any(k not in keywords or k in taken for k in kwargs):
                return slow(args, kwargs)
            arguments.update(kwargs)
        if not required <= arguments.keys():
            return slow(args, kwargs)
        return arguments

    return bind


def read_core_schema(source: str | Path | Iterable[str | Rule]) -> tuple[Rule, ...]:
    """The core schema H: a rule file (one DSL rule per line, ``#`` comments; a line that does not parse is a
    ``DSLSyntaxError`` naming the file, line and column) or an iterable of rules / rule texts."""
    if isinstance(source, str | Path):
        return read_rules(Path(source))
    return tuple(r if isinstance(r, Rule) else parse_rule(r) for r in source)


class Gate:
    """Gates tool calls with H ∪ S_t and feeds failures to the background accommodation loop (module docstring).

    Made by :func:`open_gate`. Thread-safe: decisions take a short lock that the accommodation worker also takes
    while it changes the control plane (the search itself runs without it).
    """

    def __init__(
        self,
        accommodator: Accommodator,
        mapping: ContextMapping,
        decision_log: DecisionLog | None,
    ) -> None:
        self._acc = accommodator
        self.mapping = mapping
        self.log = decision_log
        self._lock = accommodator.lock
        self._plane = accommodator.plane
        self.fallback_name: str = accommodator.plane.fallback
        """a⊥'s name (safe_refusal / ask_human / no_op): what adapters put in place of a blocked call."""
        self._context: contextvars.ContextVar[Mapping[str, Any]] = contextvars.ContextVar(
            "scars_gate_context", default=_NO_CONTEXT
        )
        self._closed = False
        atexit.register(self.close)

    # ------------------------------------------------------------------------------------------ reads
    @property
    def scars(self) -> tuple[Scar, ...]:
        """The active scars S_t."""
        with self._lock:
            return self._plane.scars

    @property
    def version(self) -> int:
        """The ledger event count the control plane reflects."""
        return self._acc.version

    @property
    def ledger_path(self) -> Path:
        return self._acc.path

    @contextlib.contextmanager
    def using(self, context: Mapping[str, Any]) -> Iterator[None]:
        """Decisions inside the block (in this thread or task) read ``context`` when none is passed."""
        token = self._context.set(context)
        try:
            yield
        finally:
            self._context.reset(token)

    # ------------------------------------------------------------------------------------------ decisions
    def check(
        self, tool: str, arguments: Mapping[str, Any] | None, context: Mapping[str, Any] | None = None
    ) -> GateDecision:
        """Decide one call (never raises for a bad call: a call that does not fit the mapping is a blocked
        decision carrying its ``ContextMappingError``)."""
        if self._closed:
            raise GateError("the gate is closed; every call is refused")
        q = self._context.get() if context is None else context
        try:
            q = self.mapping.context(q)
            action = self.mapping.action(tool, arguments)
        except ContextMappingError as exc:
            decision = GateDecision(False, tool, None, (), exc)
            printable = (
                {str(k): v if isinstance(v, _ANY_SCALAR) else repr(v) for k, v in q.items()}
                if isinstance(q, Mapping)
                else {}
            )
            self._record(decision, printable)
            return decision
        with self._lock:
            fired = self._plane.fired_rules(q, action)
        decision = GateDecision(not fired, tool, action, fired)
        self._record(decision, q)
        if decision.allowed:
            self._acc.observe_call(q, action)
        return decision

    def _record(self, decision: GateDecision, q: Mapping[str, Any]) -> None:
        if self.log is not None:
            error = None if decision.error is None else str(decision.error)
            self.log.append(
                (
                    time.time_ns() // 1000,
                    decision.tool,
                    decision.action,
                    q,
                    decision.allowed,
                    decision.fired,
                    error,
                    self._acc.version,
                )
            )

    def enforce(
        self, tool: str, arguments: Mapping[str, Any] | None, context: Mapping[str, Any] | None = None
    ) -> Action:
        """``check`` that raises: ``ContextMappingError`` for a call that does not fit, ``ScarBlocked`` for a
        forbidden one; returns the DSL action of an allowed call."""
        decision = self.check(tool, arguments, context)
        if decision.error is not None:
            raise decision.error
        if not decision.allowed:
            raise ScarBlocked(decision)
        return decision.action  # type: ignore[return-value]

    def masked_tools(self, tools: Iterable[str], context: Mapping[str, Any] | None = None) -> frozenset[str]:
        """The tools a rule forbids outright in this context (whatever the arguments): a call of the tool with no
        argument is masked. Tools masked only for some argument values are not listed (their calls are checked)."""
        q = self.mapping.context(self._context.get() if context is None else context)
        with self._lock:
            return frozenset(t for t in tools if self._plane.fired_rules(q, Action("tool", t)))

    def tool(
        self,
        fn: Callable[..., Any] | None = None,
        *,
        name: str | None = None,
        fallback: Any = _RAISE,
        context: Callable[[], Mapping[str, Any]] | None = None,
    ) -> Any:
        """Decorator gating a plain Python tool function (declared in the mapping from its signature).

        A blocked call raises ``ScarBlocked``, or returns ``fallback`` (called with the ``GateDecision`` if it is
        callable); a call that does not fit the mapping raises ``ContextMappingError``. Either way the function is
        not called. ``context``: a function returning the call's context (default: the ``using`` block's)."""

        def wrap(f: Callable[..., Any]) -> Callable[..., Any]:
            spec = ToolSignature.from_function(f, name)
            self.mapping.declare(spec)
            bind = _binder(f, spec)

            @functools.wraps(f)
            def gated(*args: Any, **kwargs: Any) -> Any:
                arguments = bind(args, kwargs)
                decision = self.check(spec.name, arguments, None if context is None else context())
                if decision.allowed:
                    return f(*args, **kwargs)
                if decision.error is not None:
                    raise decision.error
                if fallback is _RAISE:
                    raise ScarBlocked(decision)
                return fallback(decision) if callable(fallback) else fallback

            gated.scars_tool = spec  # type: ignore[attr-defined]
            return gated

        return wrap if fn is None else wrap(fn)

    # ------------------------------------------------------------------------------------------ accommodation
    def report_failure(
        self,
        context: Mapping[str, Any] | None,
        action: Action | tuple[str, Mapping[str, Any]],
        verdict: Verdict,
    ):
        """A verified failure of an executed call in ``context`` (None: the ``using`` block's): ``action`` is a DSL
        ``Action`` or ``(tool, arguments)``;
        ``verdict`` is the verifier's ``envs.api.Verdict`` (rule id, message, verifier id). Returns at once with a
        ``concurrent.futures.Future`` of the :class:`Outcome`; the signal, synthesis, merge and ledger writes run on
        the accommodation worker, off the decision path."""
        q = dict(self.mapping.context(self._context.get() if context is None else context))
        if not isinstance(action, Action):
            tool, arguments = action
            action = self.mapping.action(tool, arguments)
        if not isinstance(verdict, Verdict):
            raise ConfigError(f"verdict must be an envs.api.Verdict, got {type(verdict).__name__}")
        return self._acc.report_failure(q, action, verdict)

    def admit_rule(self, rule: Rule | str, *, reason: str) -> str:
        """Admit a rule by hand (a human operator, outside any merge); returns the scar id."""
        return self._acc.admit_rule(parse_rule(rule) if isinstance(rule, str) else rule, reason=reason)

    def verify(self) -> VerifyReport:
        """Verify the ledger's hash chain (and MACs, head file) now."""
        return self._acc.verify()

    def flush(self) -> None:
        """Write every queued decision to the decision log."""
        if self.log is not None:
            self.log.flush()

    def close(self) -> None:
        """Finish accommodations in flight, flush the decision log, close the ledger. Idempotent."""
        if self._closed:
            return
        self._closed = True
        atexit.unregister(self.close)
        try:
            self._acc.close()
        finally:
            if self.log is not None:
                self.log.close()

    def __enter__(self) -> Gate:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_gate(
    ledger: str | Path,
    *,
    core: str | Path | Iterable[str | Rule] = (),
    mapping: ContextMapping | None = None,
    classes: Mapping[str, Iterable[str]] | None = None,
    fallback: str = "safe_refusal",
    key_file: str | Path | None = None,
    verifier: Verifier | None = None,
    config: AccommodationConfig | None = None,
    decision_log: bool = True,
    name: str = "runtime",
) -> Gate:
    """Open the scar set of ``ledger`` (created if absent) behind a gate.

    The ledger must verify (hash chain, MACs, head file) or this raises ``SchemaIntegrityError`` and nothing is
    gated (fail closed). core: the core schema H (a rule file, or rules); classes: ``in_class`` equivalence classes;
    verifier: ``verifier(context, action) -> True`` when the call violates (counterfactual extraction asks it; without
    one, only the reported failures count as violations); config: the accommodation loop's settings; name: the
    source name recorded in provenance."""
    rules = read_core_schema(core)
    frozen = {k: frozenset(v) for k, v in (classes or {}).items()}
    acc = Accommodator(
        Path(ledger),
        core=rules,
        classes=frozen,
        fallback=fallback,
        key_file=key_file,
        verifier=verifier,
        config=config or AccommodationConfig(),
        name=name,
    )
    log = None
    if decision_log:
        try:
            log = DecisionLog(Path(str(ledger) + ".decisions.sqlite"))
        except BaseException:
            acc.close()
            raise
    return Gate(acc, mapping or ContextMapping(), log)


__all__: Sequence[str] = (
    "ContextMapping",
    "ContextMappingError",
    "DecisionLog",
    "Gate",
    "GateDecision",
    "GateError",
    "Outcome",
    "ScarBlocked",
    "ToolSignature",
    "open_gate",
    "read_core_schema",
)
