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
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scars.agents.runtime.accommodation import AccommodationConfig, Accommodator, Outcome
from scars.agents.runtime.context_mapping import _ANY_SCALAR, ContextMapping, ToolSignature
from scars.agents.runtime.decision_log import DecisionLog
from scars.agents.runtime.errors import ContextMappingError, GateError, MissingLedgerError, ScarBlocked
from scars.agents.runtime.ledger import VerifyReport
from scars.agents.runtime.scar import Scar
from scars.envs.api import Verdict, read_rules
from scars.synthesis.dsl import Action, Rule, parse_rule
from scars.synthesis.errors import ConfigError
from scars.synthesis.fragments import Verifier


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
        if self.log is not None and self.log.error is not None:
            raise GateError(f"{self.log.error}; every call is refused (fail closed)")
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

    def anchor(self) -> str:
        """The ledger's head as ``COUNT:HASH``: keep it away from the ledger and pass it back as
        ``open_gate(anchor=…)`` (or ``scars ledger verify --anchor``) to catch a roll-back of every file."""
        return self._acc.anchor()

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
    anchor: tuple[int, str] | str | None = None,
) -> Gate:
    """Open the scar set of ``ledger`` (created if absent) behind a gate.

    The ledger must verify (hash chain, MACs, head file) or this raises ``SchemaIntegrityError`` and nothing is
    gated (fail closed). core: the core schema H (a rule file, or rules); classes: ``in_class`` equivalence classes;
    verifier: ``verifier(context, action) -> True`` when the call violates (counterfactual extraction asks it; without
    one, only the reported failures count as violations); config: the accommodation loop's settings; name: the
    source name recorded in provenance; anchor: ``COUNT:HASH`` from an earlier ``Gate.anchor()`` (or a run's
    ``ledger_head``) kept away from the ledger: the ledger must extend it (a roll-back of every file is refused).

    A missing, emptied or replaced database whose head file (or key) says events existed raises
    ``MissingLedgerError`` (never a fresh start); a database deleted or replaced under the running gate is refused
    at the next write and by ``verify()``; a deleted head row is refused (``LedgerIntegrityError``)."""
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
        anchor=anchor,
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
    "MissingLedgerError",
    "Outcome",
    "ScarBlocked",
    "ToolSignature",
    "open_gate",
    "read_core_schema",
)
