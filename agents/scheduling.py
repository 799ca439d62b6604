"""Synthesis scheduling: a synthesis submitted at one decision is collected a fixed number of decisions later.

The scars agent keeps acting while a synthesis runs in the background (an in-process thread or Ray workers); its
result is collected exactly ``latency_steps`` decisions after submission, waiting for the search if it is slower,
so a run is reproducible however fast the machine is (the temporary mask protects the agent meanwhile). The
scheduler owns the executor, the run's seed sequence (one child per submission, in submission order), the wall
time the loop spent waiting at a collection step, and the log of the syntheses collected.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import numpy as np

from scars.synthesis import InProcessExecutor, SearchConfig, SynthesisResult
from scars.synthesis.dsl import Rule
from scars.synthesis.dsl.semantics import Classes
from scars.synthesis.executors import SynthesisHandle
from scars.synthesis.failure import Failure
from scars.synthesis.fragments import SynthesisData

if TYPE_CHECKING:
    from scars.synthesis import RayExecutor


class Waited:
    """Seconds the decision loop spent blocked on synthesis results (the searches' share of the critical path)."""

    def __init__(self) -> None:
        self.seconds = 0.0


class Done:
    """An already-finished synthesis (the direct, search-free proposal; or none at all)."""

    def __init__(self, result: SynthesisResult | None):
        self._result = result

    def done(self) -> bool:
        return True

    def result(self, timeout: float | None = None) -> SynthesisResult | None:
        return self._result


class AtStep:
    """A background synthesis whose result is collected at a fixed step (reproducible asynchrony); it keeps its
    seed and data set for the scar's provenance and confidence."""

    def __init__(
        self,
        handle: SynthesisHandle | Done,
        ready_at: int,
        clock: Callable[[], int],
        seed: np.random.SeedSequence,
        data: SynthesisData | None,
        waited: Waited,
    ):
        self.handle, self.ready_at, self.clock = handle, ready_at, clock
        self.seed, self.data, self.waited = seed, data, waited

    def done(self) -> bool:
        return self.clock() >= self.ready_at

    def result(self, timeout: float | None = None) -> SynthesisResult | None:
        if self.handle.done():
            return self.handle.result(None)
        started = time.perf_counter()
        try:
            return self.handle.result(
                None
            )  # collected at its step: wait for the search however long it takes
        finally:
            self.waited.seconds += time.perf_counter() - started


class SynthesisScheduler:
    """Submission of syntheses and their collection ``latency_steps`` decisions later (``clock``: the agent's t)."""

    def __init__(
        self, *, executor: str, workers: int, latency_steps: int, seed: int, clock: Callable[[], int]
    ) -> None:
        self.executor = ray_executor(workers) if executor == "ray" else InProcessExecutor(num_trees=workers)
        self.latency_steps = latency_steps
        self.clock = clock
        self.seeds = np.random.SeedSequence(seed)
        # wall time the loop spent blocked on a synthesis result at its collection step, and since when it runs
        self.waited = Waited()
        self._started = time.perf_counter()
        self.log: list[dict[str, Any]] = []

    def seed(self) -> np.random.SeedSequence:
        """The next submission's seed (one child of the run's seed sequence per submission)."""
        return self.seeds.spawn(1)[0]

    def finished(
        self, result: SynthesisResult | None, seed: np.random.SeedSequence, data: SynthesisData | None = None
    ) -> AtStep:
        """A result already in hand (a direct proposal, or None: nothing synthesised), collected at the same step a
        search's would be."""
        return self._at_step(Done(result), seed, data)

    def submit(
        self,
        data: SynthesisData,
        fragment: Failure,
        current: Iterable[Rule],
        core: Iterable[Rule],
        classes: Classes | None,
        search: SearchConfig,
        *,
        seed: np.random.SeedSequence,
    ) -> AtStep:
        """A search started on the executor now, collected ``latency_steps`` decisions from now."""
        handle = self.executor.submit(data, fragment, current, core, classes, search, seed=seed)
        return self._at_step(handle, seed, data)

    def _at_step(
        self, handle: SynthesisHandle | Done, seed: np.random.SeedSequence, data: SynthesisData | None
    ) -> AtStep:
        return AtStep(handle, self.clock() + self.latency_steps, self.clock, seed, data, self.waited)

    def collected(
        self, t: int, ticket: int, error: BaseException | None, result: SynthesisResult | None, kind: str
    ) -> None:
        """One collected synthesis, logged (``kind``: a new failure's or narrowing's)."""
        self.log.append(
            {
                "t": t,
                "ticket": ticket,
                "error": repr(error) if error else None,
                "admitted": bool(result and result.admitted),
                "rule": result.text if result else None,
                "nodes": result.nodes_expanded if result else 0,
                "seconds": result.wall_seconds if result else 0.0,
                "kind": kind,
            }
        )

    def stats(self, merges: list[dict[str, Any]]) -> dict[str, Any]:
        """The syntheses' counts, medians and waiting share (``merges``: the merge log, for consolidation times)."""
        synth = [e for e in self.log if e["error"] is None]
        seconds = [e["seconds"] for e in synth]
        nodes = [e["nodes"] for e in synth]
        return {
            "syntheses": len(self.log),
            "syntheses_admitted": sum(e["admitted"] for e in self.log),
            "synthesis_median_seconds": float(np.median(seconds)) if seconds else None,
            "synthesis_median_nodes": float(np.median(nodes)) if nodes else None,
            # the searches by kind (a new failure's, narrowing's re-synthesis) and the consolidation search of each
            # merge; and the share of the agent's wall time the loop waited for a result at its collection step
            "synthesis_median_seconds_by_kind": medians_by_kind(synth, merges),
            "synthesis_wait_seconds": self.waited.seconds,
            "synthesis_wait_share": self.waited.seconds / max(time.perf_counter() - self._started, 1e-9),
        }

    def shutdown(self) -> None:
        self.executor.shutdown()


def medians_by_kind(synth: list[dict[str, Any]], merges: list[dict[str, Any]]) -> dict[str, float | None]:
    """Median wall seconds of the new-failure and narrowing searches, and of the merges' consolidation searches."""
    by_kind: dict[str, list[float]] = {"failure": [], "narrowing": [], "consolidation": []}
    for e in synth:
        by_kind[e["kind"]].append(e["seconds"])
    by_kind["consolidation"] = [m["consolidation_seconds"] for m in merges]
    return {k: float(np.median(v)) if v else None for k, v in by_kind.items()}


def ray_executor(workers: int) -> RayExecutor:
    from scars.synthesis import RayExecutor  # Ray loads only when a run asks for it

    return RayExecutor(num_workers=workers)
