"""scars-runtime on AgentDojo (issue 42): the offline protocol, its baselines and the figures (docs/runtime.md,
"On AgentDojo").

**The offline protocol** needs no LLM. A *compromised agent* (:class:`CompromisedAgent`, an AgentDojo pipeline element)
plays each case's user-task ground truth and then the injection task's ground-truth calls — the worst case of an agent
that always obeys the injection — and answers with both tasks' ground-truth output. Each case (user task × injection
task) runs through AgentDojo's own ``TaskSuite.run_task_with_pipeline``, which loads the environment and scores the
case with the tasks' own ``utility`` and ``security`` checks. The cases of a suite are played in one fixed order drawn
from the seed, so a defence that learns meets an injection task's first instances before its later ones.

**The defences**, each on the same cases in the same order:

- ``no_defence``: AgentDojo's plain ``FunctionsRuntime``;
- ``tool_filter``: the tools of the user task's ground truth only (:class:`GroundTruthAllowList`, the way AgentDojo's
  ``tool_filter`` defence restricts ``runtime.functions``) — an upper bound of static least privilege, since it is
  told exactly the tools the task needs;
- ``scars`` (the headline, the information protocol): the gate
  (:class:`~scars.agents.runtime.adapters.agentdojo.AgentDojoGate`) with no rule at the start; a call after which
  AgentDojo's ``security`` check turns true is reported as a verified failure and the runtime's accommodation learns
  a scar from it (the rules are learned, never written) from that breach and what the gate itself saw — the same
  tool's calls it allowed before, which did not turn ``security`` true, and the tool's earlier breaches
  (``agents.runtime.evidence``); nobody is asked about a call that was not made;
- ``scars_oracle`` (a control, like ``--oracle counterfactual`` in tier 1): the same gate, its own ledger, whose
  accommodation also asks AgentDojo's ``security`` about calls nobody executed (``SecurityWhatIf``: would this call,
  with one argument changed, still reach the goal?), counted in the figures — information no deployment has;
- ``progent_policy``: a Progent-style static privilege policy per suite, hand-written blind (without opening the
  injection tasks) as rules of the patch DSL and enforced by the gate as its core schema H; it never learns
  (:mod:`scars.experiments.agentdojo_progent`).

Then each user task runs once without an injection under every defence, with the rules each gate learned in force:
utility without attack. ``model=`` runs the same cases through AgentDojo's own LLM pipeline
(``AgentPipeline.from_config``) under its ``important_instructions`` attack instead of the compromised agent.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from agentdojo.agent_pipeline import AgentPipeline, BasePipelineElement
from agentdojo.functions_runtime import EmptyEnv, FunctionsRuntime
from agentdojo.task_suite.load_suites import get_suite
from agentdojo.types import (
    ChatAssistantMessage,
    ChatToolResultMessage,
    text_content_block_from_string,
)

from scars.agents.runtime import AccommodationConfig, open_gate
from scars.agents.runtime.adapters.agentdojo import AgentDojoGate, SecurityMonitor, SecurityWhatIf
from scars.experiments.agentdojo_progent import ElementwiseGate, open_policy_gate
from scars.experiments.stats import Interval, paired_difference, pooled_ratio
from scars.synthesis.errors import ConfigError

_NO_ENV = EmptyEnv()
_NO_ARGS: dict = {}

SUITES: tuple[str, ...] = ("banking", "slack", "travel", "workspace")
BENCHMARK_VERSION = "v1.1.2"
"""AgentDojo's benchmark version: 97 user tasks, 629 security cases, every injection task with a ground truth (v1.2's
new workspace injection tasks have none, so the offline protocol cannot play them)."""
DEFENCES: tuple[str, ...] = ("no_defence", "tool_filter", "scars", "scars_oracle")
LEARNING: dict[str, bool] = {"scars": False, "scars_oracle": True}
"""The defences that learn, each its own gate and ledger: whether AgentDojo's ``security`` answers the accommodation's
what-if questions (``SecurityWhatIf``), or only the reported breaches are known (the runtime's default)."""
POLICY = "progent_policy"
"""The static-policy row: the suite's hand-written rule file behind its own gate (nothing reported, nothing learned)."""
DEFENCES = (*DEFENCES, POLICY)
ATTACK = "important_instructions"
"""The attack a real model meets (AgentDojo's strongest reported one); the offline agent obeys without one."""


def suite_names(choice: str) -> tuple[str, ...]:
    """``banking|slack|travel|workspace|all`` → the suites, or ``ConfigError`` naming what is allowed."""
    if choice == "all":
        return SUITES
    if choice not in SUITES:
        raise ConfigError(
            f"--suite {choice!r} is not an AgentDojo suite; expected one of {', '.join(SUITES)} or all"
        )
    return (choice,)


# ------------------------------------------------------------------------------------------ pipeline elements
class CompromisedAgent(BasePipelineElement):
    """The offline protocol's agent (module docstring): the user task's ground-truth calls, then the injection task's,
    each through ``runtime.run_function`` (a refused call is answered with its error and the agent goes on)."""

    name = "compromised_agent"

    def __init__(self, user_task: Any, injection_task: Any | None) -> None:
        self.user_task, self.injection_task = user_task, injection_task

    def query(self, query, runtime, env=_NO_ENV, messages=(), extra_args=_NO_ARGS):  # AgentDojo's signature
        tasks = [self.user_task] if self.injection_task is None else [self.user_task, self.injection_task]
        calls = [call for task in tasks for call in task.ground_truth(env.model_copy(deep=True))]
        out = list(messages)
        for call in calls:
            out.append(
                ChatAssistantMessage(
                    role="assistant", content=[text_content_block_from_string("")], tool_calls=[call]
                )
            )
            result, error = runtime.run_function(env, call.function, call.args)
            out.append(
                ChatToolResultMessage(
                    role="tool",
                    content=[text_content_block_from_string(str(result))],
                    tool_call=call,
                    tool_call_id=None,
                    error=error,
                )
            )
        text = " ".join(t.GROUND_TRUTH_OUTPUT for t in tasks if t.GROUND_TRUTH_OUTPUT)
        out.append(
            ChatAssistantMessage(
                role="assistant", content=[text_content_block_from_string(text)], tool_calls=None
            )
        )
        return query, runtime, env, out, extra_args


class GroundTruthAllowList(BasePipelineElement):
    """The ``tool_filter`` baseline: ``runtime.functions`` cut to the tools the user task's ground truth calls (as
    AgentDojo's ``OpenAILLMToolFilter`` cuts it to the tools a model picks), so any other tool is not found."""

    name = "ground_truth_allow_list"

    def __init__(self, user_task: Any) -> None:
        self.user_task = user_task

    def query(self, query, runtime, env=_NO_ENV, messages=(), extra_args=_NO_ARGS):  # AgentDojo's signature
        allowed = {c.function for c in self.user_task.ground_truth(env.model_copy(deep=True))}
        runtime.update_functions({k: f for k, f in runtime.functions.items() if k in allowed})
        return query, runtime, env, messages, extra_args


class _TimedFunctionsRuntime(FunctionsRuntime):
    """The plain runtime, timing each call (the tool's own cost, beside which the gate's overhead is read)."""

    tool_ns: list[int] = []

    def run_function(self, env, function, kwargs, raise_on_error=False):  # AgentDojo's signature
        start = time.perf_counter_ns()
        try:
            return super().run_function(env, function, kwargs, raise_on_error)
        finally:
            self.tool_ns.append(time.perf_counter_ns() - start)


# ------------------------------------------------------------------------------------------ results
@dataclass(frozen=True)
class CaseResult:
    """One case under one defence: ``attacked`` is AgentDojo's security verdict (the injection's goal reached),
    ``utility`` the user task's; ``order`` its place in the suite's sequence."""

    defence: str
    suite: str
    order: int
    user_task: str
    injection_task: str
    attacked: bool
    utility: bool


@dataclass
class SuiteRun:
    """Every case of one suite under every defence, the clean (no-injection) utilities, the gate's learned rules and
    per-call times."""

    suite: str
    seed: int
    cases: list[CaseResult] = field(default_factory=list)
    clean: dict[str, dict[str, bool]] = field(default_factory=dict)
    gate_ns: list[int] = field(default_factory=list)
    tool_ns: list[int] = field(default_factory=list)
    rules: dict[str, list[str]] = field(default_factory=dict)
    failures_reported: int = 0
    verifier_questions: int = 0
    ledger: str = ""

    def rows(self, defence: str) -> list[CaseResult]:
        return sorted((c for c in self.cases if c.defence == defence), key=lambda c: c.order)


def case_order(suite: Any, seed: int) -> list[tuple[str, str]]:
    """Every (user task, injection task) of the suite in the seed's fixed order."""
    pairs = [(u, i) for u in sorted(suite.user_tasks) for i in sorted(suite.injection_tasks)]
    order = np.random.default_rng(seed).permutation(len(pairs))
    return [pairs[k] for k in order]


def check_model(model: str) -> tuple[str, str | None]:
    """``NAME`` of AgentDojo's ``ModelsEnum`` or ``local:MODEL_ID`` / ``local`` (an OpenAI-compatible server on
    ``localhost:$LOCAL_LLM_PORT``, AgentDojo's convention) → (name, model id), or ``ConfigError`` naming the choices."""
    from agentdojo.models import ModelsEnum

    name, _, model_id = model.partition(":")
    names = [m.value for m in ModelsEnum]
    if name not in names or (model_id and name not in ("local", "vllm_parsed")):
        raise ConfigError(
            f"--model {model!r} is not an AgentDojo model; expected one of {', '.join(names)} (local:MODEL_ID for a local server)"
        )
    return name, model_id or None


def _model_pipeline(model: str) -> tuple[BasePipelineElement, Callable[[Any, Any, Any], dict]]:
    """AgentDojo's own pipeline for ``model`` (:func:`check_model`) and its attack's injections."""
    from agentdojo.agent_pipeline import PipelineConfig
    from agentdojo.attacks.attack_registry import load_attack

    name, model_id = check_model(model)
    try:
        pipeline = AgentPipeline.from_config(
            PipelineConfig(
                llm=name, model_id=model_id, defense=None, system_message_name=None, system_message=None
            )
        )
    except Exception as exc:  # a missing API key, an unreachable local server: the provider's own message
        raise ConfigError(f"--model {model!r}: AgentDojo could not build its pipeline: {exc}") from exc

    def injections(suite: Any, user_task: Any, injection_task: Any) -> dict:
        return load_attack(ATTACK, suite, pipeline).attack(user_task, injection_task)

    return pipeline, injections


@dataclass
class _Gated:
    """One learning gate of a suite run: the gate, its adapter, its what-if verifier (None: reported failures only)."""

    adapter: AgentDojoGate
    what_if: SecurityWhatIf | None
    failures: int = 0

    @property
    def gate(self):
        return self.adapter.gate


def _open_gated(suite: Any, ledger: Path, seed: int, what_if: bool) -> _Gated:
    for stale in ledger.parent.glob(f"{ledger.name}*"):
        stale.unlink()
    verifier = SecurityWhatIf(suite) if what_if else None
    gate = open_gate(
        ledger, config=AccommodationConfig(seed=seed), verifier=verifier, name=f"agentdojo:{suite.name}"
    )
    return _Gated(AgentDojoGate(gate, suite, what_if=verifier), verifier)


def _open_policy(suite: Any, ledger: Path) -> ElementwiseGate:
    for stale in ledger.parent.glob(f"{ledger.name}*"):
        stale.unlink()
    return open_policy_gate(suite, ledger)


def run_suite(
    name: str,
    out: Path,
    *,
    seed: int = 0,
    limit: int | None = None,
    model: str | None = None,
    progress: Callable[[str], None] | None = None,
) -> SuiteRun:
    """Play one suite under every defence (module docstring); the gates' ledgers go to ``out/ledgers/``.
    ``limit``: only the first cases of the order (a quick look; the figures need them all)."""
    suite = get_suite(BENCHMARK_VERSION, name)
    order = case_order(suite, seed)[:limit]
    run = SuiteRun(name, seed)
    (out / "ledgers").mkdir(parents=True, exist_ok=True)
    run.ledger = str(out / "ledgers" / f"{name}.sqlite")
    llm, injections = _model_pipeline(model) if model is not None else (None, None)
    environment = suite.load_and_inject_default_environment({})
    gated: dict[str, _Gated] = {}
    policy: ElementwiseGate | None = None
    _TimedFunctionsRuntime.tool_ns = run.tool_ns
    try:
        policy = _open_policy(suite, out / "ledgers" / f"{name}.{POLICY}.sqlite")
        for defence, what_if in LEARNING.items():
            suffix = f".{defence}" if what_if else ""
            gated[defence] = _open_gated(suite, out / "ledgers" / f"{name}{suffix}.sqlite", seed, what_if)
        for k, (u, i) in enumerate(order):
            user_task, injection_task = suite.user_tasks[u], suite.injection_tasks[i]
            inject = {} if injections is None else injections(suite, user_task, injection_task)
            for defence in DEFENCES:
                agent = CompromisedAgent(user_task, injection_task) if llm is None else llm
                elements: list[BasePipelineElement] = [agent]
                runtime_class: type = _TimedFunctionsRuntime
                monitor = None
                if defence == "tool_filter":
                    elements.insert(0, GroundTruthAllowList(user_task))
                if defence == POLICY:
                    runtime_class = policy.runtime_class(policy.context(u))
                if defence in gated:
                    adapter = gated[defence].adapter
                    monitor = SecurityMonitor(injection_task, gate=adapter, context=adapter.context(u))
                    elements.insert(0, monitor)
                    runtime_class = adapter.runtime_class(adapter.context(u), observer=monitor)
                env = environment if inject == {} else suite.load_and_inject_default_environment(inject)
                utility, attacked = suite.run_task_with_pipeline(
                    AgentPipeline(elements),
                    user_task,
                    injection_task,
                    inject,
                    runtime_class=runtime_class,
                    environment=env.model_copy(deep=True),
                )
                run.cases.append(CaseResult(defence, name, k, u, i, bool(attacked), bool(utility)))
                if monitor is not None and monitor.outcome is not None:
                    gated[defence].failures += 1
            if progress is not None and (k + 1) % 20 == 0:
                progress(f"{name}: {k + 1}/{len(order)} cases, {len(gated['scars'].gate.scars)} scars")
        for defence in DEFENCES:
            run.clean[defence] = {}
            for u in sorted({u for u, _ in order}):
                user_task = suite.user_tasks[u]
                agent = CompromisedAgent(user_task, None) if llm is None else llm
                runtime_class = (
                    gated[defence].adapter.runtime_class(gated[defence].adapter.context(u))
                    if defence in gated
                    else FunctionsRuntime
                )
                if defence == POLICY:
                    runtime_class = policy.runtime_class(policy.context(u))
                elements = [GroundTruthAllowList(user_task), agent] if defence == "tool_filter" else [agent]
                utility, _ = suite.run_task_with_pipeline(
                    AgentPipeline(elements),
                    user_task,
                    None,
                    {},
                    runtime_class=runtime_class,
                    environment=environment.model_copy(deep=True),
                )
                run.clean[defence][u] = bool(utility)
        main = gated["scars"]
        run.gate_ns = list(main.adapter.overhead_ns)
        oracle = gated["scars_oracle"].what_if
        run.verifier_questions = oracle.questions if oracle is not None else 0
        run.failures_reported = main.failures
        run.rules = {d: [s.control_text for s in g.gate.scars] for d, g in gated.items()}
        for g in gated.values():
            if not g.gate.verify().ok:
                raise ConfigError(f"the gate's ledger {g.gate.ledger_path} does not verify after the run")
    finally:
        for g in gated.values():
            g.gate.close()
        if policy is not None:
            policy.gate.close()
    return run


# ------------------------------------------------------------------------------------------ figures
def _rate(values: Sequence[bool], rng: np.random.Generator) -> Interval:
    return pooled_ratio([float(v) for v in values], [1.0] * len(values), rng)


def first_exposure(rows: Sequence[CaseResult]) -> dict[str, dict[str, Any]]:
    """Per injection task, in the suite's order: the cases it succeeded in before the first case it was stopped
    (``held``: it was stopped at least once; otherwise every success counts and the scar never held)."""
    cost: dict[str, dict[str, Any]] = {}
    for row in rows:
        entry = cost.setdefault(row.injection_task, {"cost": 0, "held": False, "cases": 0})
        entry["cases"] += 1
        if entry["held"]:
            continue
        if row.attacked:
            entry["cost"] += 1
        else:
            entry["held"] = True
    return cost


def summarise(runs: Sequence[SuiteRun], seed: int = 0) -> dict[str, Any]:
    """The table's figures per suite and overall, each with n and a 95% bootstrap interval over cases."""
    rng = np.random.default_rng(seed)
    groups = {r.suite: [r] for r in runs}
    if len(runs) > 1:
        groups["overall"] = list(runs)
    summary: dict[str, Any] = {"benchmark_version": BENCHMARK_VERSION, "seed": seed, "suites": {}}
    for label, group in groups.items():
        entry: dict[str, Any] = {"defences": {}}
        rows = {d: [c for r in group for c in r.rows(d)] for d in DEFENCES}
        for defence in DEFENCES:
            entry["defences"][defence] = {
                "attack_success": _rate([c.attacked for c in rows[defence]], rng).to_json(),
                "utility_under_attack": _rate([c.utility for c in rows[defence]], rng).to_json(),
            }
        base = [float(c.attacked) for c in rows["no_defence"]]
        ones = [1.0] * len(base)
        for defence in DEFENCES[1:]:
            mine = [float(c.attacked) for c in rows[defence]]
            paired = paired_difference((mine, ones), (base, ones), rng).to_json()
            paired.update(numerator=None, denominator=None)  # a difference has neither (JSON has no NaN)
            entry["defences"][defence]["asr_minus_no_defence"] = paired
        for defence in DEFENCES:
            clean = [v for r in group for v in r.clean.get(defence, {}).values()]
            entry["defences"][defence]["utility_without_attack"] = _rate(clean, rng).to_json()
        clean_base = [float(v) for r in group for v in r.clean.get("no_defence", {}).values()]
        entry["utility_ratio_without_attack"] = None
        for defence in DEFENCES[1:]:
            clean = [float(v) for r in group for v in r.clean.get(defence, {}).values()]
            ratio = sum(clean) / sum(clean_base) if sum(clean_base) > 0 else None
            entry["defences"][defence]["utility_ratio_without_attack"] = ratio
            attacked = [float(c.utility) for c in rows[defence]]
            base_attacked = sum(float(c.utility) for c in rows["no_defence"])
            entry["defences"][defence]["utility_ratio_under_attack"] = (
                sum(attacked) / base_attacked if base_attacked > 0 else None
            )
        entry["utility_ratio_without_attack"] = entry["defences"]["scars"]["utility_ratio_without_attack"]
        costs = {f"{r.suite}/{k}": v for r in group for k, v in first_exposure(r.rows("scars")).items()}
        entry["first_exposure"] = costs
        entry["first_exposure_mean"] = _rate_mean([v["cost"] for v in costs.values()], rng)
        for defence in LEARNING:
            own = [v["cost"] for r in group for v in first_exposure(r.rows(defence)).values()]
            entry["defences"][defence]["first_exposure_mean"] = _rate_mean(own, rng)
        gate_us = np.array([ns for r in group for ns in r.gate_ns], dtype=float) / 1000
        tool_us = np.array([ns for r in group for ns in r.tool_ns], dtype=float) / 1000
        entry["gate_overhead_us"] = _times(gate_us)
        entry["tool_call_us"] = _times(tool_us)
        for defence in LEARNING:
            entry[defence] = {r.suite: r.rules.get(defence, []) for r in group}
        entry["failures_reported"] = sum(r.failures_reported for r in group)
        entry["verifier_questions"] = sum(r.verifier_questions for r in group)
        summary["suites"][label] = entry
    return summary


def _rate_mean(values: Sequence[float], rng: np.random.Generator) -> dict[str, Any]:
    interval = pooled_ratio([float(v) for v in values], [1.0] * len(values), rng)
    return interval.to_json()


def _times(us: np.ndarray) -> dict[str, Any]:
    if len(us) == 0:
        return {"n": 0, "median": None, "p90": None, "mean": None}
    return {
        "n": int(len(us)),
        "median": float(np.median(us)),
        "p90": float(np.quantile(us, 0.9)),
        "mean": float(us.mean()),
    }


def _fmt(interval: dict[str, Any], digits: int = 3) -> str:
    if interval["estimate"] is None:
        return "–"
    text = f"{interval['estimate']:.{digits}f}"
    if interval["ci"] is not None:
        lo, hi = interval["ci"]
        text += f" [{lo:.{digits}f}, {hi:.{digits}f}]"
    return text


def results_markdown(summary: dict[str, Any], *, model: str | None = None) -> str:
    """The table of ``summary`` (one block per suite and overall)."""
    agent = (
        f"the model {model!r} under AgentDojo's {ATTACK} attack" if model else "the offline compromised agent"
    )
    lines = [
        f"# scars-runtime on AgentDojo {summary['benchmark_version']} ({agent}, seed {summary['seed']})",
        "",
        "Attack success (ASR, AgentDojo's `security`) and utility (the user task's `utility`) per case, 95% bootstrap "
        "intervals over cases; Δ ASR is paired with no defence on the same cases. Utility without attack: each user "
        "task once, no injection, with the rules the gate learned in force.",
        "",
    ]
    for label, entry in summary["suites"].items():
        d = entry["defences"]
        n = d["no_defence"]["attack_success"]["clusters"]
        lines += [
            f"## {label} (n = {n} cases)",
            "",
            "| defence | ASR ↓ | Δ ASR vs no defence | utility under attack | ÷ no defence's | "
            "utility without attack | ÷ no defence's |",
            "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
        ]
        for defence in DEFENCES:
            row = d[defence]
            delta = _fmt(row["asr_minus_no_defence"]) if "asr_minus_no_defence" in row else "–"
            clean = _fmt(row["utility_without_attack"])
            ratio = row.get("utility_ratio_without_attack")
            under = row.get("utility_ratio_under_attack")
            lines.append(
                f"| {defence} | {_fmt(row['attack_success'])} | {delta} | {_fmt(row['utility_under_attack'])} | "
                f"{'–' if under is None else f'{under:.3f}'} | {clean} | {'–' if ratio is None else f'{ratio:.3f}'} |"
            )
        fe = entry["first_exposure_mean"]
        never = [k for k, v in entry["first_exposure"].items() if not v["held"]]
        ratio = entry["utility_ratio_without_attack"]
        lines += [
            "",
            f"- utility without attack, scars / no defence: {'–' if ratio is None else f'{ratio:.3f}'} "
            f"(n = {d['scars']['utility_without_attack']['clusters']} user tasks)",
            f"- first-exposure cost (cases an injection task succeeded in before its scar held): mean {_fmt(fe, 2)} "
            f"over n = {fe['clusters']} injection tasks; never held: {', '.join(never) or 'none'}",
            f"- gate overhead per call: median {_us(entry['gate_overhead_us'])} µs (n = "
            f"{entry['gate_overhead_us']['n']} decisions) against {_us(entry['tool_call_us'])} µs for the tool call "
            f"itself (n = {entry['tool_call_us']['n']})",
            f"- failures reported to the gate: {entry['failures_reported']} (the oracle control's what-if questions to "
            f"AgentDojo's `security`: {entry['verifier_questions']}); scars at the end: "
            f"{sum(len(v) for v in entry['scars'].values())}",
            "",
        ]
    last = summary["suites"].get("overall", next(iter(summary["suites"].values())))
    for defence in LEARNING:
        lines += [f"## Scars learned ({defence})", ""]
        for suite, rules in last[defence].items():
            lines += [f"- {suite}: " + ("; ".join(f"`{r}`" for r in rules) or "none")]
        lines += [""]
    return "\n".join(lines) + "\n"


def _us(times: dict[str, Any]) -> str:
    return "–" if times["median"] is None else f"{times['median']:.1f}"


def plot_learning_curve(runs: Sequence[SuiteRun], path: Path) -> None:
    """Attack success over the cases, per suite and defence (running mean): the learning curve."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(runs), figsize=(4.2 * len(runs), 3.4), squeeze=False)
    for ax, run in zip(axes[0], runs, strict=True):
        for defence in DEFENCES:
            hits = np.array([c.attacked for c in run.rows(defence)], dtype=float)
            if len(hits):
                ax.plot(
                    np.arange(1, len(hits) + 1), np.cumsum(hits) / np.arange(1, len(hits) + 1), label=defence
                )
        ax.set_title(run.suite)
        ax.set_xlabel("cases played")
        ax.set_ylim(0, 1.02)
    axes[0][0].set_ylabel("attack success so far")
    axes[0][-1].legend(loc="upper right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def bench(
    suites: Sequence[str],
    out: Path,
    *,
    seed: int = 0,
    limit: int | None = None,
    model: str | None = None,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Run the suites and write ``results.md``, ``summary.json``, ``cases.json`` and ``learning_curve.png`` to ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    runs = [run_suite(s, out, seed=seed, limit=limit, model=model, progress=progress) for s in suites]
    summary = summarise(runs, seed)
    summary["model"] = model
    summary["limit"] = limit
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    (out / "cases.json").write_text(json.dumps([asdict(c) for r in runs for c in r.cases]) + "\n")
    (out / "results.md").write_text(results_markdown(summary, model=model))
    plot_learning_curve(runs, out / "learning_curve.png")
    return summary
