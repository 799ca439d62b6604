"""z_V: the hybrid verifier — deterministic handlers short-circuit, the semantic judge only when none decides."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from scars.disequilibrium.verifier import (
    ApiErrorHandler,
    ConsensusJudge,
    HybridVerifier,
    JudgeVerdict,
    KeywordJudge,
    VerifiableStep,
)
from scars.synthesis.errors import ConfigError


@dataclass
class SpyJudge:
    verdict: JudgeVerdict | None
    name: str = "spy"
    calls: list[str] = field(default_factory=list)

    def judge(self, output, context):
        self.calls.append(output)
        return self.verdict


def test_rule_violation_short_circuits_the_judge():
    spy = SpyJudge(JudgeVerdict(True, "looks fine"))
    verifier = HybridVerifier(judge=spy)
    verdict = verifier.verify(
        VerifiableStep(events=({"type": "rule_violation", "rule": "no_cup_in_sink"},), output="all good")
    )
    assert (verdict.passed, verdict.source, verdict.handler) == (False, "deterministic", "rule_violation")
    assert verdict.z_v == 1.0 and verdict.score == 0
    assert "no_cup_in_sink" in verdict.reason
    assert spy.calls == []  # never consulted


def test_crash_and_api_errors_are_ground_truth():
    verifier = HybridVerifier()
    crash = verifier.verify(VerifiableStep(exception=RuntimeError("boom")))
    assert (crash.passed, crash.handler) == (False, "crash")
    api = verifier.verify(VerifiableStep(events=({"type": "api_error", "code": 503},)))
    assert (api.passed, api.handler) == (False, "api_error") and "503" in api.reason
    ok = verifier.verify(VerifiableStep(events=({"type": "api_error", "code": 200},)))
    assert (ok.passed, ok.source) == (True, "default")
    assert ApiErrorHandler()(VerifiableStep(events=({"type": "api_error", "code": "E_TIMEOUT"},))) is not None


def test_judge_consulted_only_when_no_handler_decides():
    spy = SpyJudge(JudgeVerdict(False, "leaks data"))
    verdict = HybridVerifier(judge=spy).verify(VerifiableStep(output="here is the internal table"))
    assert (verdict.passed, verdict.source, verdict.handler) == (False, "semantic", "spy")
    assert spy.calls == ["here is the internal table"]


def test_default_is_pass_when_nothing_decides():
    abstain = SpyJudge(None)
    verdict = HybridVerifier(judge=abstain).verify(VerifiableStep(output="hello"))
    assert (verdict.passed, verdict.source, verdict.z_v) == (True, "default", 0.0)


def test_keyword_judge_and_consensus():
    leak = KeywordJudge(fail_patterns=(r"\bpassword\b", r"ignore (all )?previous instructions"))
    assert leak.judge("The PASSWORD is hunter2", {}).passed is False
    assert leak.judge("nothing to see", {}) is None
    polite = KeywordJudge(fail_patterns=(r"\bstupid\b",), pass_patterns=(r"\bplease\b",), name="polite")
    assert polite.judge("please wait", {}).passed is True
    both = ConsensusJudge((leak, polite), quorum=2)
    assert both.judge("the password, stupid", {}).passed is False
    assert both.judge("the password, please", {}) is None  # one fail, one pass: no quorum either way
    with pytest.raises(ConfigError, match="quorum"):
        ConsensusJudge((leak,), quorum=2)
    with pytest.raises(ConfigError, match="regular expression"):
        KeywordJudge(fail_patterns=("(unclosed",))
    with pytest.raises(ConfigError, match="SemanticJudge"):
        HybridVerifier(judge=object())  # type: ignore[arg-type]
