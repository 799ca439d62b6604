"""The gate in front of AgentDojo's ``FunctionsRuntime`` (issue 42; AgentDojo: Debenedetti et al., NeurIPS 2024).

AgentDojo runs a task through ``TaskSuite.run_task_with_pipeline(pipeline, user_task, injection_task, injections,
runtime_class=…)``: every tool call any pipeline element makes — its ``ToolsExecutor`` under a real model, the
ground-truth pipeline, a nested ``FunctionCall`` argument — goes through ``FunctionsRuntime.run_function``. The gate
sits there: :meth:`AgentDojoGate.runtime_class` is a ``FunctionsRuntime`` subclass whose ``run_function`` decides the
call first. A forbidden call never runs; it is answered the way AgentDojo answers a failed call, with the error
``"ScarBlocked: …"`` (or the exception itself under ``raise_on_error``), so the model sees a refusal and goes on.

**The context mapping.** Each tool of the suite is declared from its pydantic input schema (the ``Function``'s
``parameters``): str/int/float/bool parameters (and ``Optional`` of one, and enums, read as their value) are visible to
rules as ``action.<param>``; a list of scalars is visible as its elements joined by ``", "`` in order (a rule reads
``action.recipients == "a@x.com"`` as "exactly that one recipient"); dicts are opaque. A nested ``FunctionCall`` as the
value of a scalar parameter does not fit (the rules could not read the value before it runs): refused, fail closed. The
context q is the suite's name and the user task's id (``suite``, ``user_task``): the stated intent AgentDojo gives is
the task's prompt, free text no rule of the DSL reads, so its id stands for it.

**Verified failures.** :class:`SecurityMonitor` is AgentDojo's own evaluator turned into the gate's verifier: after
each executed call it asks the injection task's ``security_from_traces`` / ``security`` on the environment as it is
now against the case's pre-environment; when that turns true the call that made it true is reported to the gate
(``Gate.report_failure`` with ``Verdict("agentdojo:<suite>:<injection task>", goal, "agentdojo.security")``) — the
ledger records it and the runtime's accommodation learns from it like from any other failure. :class:`SecurityWhatIf`,
passed as the gate's ``verifier``, lets the accommodation's counterfactual extraction ask the same check about the
call with an argument changed (without it only the reported call is known: the runtime's default).
"""

from __future__ import annotations

import contextlib
import enum
import io
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, get_args

from scars.agents.runtime.context_mapping import ToolSignature, _scalar_types
from scars.agents.runtime.gate import Gate, GateDecision, ScarBlocked
from scars.envs.api import Verdict
from scars.synthesis.errors import ScarsError

try:
    from agentdojo.agent_pipeline import BasePipelineElement
    from agentdojo.functions_runtime import EmptyEnv, FunctionCall, FunctionsRuntime
except ImportError as exc:  # depends on the optional extra
    raise ScarsError("the AgentDojo adapter needs the optional extra: pip install -e '.[agentdojo]'") from exc

VERIFIER_ID = "agentdojo.security"
"""The verifier id of a failure AgentDojo's ``security`` check found."""

_SCALARS = (str, int, float, bool)
_NO_ENV = EmptyEnv()
_NO_ARGS: dict = {}


def _list_of_scalars(annotation: Any) -> bool:
    """``list[str]``, ``list[str] | None`` and the like."""
    for arg in (annotation, *get_args(annotation)):
        inner = get_args(arg)
        if getattr(arg, "__origin__", None) is list and inner and all(i in _SCALARS for i in inner):
            return True
    return False


def tool_signature(function: Any) -> ToolSignature:
    """The ``ToolSignature`` of an AgentDojo ``Function`` (module docstring, "The context mapping")."""
    params: dict[str, tuple[type, ...]] = {}
    required, opaque = set(), set()
    for name, field in function.parameters.model_fields.items():
        annotation = field.annotation
        types = _scalar_types(annotation)
        if types is None and isinstance(annotation, type) and issubclass(annotation, enum.Enum):
            types = (str,) if all(isinstance(m.value, str) for m in annotation) else None
        if types is None and _list_of_scalars(annotation):
            types = (str,)
        if types is None:
            opaque.add(name)
        else:
            params[name] = types
        if field.is_required():
            required.add(name)
    return ToolSignature(function.name, params, frozenset(required), frozenset(opaque))


def argument_view(kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """A call's arguments as the gate reads them: enums as their value, lists of scalars joined by ``", "``, scalars as
    they are, the rest (dicts, nested calls, mixed lists) passed on for the mapping to accept (opaque parameters) or
    refuse (scalar ones)."""
    view: dict[str, Any] = {}
    for key, value in kwargs.items():
        if isinstance(value, enum.Enum):
            value = value.value
        elif isinstance(value, list | tuple) and all(isinstance(v, _SCALARS) for v in value):
            value = ", ".join(str(v) for v in value)
        view[key] = value
    return view


def security_verdict(task: Any, pre: Any, env: Any, trace: Sequence[Any], model_output: str = "") -> bool:
    """AgentDojo's verdict of ``task`` on ``env``: its ``security_from_traces`` first, else ``security`` (as its suite
    checks a case); what the checks print (some print the missing keyword) is kept off the caller's output."""
    with contextlib.redirect_stdout(io.StringIO()):
        verdict = task.security_from_traces(model_output, pre, env, list(trace))
        return bool(task.security(model_output, pre, env) if verdict is None else verdict)


def _list_params(function: Any) -> frozenset[str]:
    return frozenset(n for n, f in function.parameters.model_fields.items() if _list_of_scalars(f.annotation))


class SecurityWhatIf:
    """AgentDojo's ``security`` check as the gate's counterfactual verifier (``open_gate(verifier=…)``).

    While a breach is being reported (:class:`SecurityMonitor` sets :attr:`case` and waits for the accommodation), a
    question "does call a violate?" is answered by AgentDojo itself: the case's calls before the breaching one are
    replayed on a copy of its pre-environment, a is run on that, and the injection task's ``security`` is read. A
    question outside a report, about a tool the suite does not have, or about a call whose arguments cannot be rebuilt
    (an opaque argument the gate never saw) is unknown (None). ``questions`` counts the answers given."""

    def __init__(self, suite: Any) -> None:
        self.functions = {f.name: f for f in suite.tools}
        self.lists = {f.name: _list_params(f) for f in suite.tools}
        self.case: tuple[Any, Any, list[Any], Any] | None = None
        self._before: Any = None
        self.questions = 0

    def begin(self, task: Any, pre: Any, trace_before: list[Any], failed: Any) -> None:
        """The case being reported: its injection task, pre-environment, the calls before the breach, the breach."""
        self.case, self._before = (task, pre, list(trace_before), failed), None

    def end(self) -> None:
        self.case, self._before = None, None

    def arguments(self, action: Any, base: Mapping[str, Any]) -> dict[str, Any]:
        """The call's keyword arguments rebuilt from its DSL action (lists split back at ``", "``) over ``base``."""
        kwargs = {
            k: v for k, v in base.items() if not isinstance(v, _SCALARS) and k not in self.lists[action.name]
        }
        for key, value in action.args:
            kwargs[key] = (
                value.split(", ") if key in self.lists[action.name] and isinstance(value, str) else value
            )
        return kwargs

    def __call__(self, q: Mapping[str, Any], action: Any) -> bool | None:
        if self.case is None or action.kind != "tool" or action.name not in self.functions:
            return None
        task, pre, trace, failed = self.case
        runtime = FunctionsRuntime(list(self.functions.values()))
        if self._before is None:
            self._before = pre.model_copy(deep=True)
            for call in trace:
                runtime.run_function(self._before, call.function, call.args)
        base = failed.args if action.name == failed.function else {}
        kwargs = self.arguments(action, base)
        env = self._before.model_copy(deep=True)
        _, error = runtime.run_function(env, action.name, kwargs)
        self.questions += 1
        if error is not None:
            return None if error.startswith("ValidationError") else False
        return security_verdict(task, pre, env, [*trace, FunctionCall(function=action.name, args=kwargs)])


class AgentDojoGate:
    """A gate over one AgentDojo suite's tools (module docstring).

    ``gate``: an open :class:`~scars.agents.runtime.gate.Gate` (its context mapping gets every tool of the suite);
    ``suite``: an AgentDojo ``TaskSuite``. ``overhead_ns`` collects the time of each gate decision (the argument view
    and ``Gate.check``), for the per-call overhead the benchmark reports."""

    def __init__(self, gate: Gate, suite: Any, *, what_if: SecurityWhatIf | None = None) -> None:
        self.gate = gate
        self.suite = suite
        self.what_if = what_if
        for function in suite.tools:
            gate.mapping.declare(tool_signature(function))
        self.overhead_ns: list[int] = []

    def context(self, user_task_id: str) -> dict[str, str]:
        """The context q of a call made for ``user_task_id`` (module docstring)."""
        return {"suite": self.suite.name, "user_task": user_task_id}

    def decide(self, function: str, kwargs: Mapping[str, Any], context: Mapping[str, Any]) -> GateDecision:
        start = time.perf_counter_ns()
        decision = self.gate.check(function, argument_view(kwargs), context)
        self.overhead_ns.append(time.perf_counter_ns() - start)
        return decision

    def runtime_class(
        self,
        context: Mapping[str, Any],
        observer: Callable[[Any, Any, Any, str | None], None] | None = None,
    ) -> type:
        """A ``FunctionsRuntime`` subclass for ``run_task_with_pipeline(…, runtime_class=…)``: every call decided in
        ``context`` before it runs; ``observer(env, call, result, error)`` after each executed call (e.g. a
        :class:`SecurityMonitor`)."""
        owner, q = self, dict(context)

        class GatedFunctionsRuntime(FunctionsRuntime):
            def run_function(self, env, function, kwargs, raise_on_error=False):  # AgentDojo's signature
                decision = owner.decide(function, kwargs, q)
                if not decision.allowed:
                    if raise_on_error:
                        raise decision.error if decision.error is not None else ScarBlocked(decision)
                    kind = "ContextMappingError" if decision.error is not None else "ScarBlocked"
                    return "", f"{kind}: {decision.reason}"
                result, error = super().run_function(env, function, kwargs, raise_on_error)
                if observer is not None:
                    observer(env, FunctionCall(function=function, args=dict(kwargs)), result, error)
                return result, error

        return GatedFunctionsRuntime


class SecurityMonitor(BasePipelineElement):
    """AgentDojo's ``security`` check of one case after every executed call (module docstring, "Verified failures").

    An AgentDojo pipeline element: put it first in the pipeline, where it keeps a deep copy of the case's environment
    as the agent receives it (the pre-environment ``security`` compares against), and pass it as the gated runtime's
    ``observer``. ``gate``: the first call after which the check holds is reported to it; ``wait``: wait for the
    accommodation's ``Outcome`` before the call returns (the offline protocol does, so that the same seed gives the
    same numbers; a deployment need not). ``breached_at``: the index of that call among the executed ones."""

    name = "scars_security_monitor"

    def __init__(
        self,
        injection_task: Any,
        *,
        gate: AgentDojoGate | None = None,
        context: Mapping[str, Any] | None = None,
        wait: bool = True,
    ) -> None:
        self.task = injection_task
        self.gate = gate
        self.context = dict(context or {})
        self.wait = wait
        self.pre: Any = None
        self.trace: list[Any] = []
        self.breached_at: int | None = None
        self.outcome: Any = None

    def query(self, query, runtime, env=_NO_ENV, messages=(), extra_args=_NO_ARGS):  # AgentDojo's signature
        if (
            self.pre is None
        ):  # AgentDojo re-runs a pipeline that gave no output: the first environment is the case's
            self.pre = env.model_copy(deep=True)
        return query, runtime, env, messages, extra_args

    def breached(self, env: Any, model_output: str = "") -> bool:
        """AgentDojo's verdict on the environment now (:func:`security_verdict`)."""
        return security_verdict(self.task, self.pre, env, self.trace, model_output)

    def __call__(self, env: Any, call: Any, result: Any, error: str | None) -> None:
        self.trace.append(call)
        if self.pre is None:
            raise ScarsError(
                "the SecurityMonitor must be the pipeline's first element (it saw no pre-environment)"
            )
        if self.breached_at is not None or not self.breached(env):
            return
        self.breached_at = len(self.trace) - 1
        if self.gate is None:
            return
        suite = self.gate.suite.name
        verdict = Verdict(f"agentdojo:{suite}:{self.task.ID}", str(self.task.GOAL)[:200], VERIFIER_ID)
        what_if = self.gate.what_if
        if what_if is not None:
            if not self.wait:
                raise ScarsError(
                    "a SecurityWhatIf verifier answers only while its report is awaited (wait=True)"
                )
            what_if.begin(self.task, self.pre, self.trace[:-1], call)
        try:
            future = self.gate.gate.report_failure(
                self.context, (call.function, argument_view(call.args)), verdict
            )
            if self.wait:
                self.outcome = future.result()
        finally:
            if what_if is not None:
                what_if.end()


__all__: Sequence[str] = (
    "VERIFIER_ID",
    "AgentDojoGate",
    "SecurityMonitor",
    "SecurityWhatIf",
    "argument_view",
    "security_verdict",
    "tool_signature",
)
