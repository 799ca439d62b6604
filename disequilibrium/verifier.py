"""The hybrid verifier behind z_V = 1 − V_t (paper §3.2, SPEC §3).

Deterministic handlers are ground truth: an environment-raised rule violation, an API error code, a crash. They are
consulted in order and the first that decides short-circuits everything else. Only when none decides is the
optional semantic judge consulted — the paper keeps a (possibly noisy, LLM-based) judge out of the loop wherever a
deterministic signal exists, to avoid hallucinated verdicts and circular dependence on the model being judged.

A step is described by a ``VerifiableStep``: the events the environment or tool layer raised (plain mappings with a
``"type"``), an exception if the step crashed, the agent's text output and its context. When nothing decides, V_t = 1
("no evidence of failure"), reported with source ``"default"``.

The place an LLM judge plugs in is ``SemanticJudge``: any object with ``name`` and ``judge(output, context)``
returning a ``JudgeVerdict`` or ``None`` (abstain). ``KeywordJudge`` is a deterministic, offline implementation
(regular expressions over the output); ``ConsensusJudge`` requires a quorum of judges to agree (the paper's
"multi-agent consensus" double gate).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from scars.envs.api import JudgeVerdict, SemanticJudge
from scars.synthesis.errors import ConfigError

VerdictSource = Literal["deterministic", "semantic", "default"]


@dataclass(frozen=True, slots=True)
class VerifiableStep:
    """What the verifier reads about one step.

    events:    plain mappings the environment / tool layer raised, each with a ``"type"`` key, e.g.
               ``{"type": "rule_violation", "rule": "no_cup_in_sink"}`` or ``{"type": "api_error", "code": 500}``.
    exception: the exception (or its repr) if the step crashed, else ``None``.
    output:    the agent's text output at this step ("" if none).
    context:   the context q the agent acted in.
    """

    events: tuple[Mapping[str, Any], ...] = ()
    exception: BaseException | str | None = None
    output: str = ""
    context: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class VerifierScore:
    """V_t with where it came from. ``handler`` names the handler or judge that decided."""

    passed: bool
    source: VerdictSource
    handler: str
    reason: str = ""

    @property
    def score(self) -> int:
        """V_t ∈ {0, 1}."""
        return 1 if self.passed else 0

    @property
    def z_v(self) -> float:
        """z_V = 1 − V_t."""
        return float(1 - self.score)


_NOTHING_FOUND = VerifierScore(True, "default", "none", "no handler or judge found a failure")
"""V_t = 1 when nothing decided (most steps; a frozen value, shared)."""


class DeterministicHandler(Protocol):
    """Decides a step from hard evidence, or returns ``None`` when it has nothing to say."""

    name: str

    def __call__(self, step: VerifiableStep) -> VerifierScore | None: ...


@dataclass(frozen=True, slots=True)
class RuleViolationHandler:
    """An event whose type is one of ``event_types`` (raised by the environment's rule engine) fails the step."""

    event_types: tuple[str, ...] = ("rule_violation", "violation", "norm_violation")
    name: str = "rule_violation"

    def __call__(self, step: VerifiableStep) -> VerifierScore | None:
        for event in step.events:
            if event.get("type") in self.event_types:
                detail = event.get("rule") or event.get("message") or event.get("type")
                return VerifierScore(False, "deterministic", self.name, f"environment raised {detail}")
        return None


@dataclass(frozen=True, slots=True)
class ApiErrorHandler:
    """An ``api_error`` event fails the step when its code is an error: HTTP-style codes ≥ ``min_error_code``, or
    any non-numeric / non-zero code not listed in ``ok_codes``. A successful call (``{"type": "api_ok"}``) passes."""

    min_error_code: int = 400
    ok_codes: tuple[object, ...] = (0, "ok", "OK", 200, 201, 202, 204)
    name: str = "api_error"

    def __call__(self, step: VerifiableStep) -> VerifierScore | None:
        for event in step.events:
            if event.get("type") != "api_error":
                continue
            code = event.get("code")
            if code in self.ok_codes:
                continue
            if isinstance(code, int) and not isinstance(code, bool) and 0 < code < self.min_error_code:
                continue  # 1xx–3xx: informational / success / redirect
            return VerifierScore(False, "deterministic", self.name, f"API error code {code!r}")
        return None


@dataclass(frozen=True, slots=True)
class CrashHandler:
    """A raised exception or a ``crash``/``exception`` event fails the step."""

    name: str = "crash"

    def __call__(self, step: VerifiableStep) -> VerifierScore | None:
        if step.exception is not None:
            return VerifierScore(False, "deterministic", self.name, f"step raised {step.exception!r}")
        for event in step.events:
            if event.get("type") in ("crash", "exception"):
                return VerifierScore(
                    False, "deterministic", self.name, str(event.get("message", event.get("type")))
                )
        return None


DEFAULT_HANDLERS: tuple[DeterministicHandler, ...] = (
    CrashHandler(),
    RuleViolationHandler(),
    ApiErrorHandler(),
)


@dataclass(frozen=True)
class KeywordJudge:
    """A deterministic semantic judge: the output fails if it matches any of ``fail_patterns`` (case-insensitive
    regular expressions); it passes if it matches any of ``pass_patterns``; otherwise it abstains."""

    fail_patterns: tuple[str, ...]
    pass_patterns: tuple[str, ...] = ()
    name: str = "keyword_judge"

    def __post_init__(self) -> None:
        for pattern in self.fail_patterns + self.pass_patterns:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ConfigError(
                    f"KeywordJudge pattern {pattern!r} is not a valid regular expression: {exc}"
                ) from exc

    def judge(self, output: str, context: Mapping[str, Any]) -> JudgeVerdict | None:
        for pattern in self.fail_patterns:
            if re.search(pattern, output, flags=re.IGNORECASE):
                return JudgeVerdict(False, f"output matches {pattern!r}")
        for pattern in self.pass_patterns:
            if re.search(pattern, output, flags=re.IGNORECASE):
                return JudgeVerdict(True, f"output matches {pattern!r}")
        return None


@dataclass(frozen=True)
class ConsensusJudge:
    """Several judges must agree: fails when at least ``quorum`` judges say fail, passes when at least ``quorum``
    say pass, abstains otherwise (the paper's multi-agent consensus gate for semantic verdicts)."""

    judges: tuple[SemanticJudge, ...]
    quorum: int
    name: str = "consensus"

    def __post_init__(self) -> None:
        if not 1 <= self.quorum <= len(self.judges):
            raise ConfigError(
                f"quorum must be in [1, {len(self.judges)}] (the number of judges), got {self.quorum}"
            )

    def judge(self, output: str, context: Mapping[str, Any]) -> JudgeVerdict | None:
        verdicts = [v for v in (j.judge(output, context) for j in self.judges) if v is not None]
        fails = [v for v in verdicts if not v.passed]
        passes = [v for v in verdicts if v.passed]
        if len(fails) >= self.quorum:
            return JudgeVerdict(False, "; ".join(v.reason for v in fails))
        if len(passes) >= self.quorum:
            return JudgeVerdict(True, "; ".join(v.reason for v in passes))
        return None


class HybridVerifier:
    """V_t from deterministic handlers first (ground truth, short-circuit), then the optional semantic judge
    (consulted only when no handler decided and the step has a text output to judge)."""

    def __init__(
        self,
        handlers: Sequence[
            DeterministicHandler | Callable[[VerifiableStep], VerifierScore | None]
        ] = DEFAULT_HANDLERS,
        judge: SemanticJudge | None = None,
    ) -> None:
        if judge is not None and not isinstance(judge, SemanticJudge):
            raise ConfigError(
                f"judge must implement SemanticJudge (name, judge(output, context)), got {judge!r}"
            )
        self.handlers = tuple(handlers)
        self.judge = judge

    def verify(self, step: VerifiableStep) -> VerifierScore:
        for handler in self.handlers:
            verdict = handler(step)
            if verdict is not None:
                return verdict
        if self.judge is not None and step.output:
            judged = self.judge.judge(step.output, step.context)
            if judged is not None:
                return VerifierScore(judged.passed, "semantic", self.judge.name, judged.reason)
        return _NOTHING_FOUND
