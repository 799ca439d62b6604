"""The self-schema S_t, event-sourced: the one owner of the audit ledger and the control plane (paper §3.1, §4).

``SchemaStore`` holds a ``Ledger`` and the live ``ControlPlane``. Every change is a typed command —
``record_failure``, ``mask_temporarily``, ``lift_mask``, ``apply_merge``, ``apply_retirement``, ``revoke`` — that
appends its ledger event(s) and passes each appended event through one function, :func:`apply`. So the live plane
is always the fold of the ledger's events: ``replay(ledger.events()) == store.plane`` (``plane_state`` compares
them; a test checks it after every step of a run). No other module writes to either (a lint test checks that too).

Opening verifies the whole hash chain once and fails closed (``SchemaIntegrityError``) when it does not verify —
no silent repair. The store is its ledger's sole writer (``Ledger(sole_writer=True)``): events another process
appends are named by ``foreign_events()`` (one read of the head row) and refused at the next command
(``ForeignWriteError``), since the plane would no longer be their fold. After that the chain is extended incrementally: every group of appends checks the stored tail
against the head inside its transaction (``Ledger.group``); nothing re-reads or re-verifies the chain per
accommodation.

Group commit: each command is one ledger group (a merge's decision, admissions and retirements commit together,
in one SQLite transaction), so when a command returns its events are durable. ``group()`` widens that to a block
of commands — the scars agent makes each step one group — committed when the block exits; a kill inside the block
loses the block's events and the live plane with them (the process is gone), never part of an event.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scars.agents.runtime.control import ControlPlane, Mode
from scars.agents.runtime.errors import SchemaIntegrityError
from scars.agents.runtime.events import FAILURE_OBSERVED, MERGE_DECISION, Event
from scars.agents.runtime.ledger import Ledger
from scars.agents.runtime.projection import apply, plane_state, replay
from scars.agents.runtime.scar import Scar
from scars.synthesis.dsl import Rule
from scars.synthesis.dsl.semantics import Classes
from scars.synthesis.failure import Failure

if TYPE_CHECKING:  # annotations only: the merge model loads when a merge runs, not with the gate
    from scars.synthesis.merge import MergeResult
    from scars.synthesis.retirement import RetirementDecision

__all__ = ["SchemaIntegrityError", "SchemaStore", "apply", "plane_state", "replay"]


class SchemaStore:
    """S_t and its audit trail (module docstring). Use as a context manager or ``close()``.

    Args:
        path:      the ledger file (created if absent; an existing one must verify).
        core:      the read-only core schema H.
        classes, mode, soft_bias, fallback: the control plane's settings (``ControlPlane``).
        key_file:  the ledger's HMAC key (``Ledger``; default ``$SCARS_LEDGER_KEY_FILE``, else ``PATH.key``).
        anchor:    ``COUNT:HASH`` (or ``(count, hash)``) recorded earlier and kept elsewhere: the ledger must extend
                   it, at opening and at every later verification — the one check that catches a roll-back of
                   every file to an earlier genuine copy.
    """

    def __init__(
        self,
        path: str | Path,
        *,
        core: Sequence[Rule] = (),
        classes: Classes | None = None,
        mode: Mode = "hard",
        soft_bias: float = -5.0,
        fallback: str = "safe_refusal",
        key_file: str | Path | None = None,
        anchor: tuple[int, str] | str | None = None,
    ) -> None:
        self.path = Path(path).absolute()
        self.ledger = Ledger(self.path, key_file=key_file, anchor=anchor, sole_writer=True)
        report = self.ledger.verify()
        if not report.ok:
            self.ledger.close()
            raise SchemaIntegrityError(
                f"{self.path}: the ledger fails verification at event {report.first_bad_seq} ({report.reason}); "
                "refusing to load its self-schema (fail closed — restore the file or start from a new ledger)"
            )
        self._plane_kwargs: dict[str, Any] = dict(
            core=tuple(core), classes=classes, mode=mode, soft_bias=soft_bias, fallback=fallback
        )
        self._plane = replay(self.ledger.events(), **self._plane_kwargs)
        self._appended = report.count  # events in the ledger: read once, then counted as the store appends

    # ---------------------------------------------------------------------------------------------- reads
    @property
    def plane(self) -> ControlPlane:
        """The live control plane (read it; change it only through this store's commands)."""
        return self._plane

    @property
    def scars(self) -> tuple[Scar, ...]:
        """S_t: the active scars, in admission order."""
        return self._plane.scars

    @property
    def version(self) -> int:
        """The sequence number of the last event this store has committed (it changes exactly when the schema's
        record does, once the group that changed it is durable): readers poll it instead of querying the ledger.
        A decision logged with this version names events that are on disk."""
        return min(self._appended, self.ledger.committed)

    def foreign_events(self) -> tuple[Event, ...]:
        """Events another process wrote into this store's ledger since its last commit — the plane is then no longer
        their fold. One read of the head row when there are none (a monitor calls it at every decision); the next
        command refuses to extend them (``ForeignWriteError``)."""
        return self.ledger.foreign_events()

    def may_admit(self, scar: Scar) -> tuple[bool, str]:
        """The ledger's no-resurrection check for a candidate (``Ledger.may_admit``)."""
        return self.ledger.may_admit(scar)

    def consistent(self) -> bool:
        """Does the live plane equal the fold of the ledger's events? (Reads the whole ledger: for tests/audits.)"""
        return plane_state(replay(self.ledger.events(), **self._plane_kwargs)) == plane_state(self._plane)

    def verify(self) -> bool:
        return self.ledger.verify().ok

    def head(self) -> tuple[int, str]:
        return self.ledger.head()

    def anchor(self) -> str:
        """The head as ``COUNT:HASH`` (what a run records in ``summary.json`` as ``ledger_head``; ``scars ledger
        verify --anchor`` checks a ledger against it later)."""
        return self.ledger.anchor_text()

    # ------------------------------------------------------------------------------------------- commands
    def group(self) -> AbstractContextManager[None]:
        """Group commit (``Ledger.group``): every command inside the block writes into one ledger transaction,
        committed when the outermost block exits (also when it raises: each event appended was applied to the
        live plane, so it is kept). ``verify``/``head``/``anchor`` inside the block commit what is pending first.
        If the commit fails, the ledger refuses further appends through this store (its plane is then ahead of
        the ledger) and the error propagates. (The ledger's own block, not a wrapper around it: one context
        manager per step of an agent that observes inside a group.)"""
        return self.ledger.group()

    def _applied(self, event: Event) -> Event:
        apply(self._plane, event)
        self._appended = event.seq
        return event

    def record_failure(self, failure: Failure, **extra: Any) -> Event:
        """``failure_observed``: a verified failure as the agent saw it (``extra``: e.g. the reading d_t)."""
        return self._applied(
            self.ledger.record(FAILURE_OBSERVED, {**failure.to_json(), **extra}, subject=None)
        )

    def mask_temporarily(self, mask_id: str, rule: Rule, *, until_step: int, reason: str) -> Event:
        """Storm control (§4.2): mask ``rule`` at once, until ``until_step``."""
        return self._applied(
            self.ledger.set_temp_mask(rule, until_step=until_step, mask_id=mask_id, reason=reason)
        )

    def lift_mask(self, mask_id: str, *, reason: str) -> Event | None:
        """Hot swap or TTL: lift a temporary mask (None if it is not set)."""
        if mask_id not in self._plane.temporary_mask_ids:
            return None
        return self._applied(self.ledger.lift_temp_mask(mask_id, reason=reason))

    def apply_merge(
        self, result: MergeResult, new: Mapping[str, Scar], *, refused: Sequence[str] = ()
    ) -> tuple[Event, ...]:
        """S_{t+1} = ILP-Merge(S_t ∪ {ΔS*}) written down: one ``merge_decision``, then ``scar_admitted`` for each
        new scar the merge keeps and ``scar_retired`` for each incumbent it drops (one group: committed together)."""
        with self.group():
            return self._apply_merge(result, new, refused)

    def _apply_merge(
        self, result: MergeResult, new: Mapping[str, Scar], refused: Sequence[str]
    ) -> tuple[Event, ...]:
        decision = self._applied(
            self.ledger.record(
                MERGE_DECISION,
                {
                    "mode": result.mode,
                    "candidates": sorted({*(s.id for s in self.scars), *new}),
                    "active": sorted(result.active),
                    "retired": sorted(result.retired),
                    "rejected": sorted(result.rejected),
                    "refused_resurrection": sorted(refused),
                    "objective": result.objective,
                    "optimal": result.optimal,
                    "solver": result.solver,
                    "wall_seconds": result.wall_seconds,
                    "uncovered": sorted(result.uncovered),
                },
            )
        )
        events = [decision]
        for sid in sorted(set(new) & set(result.active)):
            if sid not in self._plane:
                reason = f"ILP merge admitted it (merge_decision seq {decision.seq})"
                events.append(self._applied(self.ledger.admit(new[sid], reason=reason)))
        for sid in sorted(result.retired):
            if sid in self._plane:
                reason = f"ILP merge dropped it from the active set (merge_decision seq {decision.seq})"
                events.append(self._applied(self.ledger.retire(sid, reason)))
        return tuple(events)

    def apply_retirement(self, decision: RetirementDecision) -> tuple[Event, ...]:
        """Scope pruning and revocation (§4.5): ``scar_retired`` for scope, ``scar_revoked`` with the
        counter-evidence. Nothing is deleted: a retired scar's evidence stays in its ``scar_admitted`` event. One
        group: committed together."""
        with self.group():
            return self._apply_retirement(decision)

    def _apply_retirement(self, decision: RetirementDecision) -> tuple[Event, ...]:
        events = []
        for item in decision.retire:
            if item.scar_id in self._plane:
                events.append(
                    self._applied(self.ledger.retire(item.scar_id, f"scope ({item.kind}): {item.reason}"))
                )
        for item in decision.revoke:
            if item.scar_id in self._plane:
                evidence = [s.to_json() for s in item.counter_evidence]
                events.append(self._applied(self.ledger.revoke(item.scar_id, evidence, reason=item.reason)))
        return tuple(events)

    def revoke(self, scar_id: str, counter_evidence: Sequence[Mapping[str, Any]], *, reason: str) -> Event:
        """Revoke an active scar by hand (``scars ledger revoke``), with the counter-evidence that refutes it."""
        return self._applied(self.ledger.revoke(scar_id, counter_evidence, reason=reason))

    def admit(self, scar: Scar, *, reason: str) -> Event:
        """Admit a scar by hand (``scars ledger admit``: a human operator, outside any merge)."""
        return self._applied(self.ledger.admit(scar, reason=reason))

    def retire(self, scar_id: str, *, reason: str) -> Event:
        """Retire an active scar by hand (``scars ledger retire``); its evidence stays in the ledger."""
        return self._applied(self.ledger.retire(scar_id, reason))

    def close(self) -> None:
        self.ledger.close()

    def __enter__(self) -> SchemaStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
