"""A run that stops early, fail closed (issue 41 #4), the same way in every tier.

Another process wrote an agent's ledger (``ForeignWriteError``: the guarantees monitor reads the ledger's head at
every decision, and the store refuses to extend foreign events), so that agent's control plane is no longer the fold
of its ledger. The run stops there: the foreign events are named at once (the error's message), the decision that
saw them is the last one recorded, everything recorded so far is written out, and the summary is marked
``complete: false`` with ``stopped`` (the reason). The console prints ``RUN STOPPED`` and the command exits
``STOPPED_EXIT`` after the files are written. Tier 1 (``experiments.tier1.run_tier1``), tier 2
(``experiments.commons_run.run_tier2``) and tier 3 (``experiments.tier3.run_tier3``) each hold one ``RunStop``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from typing import Any

from scars.agents.api import Agent
from scars.agents.runtime.errors import ForeignWriteError
from scars.experiments.loop import NO_SIGNAL, learn

STOPPED_EXIT = 1
"""The exit code of a command whose run stopped early (its files written); 2 stays the code of bad input."""


class RunStop:
    """Whether (and why) a run stopped: the first ``ForeignWriteError`` it met."""

    def __init__(self) -> None:
        self.error: ForeignWriteError | None = None

    @property
    def stopped(self) -> bool:
        return self.error is not None

    def learn(self, agent: Agent, *feedback: Any, **kw: Any) -> dict[str, Any]:
        """``experiments.loop.learn``; when the agent's ledger refuses the write (another process wrote it during the
        step) the stop is recorded and the step has no signal: the caller records the step's row, then ``check()``."""
        try:
            return learn(agent, *feedback, **kw)
        except ForeignWriteError as exc:
            self.error = self.error or exc
            return dict(NO_SIGNAL)

    def check(self) -> None:
        """Raise the stop (after the step that met it was recorded)."""
        if self.error is not None:
            raise self.error

    @contextmanager
    def until_stopped(self, recorded: Callable[[], bool]) -> Iterator[None]:
        """Run the body; a ``ForeignWriteError`` ends it and is kept as the stop. Raised on when nothing was
        ``recorded()`` yet: there is nothing to write out, so the command fails with its one error line."""
        try:
            yield
        except ForeignWriteError as exc:
            if not recorded():
                raise
            self.error = self.error or exc

    def close(self, agent: Agent) -> None:
        """Close an agent; after a stop, a write its close attempts is refused quietly (its plane is stale, and a
        stopped agent writes nothing more)."""
        if self.error is None:
            agent.close()
            return
        with suppress(ForeignWriteError):
            agent.close()

    def mark(self, summary: dict[str, Any]) -> dict[str, Any]:
        """The summary marked: ``complete`` and the reason it ``stopped`` (one line), or None."""
        summary["complete"] = self.error is None
        summary["stopped"] = None if self.error is None else " ".join(str(self.error).split())
        return summary


def stopped_runs(summaries: Mapping[str, Mapping[str, Any]]) -> list[tuple[str, str]]:
    """(label, why) of every run in ``summaries`` (label → summary) that stopped before its end."""
    return [(label, str(m.get("stopped"))) for label, m in summaries.items() if m.get("complete") is False]


def stopped_notice(label: str, why: str) -> str:
    """The console's line after ``RUN STOPPED``."""
    return f"{label}: {why} — what it recorded until then is written (summary.json: complete false)"
