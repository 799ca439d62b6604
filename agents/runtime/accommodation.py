"""The background accommodation loop of the gate (issue 18): a reported failure → d_t → synthesis → merge → ledger.

:class:`Accommodator` owns the gate's ``SchemaStore`` on one worker thread (SQLite connections stay on the thread
that made them), so everything that writes — the failure record, the merge's admissions and retirements — runs
there, off the decision path. For each ``report_failure(context, action, verdict)`` it:

1. reads the composite signal d_t (``disequilibrium.DisequilibriumMonitor``: z_V from the verdict through the hybrid
   verifier, z_C from the core schema H on the failed action; a framework has no punishments or utterances here, so
   z_R = z_I = 0);
2. records the failure (``SchemaStore.record_failure``, with d_t and z);
3. when d_t > τ: cuts it to a fragment by counterfactual checks (``synthesis.extract_fragment``) — or, without a
   verifier, by the contrast with the calls the gate allowed and the tool's earlier failures
   (``agents.runtime.evidence``) — builds D_t from the calls the gate allowed since it opened
   (``synthesis.build_dataset``), runs the MCTS synthesis on the in-process executor (without a verifier: the
   contrast's small space scored whole, ``synthesis.mcts.exhaustive_search``), builds the scar (``agents.runtime.equilibration.scar_from_synthesis``) and merges it with S_t
   (``agents.runtime.equilibration.equilibrate``: the OR-Tools merge, written through the store).

The verifier ``verifier(context, action) -> bool`` (True: the call violates) is the framework's; counterfactual
extraction asks it what-if questions. Without one, the reported failures are the only violations known and no what-if
answer is known either: the allowed calls of the failed tool are the counter-evidence, the rule keeps the failure's
arguments none of them had, and it generalises only to what two failures of the tool share
(``agents.runtime.evidence``).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import threading
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scars.agents.runtime.control import ControlPlane
from scars.agents.runtime.evidence import contrast, contrast_fragment
from scars.agents.runtime.ledger import Event, VerifyReport
from scars.agents.runtime.scar import Scar
from scars.agents.runtime.store import SchemaStore
from scars.envs.api import Verdict
from scars.synthesis.dsl import Action, Rule
from scars.synthesis.dsl.semantics import Classes
from scars.synthesis.errors import ConfigError
from scars.synthesis.failure import Failure, FailureSource
from scars.synthesis.fragments import FragmentError, RecordedStep, Verifier, build_dataset, extract_fragment

if TYPE_CHECKING:  # the learner: loaded by the first failure that is accommodated, not by opening a gate
    import numpy as np

    from scars.disequilibrium.composite import DisequilibriumConfig, DisequilibriumMonitor
    from scars.synthesis.executors import InProcessExecutor
    from scars.synthesis.mcts import SearchConfig


EXHAUSTIVE_RULES = 50_000
"""Without a verifier, the contrast's candidate space is scored whole up to this many rules (a few seconds)."""


@dataclass(frozen=True)
class AccommodationConfig:
    """Settings of the accommodation loop.

    signal:  w and τ of d_t (``scars calibrate`` fits them; None: ``DisequilibriumConfig()``); search: the MCTS
    settings (None: ``SearchConfig(num_simulations=200)``); trees: root-parallel trees; history: allowed calls kept
    for D_t; merge_mode: ilp (OR-Tools) or append; seed: the synthesis seeds' root. The defaults are None rather
    than the objects so that making a config (or opening a gate) does not load the learner.
    """

    signal: DisequilibriumConfig | None = None
    search: SearchConfig | None = None
    trees: int = 1
    history: int = 500
    merge_mode: str = "ilp"
    seed: int = 0

    def __post_init__(self) -> None:
        if self.merge_mode not in ("ilp", "append"):
            raise ConfigError(f"merge_mode = {self.merge_mode!r}; expected 'ilp' or 'append'")
        if self.history < 1 or self.trees < 1:
            raise ConfigError(f"history and trees must be >= 1, got {self.history!r}, {self.trees!r}")


@dataclass(frozen=True, slots=True)
class Outcome:
    """What one reported failure led to.

    failure_seq: the ``failure_observed`` event; d / crossed: the signal and whether it crossed τ; rule: the
    synthesised rule's canonical text (None: no synthesis, or none passed ReplayPass); admitted / retired: scar ids
    the merge admitted and dropped; note: why nothing was admitted, when nothing was.
    """

    failure_seq: int
    d: float
    crossed: bool
    rule: str | None = None
    admitted: tuple[str, ...] = ()
    retired: tuple[str, ...] = ()
    note: str = ""


def _key(q: Mapping[str, Any], a: Action) -> tuple:
    return (tuple(sorted((k, type(v).__name__, v) for k, v in q.items())), a.kind, a.name, a.args)


class _Reported:
    """The verifier when the framework has none: exactly the reported (context, call) pairs violate."""

    def __init__(self) -> None:
        self.failed: set[tuple] = set()

    def __call__(self, q: Mapping[str, Any], a: Action) -> bool:
        return _key(q, a) in self.failed


class _Learner:
    """What accommodating a failure needs beyond the store: d_t's monitor, the synthesis executor and settings, the
    seeds (spawned one per synthesis, in order, as when they were made with the gate)."""

    def __init__(self, config: AccommodationConfig, core: tuple[Rule, ...], classes: Classes) -> None:
        import numpy as np

        from scars.disequilibrium.composite import DisequilibriumConfig, DisequilibriumMonitor
        from scars.disequilibrium.verifier import HybridVerifier
        from scars.synthesis.executors import InProcessExecutor
        from scars.synthesis.mcts import SearchConfig

        signal = config.signal if config.signal is not None else DisequilibriumConfig()
        self.monitor: DisequilibriumMonitor = DisequilibriumMonitor(
            signal, verifier=HybridVerifier(), core=core, classes=classes
        )
        self.search: SearchConfig = (
            config.search if config.search is not None else SearchConfig(num_simulations=200)
        )
        self.executor: InProcessExecutor = InProcessExecutor(num_trees=config.trees)
        self.seeds: np.random.SeedSequence = np.random.SeedSequence(config.seed)


class Accommodator:
    """Owner of the gate's schema store and its accommodation worker (module docstring)."""

    def __init__(
        self,
        path: Path,
        *,
        core: tuple[Rule, ...],
        classes: Classes,
        fallback: str,
        key_file: str | Path | None,
        verifier: Verifier | None,
        config: AccommodationConfig,
        name: str,
        anchor: tuple[int, str] | str | None = None,
    ) -> None:
        self.path, self.core, self.classes, self.config, self.name = path, core, classes, config, name
        self.lock = threading.RLock()
        self._worker = concurrent.futures.ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="scars-accommodation"
        )
        try:
            self.store: SchemaStore = self._worker.submit(
                SchemaStore,
                path,
                core=core,
                classes=classes,
                fallback=fallback,
                key_file=key_file,
                anchor=anchor,
            ).result()
        except BaseException:
            self._worker.shutdown(wait=True)
            raise
        self.plane: ControlPlane = self.store.plane
        self.session = self.store.version  # failures of this session are numbered after the ledger's events
        self._reported = _Reported()
        self.verifier: Verifier = verifier if verifier is not None else self._reported
        self._learner: _Learner | None = None
        self._calls: deque[tuple[Mapping[str, Any], Action]] = deque(maxlen=config.history)
        self.history: deque[RecordedStep] = deque(maxlen=config.history)
        self.failures: list[Failure] = []
        self._events: dict[str, Event] = {}
        self._met: dict[str, dict] = {}
        self._n = 0
        self._closed = False

    @property
    def version(self) -> int:
        return self.store.version

    @property
    def learner(self) -> _Learner:
        """The signal, the search and their seeds: built on the worker by the first failure (the learner's modules
        — the disequilibrium monitor, MCTS, the merge — load then, not when the gate opens)."""
        if self._learner is None:
            self._learner = _Learner(self.config, self.core, self.classes)
        return self._learner

    # ---------------------------------------------------------------------------------- the decision path
    def observe_call(self, q: Mapping[str, Any], action: Action) -> None:
        """An allowed call (D_t's raw material): one append, nothing else on the caller's thread."""
        self._calls.append((q, action))

    # ---------------------------------------------------------------------------------- worker commands
    def _run(self, fn, *args: Any, **kwargs: Any):
        if self._closed:
            raise ConfigError("the gate is closed")
        return self._worker.submit(fn, *args, **kwargs)

    def report_failure(
        self, q: Mapping[str, Any], action: Action, verdict: Verdict
    ) -> concurrent.futures.Future:
        return self._run(self._accommodate, q, action, verdict)

    def admit_rule(self, rule: Rule, *, reason: str) -> str:
        def admit() -> str:
            with self.lock:
                return self.store.admit(Scar(rule), reason=reason).subject  # type: ignore[return-value]

        return self._run(admit).result()

    def verify(self) -> VerifyReport:
        return self._run(self.store.ledger.verify).result()

    def anchor(self) -> str:
        return self._run(self.store.anchor).result()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        # at interpreter exit concurrent.futures has already finished the queued work and stopped the worker thread,
        # which owns the ledger's SQLite connection (submit raises): every group is committed (each command commits
        # its own), so the process's exit closes the file and nothing is lost
        with contextlib.suppress(RuntimeError):
            self._worker.submit(self.store.close)
        self._worker.shutdown(wait=True)
        if self._learner is not None:
            self._learner.executor.shutdown()

    # ---------------------------------------------------------------------------------- the loop
    def _drain(self) -> None:
        """Allowed calls since the last accommodation become recorded steps (successes unless the verifier flags)."""
        while self._calls:
            q, a = self._calls.popleft()
            self._n += 1
            step = RecordedStep(q, (a,), (0.0,), 0, bool(self.verifier(q, a)), self.session, self._n)
            self.history.append(step)
            self._meet(step)

    def _meet(self, step: RecordedStep) -> None:
        for k, v in step.context.items():
            self._met.setdefault(k, {})[(type(v).__name__, v)] = v
        for a in step.actions:
            for k, v in a.args:
                self._met.setdefault(k, {})[(type(v).__name__, v)] = v

    def _accommodate(self, q: Mapping[str, Any], action: Action, verdict: Verdict) -> Outcome:
        from scars.agents.runtime.equilibration import equilibrate, owed_failures, scar_from_synthesis
        from scars.disequilibrium.composite import StepRecord
        from scars.synthesis.mcts import candidate_space, exhaustive_search

        learner = self.learner
        reported_only = self._reported is self.verifier
        self._reported.failed.add(
            _key(q, action)
        )  # before the drain: the breach's own allowed call is no success
        self._drain()
        self._n += 1
        reading = learner.monitor.observe(
            StepRecord(
                step=self._n,
                context=q,
                action=action,
                events=({"type": "rule_violation", "rule": verdict.rule_id},),
            )
        )
        source = FailureSource(self.name, self.session, self._n, verdict.verifier_id)
        failure = Failure(q, (action,), verdict.rule_id, source)
        record = RecordedStep(q, (action,), (0.0,), 0, True, self.session, self._n)
        self.history.append(record)
        self._meet(record)
        with self.lock:
            event = self.store.record_failure(
                failure, d_t=reading.d, z=list(reading.z.as_tuple()), message=verdict.message
            )
        self.failures.append(failure)
        self._events[failure.id] = event
        base = Outcome(event.seq, reading.d, reading.crossed)
        if not reading.crossed:
            return base
        evidence = None
        # without a verifier there is nothing to ask: the breach is contrasted with what the gate saw
        if reported_only:
            evidence = contrast(action, self.history, [f.action for f in self.failures[:-1]])
            fragment = contrast_fragment(failure, evidence)
        else:
            try:
                fragment = extract_fragment(
                    record,
                    self.verifier,
                    self.classes,
                    theta=verdict.rule_id,
                    alternatives={k: list(v.values())[-24:] for k, v in self._met.items()},
                    source=source,
                )
            except FragmentError as exc:
                return Outcome(event.seq, reading.d, True, note=f"no fragment: {exc}")
        seed = learner.seeds.spawn(1)[0]
        search = learner.search
        current = tuple(s.rule for s in self.store.scars)
        if evidence is None:
            data = build_dataset(self.history, self.verifier, fragment)
            result = learner.executor.submit(
                data, fragment, current, self.core, self.classes, search, seed=seed
            ).result()
        else:
            # D⁻: the breaches the rule is to cover (the others are their own rules' business); the space is the
            # kept arguments only, small enough to score whole, with a guard long enough to test each of them
            steps = [s for s in self.history if not s.violated or evidence.covers(action, s.chosen_action)]
            data = build_dataset(steps, self.verifier, fragment)
            config = replace(search, max_predicates=min(8, max(search.max_predicates, len(evidence.kept))))
            size = candidate_space(data, fragment, self.classes, config.max_or_values).count_rules(
                config.max_predicates
            )
            if size <= EXHAUSTIVE_RULES:
                result = exhaustive_search(data, fragment, current, self.core, self.classes, config)
            else:  # a tool with many arguments: the search, with a budget of as many rules
                config = replace(config, num_simulations=EXHAUSTIVE_RULES)
                result = learner.executor.submit(
                    data, fragment, current, self.core, self.classes, config, seed=seed
                ).result()
        if not result.admitted or result.rule is None:
            return Outcome(
                event.seq, reading.d, True, note="no candidate passed ReplayPass and the drift budget"
            )
        scar = scar_from_synthesis(
            result,
            fragment,
            classes=self.classes,
            data=data,
            failure_event=event,
            seed=int(seed.generate_state(1)[0]),
            settings={
                "merge_mode": self.config.merge_mode,
                "num_simulations": search.num_simulations,
                "source": self.name,
                "trees": self.config.trees,
                # without a verifier: the contrast with what the gate saw, its kept arguments' space scored whole
                **({} if evidence is None else {"attribution": "contrast"}),
            },
            verifier_id=verdict.verifier_id,
        )
        with self.lock:
            failures = owed_failures(self.failures, [*self.store.scars, scar], self.classes)
            report = equilibrate(
                self.store,
                [scar],
                failures,
                [(s.context, s.actions) for s in self.history],
                self.classes,
                search.weights.lambdas,
                merge_mode=self.config.merge_mode,  # type: ignore[arg-type]
            )
        note = "" if report.admitted else "the merge kept the active set (or the ledger refused the id)"
        return Outcome(event.seq, reading.d, True, result.text, report.admitted, report.retired, note)
