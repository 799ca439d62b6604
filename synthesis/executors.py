"""Running the synthesis in the background: in process, or root-parallel on Ray (paper §4.2, SPEC §4).

Root parallelism: ``num_trees`` independent MCTS trees search the same derivation space, tree i seeded with the
i-th child of ``SeedSequence(seed).spawn(num_trees)``; their results are merged deterministically (best by
(admissible, objective, canonical text); see :func:`synthesis.mcts.merge_results`). The in-process executor runs the
same trees with the same seeds one after another, so both executors return the same result for the same seed —
only wall times differ.

Both executors are asynchronous: ``submit(...)`` returns a :class:`SynthesisHandle` at once (``done()``,
``result(timeout)``), so the agent keeps acting under its temporary mask while the search runs (paper §4.2 storm
control). The Ray executor never starts Ray itself beyond what ``.remote`` does on first use; a host that wants
particular resources calls ``ray.init`` first.
"""

from __future__ import annotations

import abc
import concurrent.futures
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from scars.synthesis.dsl.ast import Rule
from scars.synthesis.dsl.semantics import Classes
from scars.synthesis.errors import ConfigError, ScarsError
from scars.synthesis.failure import Failure
from scars.synthesis.fragments import SynthesisData
from scars.synthesis.mcts import SearchConfig, SynthesisResult, merge_results, synthesize


class SynthesisTimeout(ScarsError, TimeoutError):
    """``SynthesisHandle.result(timeout)`` ran out of time before every tree finished."""


@dataclass(frozen=True)
class SynthesisRequest:
    """Everything one synthesis needs; shipped once to every worker."""

    data: SynthesisData
    fragment: Failure
    current_rules: tuple[Rule, ...] = ()
    core_rules: tuple[Rule, ...] = ()
    classes: Classes | None = None
    config: SearchConfig = SearchConfig()


def tree_seeds(seed: int | np.random.SeedSequence, num_trees: int) -> list[np.random.SeedSequence]:
    """One independent seed per root-parallel tree (``SeedSequence.spawn``)."""
    root = seed if isinstance(seed, np.random.SeedSequence) else np.random.SeedSequence(seed)
    return root.spawn(num_trees)


def run_tree(request: SynthesisRequest, seed: np.random.SeedSequence) -> SynthesisResult:
    """One tree of the root-parallel search (a pure function of its arguments)."""
    return synthesize(
        request.data,
        request.fragment,
        request.current_rules,
        request.core_rules,
        request.classes,
        request.config,
        seed,
    )


class SynthesisHandle(Protocol):
    """A synthesis in flight."""

    def done(self) -> bool: ...

    def result(self, timeout: float | None = None) -> SynthesisResult: ...


def _check_trees(num_trees: object) -> int:
    if not (isinstance(num_trees, int) and not isinstance(num_trees, bool) and num_trees >= 1):
        raise ConfigError(f"the number of trees/workers must be an int ≥ 1, got {num_trees!r}")
    return num_trees


class _FutureHandle:
    def __init__(self, future: concurrent.futures.Future) -> None:
        self._future = future

    def done(self) -> bool:
        return self._future.done()

    def result(self, timeout: float | None = None) -> SynthesisResult:
        try:
            return self._future.result(timeout)
        except concurrent.futures.TimeoutError:
            raise SynthesisTimeout(f"synthesis not finished after {timeout} s") from None


class _Executor(abc.ABC):
    """What both executors share: build the request once, seed one tree per worker, dispatch."""

    num_trees: int

    def submit(
        self,
        data: SynthesisData,
        fragment: Failure,
        current_rules: Iterable[Rule] = (),
        core_rules: Iterable[Rule] = (),
        classes: Classes | None = None,
        config: SearchConfig | None = None,
        seed: int | np.random.SeedSequence = 0,
    ) -> SynthesisHandle:
        request = SynthesisRequest(
            data, fragment, tuple(current_rules), tuple(core_rules), classes, config or SearchConfig()
        )
        return self._dispatch(request, tree_seeds(seed, self.num_trees))

    @abc.abstractmethod
    def _dispatch(self, request: SynthesisRequest, seeds: list[np.random.SeedSequence]) -> SynthesisHandle:
        """Start one search tree per seed where this executor runs them; return a handle on the merged result."""

    def run(self, *args, **kwargs) -> SynthesisResult:
        """``submit(...).result()``: the blocking form."""
        return self.submit(*args, **kwargs).result()

    @abc.abstractmethod
    def shutdown(self) -> None:
        """Release what the executor holds."""


class InProcessExecutor(_Executor):
    """Runs the root-parallel trees one after another on a background thread of this process.

    Same seed, same result as :class:`RayExecutor` with ``num_workers == num_trees``.
    """

    def __init__(self, num_trees: int = 1) -> None:
        self.num_trees = _check_trees(num_trees)
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="synthesis")

    def _dispatch(self, request: SynthesisRequest, seeds: list[np.random.SeedSequence]) -> SynthesisHandle:
        def work() -> SynthesisResult:
            return merge_results([run_tree(request, s) for s in seeds], request.config.top_k)

        return _FutureHandle(self._pool.submit(work))

    def shutdown(self) -> None:
        self._pool.shutdown(wait=True)


class _RayHandle:
    def __init__(self, refs: list, top_k: int) -> None:
        self._refs = refs
        self._top_k = top_k
        self._result: SynthesisResult | None = None

    def done(self) -> bool:
        import ray

        if self._result is not None:
            return True
        ready, _ = ray.wait(self._refs, num_returns=len(self._refs), timeout=0)
        return len(ready) == len(self._refs)

    def result(self, timeout: float | None = None) -> SynthesisResult:
        import ray

        if self._result is None:
            try:
                results = ray.get(self._refs, timeout=timeout)
            except ray.exceptions.GetTimeoutError:
                raise SynthesisTimeout(f"synthesis not finished after {timeout} s") from None
            self._result = merge_results(results, self._top_k)
        return self._result


class RayExecutor(_Executor):
    """Root-parallel MCTS on Ray: one task per tree, one CPU each, merged deterministically.

    The request (data, fragment, rules) is put in the object store once and shared by every task.
    """

    def __init__(self, num_workers: int = 2) -> None:
        import ray

        self.num_workers = self.num_trees = _check_trees(num_workers)
        self._remote = ray.remote(num_cpus=1, max_retries=0)(run_tree)

    def _dispatch(self, request: SynthesisRequest, seeds: list[np.random.SeedSequence]) -> SynthesisHandle:
        import ray

        shared = ray.put(request)  # in the object store once, shared by every tree's task
        return _RayHandle([self._remote.remote(shared, s) for s in seeds], request.config.top_k)

    def shutdown(self) -> None:
        """Nothing to release: the Ray cluster belongs to whoever started it (the run, a sweep, the user)."""
