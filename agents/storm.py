"""Storm control: temporary masks, a rate-limited bounded synthesis queue, and the hot swap (paper §4.2).

A burst of failures in a short time (e.g. frequent adversarial injections) would pile up MCTS searches — a
"disequilibrium storm". The ``StormController`` keeps the agent safe and the synthesis pipeline stable:

1. **Temporary mask, one shot.** When d_t crosses τ, the offending action gets a temporary mask in the control
   plane *immediately* (``ControlPlane.set_temporary_mask``), so its governed probability is exactly 0 from the next
   decision on, while synthesis runs in the background. A failure signature gets its mask once; a repeat of the
   same signature while it is pending is deduplicated (and counted in ``repeats_while_masked`` — with hard masks and
   the step passed to ``govern`` it cannot happen; the counter makes that checkable). By default the mask is the
   exact offending action in any context (``mask_scope="action"``); ``"action_in_context"`` also requires the
   fragment's causal context values. The mask also lapses after ``temp_mask_ttl`` steps — a safety horizon for a
   synthesis that never returns an admissible scar.
2. **Bounded queue, deduplicated by failure signature.** Each new signature becomes a queue entry. When
   ``max_queue`` entries already wait, the overflow policy applies: ``"merge"`` piggybacks the failure on a waiting
   entry (one with the same mask key (kind, name) if any, else the newest) — its temporary mask stays, and failures
   the eventual scar does not cover are re-queued when that scar is admitted; ``"drop"`` discards it (its temporary
   mask still protects the agent until the TTL). Every merge and drop is counted.
3. **Rate-limited submission.** At most ``max_in_flight`` syntheses run at once, and two submissions are at least
   ``cooldown_steps`` steps apart; ``submit(fragment) -> future`` (anything with ``done()`` and ``result()``, e.g.
   ``synthesis.executors``' handles or ``concurrent.futures.Future``) is the only link to the synthesiser.
4. **Hot swap.** ``poll(step)`` hands finished syntheses to the caller (ReplayPass and the ILP merge decide
   admission). When a scar is admitted to the control plane, ``on_scar_admitted`` lifts exactly the temporary masks
   of the failures that scar covers (checked with ``synthesis.dsl.semantics.fires`` on each recorded (q, a)), in
   the same call, so there is no step at which neither the temporary mask nor the scar is in force.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from agents.runtime.control import ControlPlane
from agents.runtime.ledger import Ledger
from agents.runtime.scar import Scar
from synthesis.dsl.ast import (
    Action,
    And,
    Compare,
    ForbidEnvAction,
    ForbidToolCall,
    Guard,
    Named,
    Rule,
)
from synthesis.dsl.semantics import Classes, fires
from synthesis.errors import ConfigError, ScarsError


class StormControlError(ScarsError, ValueError):
    """A storm-control call got an action or a scar it cannot handle."""


class SynthesisFuture(Protocol):
    def done(self) -> bool: ...

    def result(self, timeout: float | None = None) -> Any: ...


Submit = Callable[[Any], SynthesisFuture]
"""``submit(fragment)`` starts a background synthesis and returns a future-like handle."""


@dataclass(frozen=True, slots=True)
class StormConfig:
    """max_queue: entries waiting for submission (bounded). max_in_flight: syntheses running at once.
    cooldown_steps: minimum steps between two submissions (the rate limit). temp_mask_ttl: steps after which a
    temporary mask lapses if no scar replaced it. overflow: "merge" or "drop" when the queue is full.
    max_failures_per_entry: a cap on failures one entry carries (beyond it, merges become drops).
    mask_scope: "action" (the exact offending action anywhere) or "action_in_context" (also the causal context)."""

    max_queue: int = 8
    max_in_flight: int = 1
    cooldown_steps: int = 5
    temp_mask_ttl: int = 1000
    overflow: Literal["merge", "drop"] = "merge"
    max_failures_per_entry: int = 32
    mask_scope: Literal["action", "action_in_context"] = "action"

    def __post_init__(self) -> None:
        for name in ("max_queue", "max_in_flight", "temp_mask_ttl", "max_failures_per_entry"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be ≥ 1, got {getattr(self, name)}")
        if self.cooldown_steps < 0:
            raise ConfigError(f"cooldown_steps must be ≥ 0, got {self.cooldown_steps}")
        if self.overflow not in ("merge", "drop"):
            raise ConfigError(f"overflow must be 'merge' or 'drop', got {self.overflow!r}")
        if self.mask_scope not in ("action", "action_in_context"):
            raise ConfigError(f"mask_scope must be 'action' or 'action_in_context', got {self.mask_scope!r}")


@dataclass(frozen=True, slots=True)
class FailureRecord:
    """One distinct failure under storm control, with the temporary mask guarding it."""

    signature: Hashable
    context: Mapping[str, Any] = field(hash=False)
    action: Action
    fragment: Any = field(hash=False, compare=False)
    step: int
    mask_id: str
    until_step: int


@dataclass(frozen=True, slots=True)
class StormDecision:
    """What ``on_disequilibrium`` did. outcome: "queued" (new entry), "deduplicated" (signature already pending),
    "merged" (queue full, piggybacked on ``ticket``), "dropped" (queue full, nothing to merge into)."""

    outcome: Literal["queued", "deduplicated", "merged", "dropped"]
    signature: Hashable
    mask_id: str | None
    ticket: int | None
    submitted: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class CompletedSynthesis:
    """A finished background synthesis: ``result`` is what the future returned, ``error`` what it raised."""

    ticket: int
    fragment: Any
    failures: tuple[FailureRecord, ...]
    result: Any
    error: BaseException | None


@dataclass(frozen=True, slots=True)
class StormStats:
    queued: int
    in_flight: int
    awaiting_admission: int
    max_queue_seen: int
    triggers: int
    submitted: int
    deduplicated: int
    merged: int
    dropped: int
    requeued: int
    deferred_by_cooldown: int
    completed: int
    failed: int
    resolved: int
    temp_masks_set: int
    temp_masks_lifted: int
    temp_masks_active: int
    repeats_while_masked: int


@dataclass
class _Entry:
    ticket: int
    failures: list[FailureRecord]
    status: Literal["queued", "in_flight", "awaiting_admission", "failed"] = "queued"
    future: SynthesisFuture | None = None

    @property
    def fragment(self) -> Any:
        return self.failures[0].fragment


def failure_signature(action: Action, fragment: Any = None) -> Hashable:
    """Dedupe key: the offending action's identity plus the fragment's causal context (``fragment.q``) if any."""
    q = getattr(fragment, "q", None) or {}
    return (action.kind, action.name, action.args, tuple(sorted((k, q[k]) for k in q)))


def temporary_mask_rule(action: Action, context: Mapping[str, Any] | None = None) -> Rule:
    """The one-shot mask for an offending control action: its verb/tool and every argument, plus ``context``
    equalities when given (only str/int/float/bool values: those the DSL can compare)."""
    if action.kind == "tool":
        mask, head = ForbidToolCall(action.name), Named("tool_is", action.name)
    elif action.kind == "env":
        mask, head = ForbidEnvAction(action.name), Named("action_is", action.name)
    else:
        raise StormControlError(
            f"only control actions (kind 'env' or 'tool') can be masked, got kind {action.kind!r} ({action.name!r})"
        )
    parts: list[Guard] = [head]
    parts += [Compare(f"action.{k}", "==", v) for k, v in action.args]
    for key in sorted(context or {}):
        value = context[key]  # type: ignore[index]
        if isinstance(value, str | int | float | bool):
            parts.append(Compare(key, "==", value))
    guard: Guard = parts[0] if len(parts) == 1 else And(tuple(parts))
    return Rule(guard, mask)


class StormController:
    """Storm control of one agent (module docstring; paper §4.2)."""

    def __init__(
        self,
        plane: ControlPlane,
        submit: Submit,
        config: StormConfig = StormConfig(),
        *,
        classes: Classes | None = None,
        ledger: Ledger | None = None,
        signature: Callable[[Action, Any], Hashable] = failure_signature,
    ) -> None:
        self.plane = plane
        self.submit = submit
        self.config = config
        self.classes = classes if classes is not None else plane.classes
        self.ledger = ledger
        self.signature = signature
        self._tickets = itertools.count(1)
        self._entries: dict[int, _Entry] = {}  # live entries, in creation order
        self._by_signature: dict[Hashable, int] = {}
        self._last_submit_step: int | None = None
        self._counts = dict.fromkeys(
            (
                "triggers",
                "submitted",
                "deduplicated",
                "merged",
                "dropped",
                "requeued",
                "deferred_by_cooldown",
                "completed",
                "failed",
                "resolved",
                "temp_masks_set",
                "temp_masks_lifted",
                "repeats_while_masked",
            ),
            0,
        )
        self._max_queue_seen = 0
        self._active_masks: dict[str, FailureRecord] = {}
        self._sig_mask: dict[Hashable, str] = {}

    # --------------------------------------------------------------------------------------- triggers
    def on_disequilibrium(
        self, step: int, offending: Action, context: Mapping[str, Any], fragment: Any
    ) -> StormDecision:
        """d_t crossed τ at ``step`` because of ``offending`` in ``context``: mask it now, queue its synthesis."""
        self._counts["triggers"] += 1
        self._expire(step)
        sig = self.signature(offending, fragment)
        ticket = self._by_signature.get(sig)
        mask_id = self._sig_mask.get(sig)
        if ticket is not None or mask_id is not None:
            # One shot: a pending signature keeps its single temporary mask and its single queue entry.
            self._counts["deduplicated"] += 1
            first = self._active_masks[mask_id].step if mask_id is not None else step
            if step > first and self.plane.masked(context, [offending], step=step)[0]:
                # A later step took an action that was masked (a duplicate report of the same step is not).
                self._counts["repeats_while_masked"] += 1
            return StormDecision("deduplicated", sig, mask_id, ticket, self._dispatch(step))

        record = self._mask(step, sig, offending, context, fragment)
        outcome, ticket = self._enqueue(record)
        return StormDecision(outcome, sig, record.mask_id, ticket, self._dispatch(step))

    def _mask(
        self, step: int, sig: Hashable, offending: Action, context: Mapping[str, Any], fragment: Any
    ) -> FailureRecord:
        causal = getattr(fragment, "q", None) if self.config.mask_scope == "action_in_context" else None
        rule = temporary_mask_rule(offending, causal)
        until = step + self.config.temp_mask_ttl
        mask_id = self.plane.set_temporary_mask(rule, until_step=until)
        if self.ledger is not None:
            self.ledger.set_temp_mask(
                rule, until_step=until, mask_id=mask_id, reason="storm control: d_t > tau"
            )
        self._counts["temp_masks_set"] += 1
        record = FailureRecord(sig, dict(context), offending, fragment, step, mask_id, until)
        self._active_masks[mask_id] = record
        self._sig_mask[sig] = mask_id
        return record

    def _queued(self) -> list[_Entry]:
        return [e for e in self._entries.values() if e.status == "queued"]

    def _enqueue(self, record: FailureRecord) -> tuple[Literal["queued", "merged", "dropped"], int | None]:
        queued = self._queued()
        if len(queued) < self.config.max_queue:
            entry = _Entry(next(self._tickets), [record])
            self._entries[entry.ticket] = entry
            self._by_signature[record.signature] = entry.ticket
            self._max_queue_seen = max(self._max_queue_seen, len(queued) + 1)
            return "queued", entry.ticket
        if self.config.overflow == "merge":
            roomy = [e for e in queued if len(e.failures) < self.config.max_failures_per_entry]
            key = (record.action.kind, record.action.name)
            same = [e for e in roomy if (e.failures[0].action.kind, e.failures[0].action.name) == key]
            target = (same or roomy or [None])[-1]
            if target is not None:
                target.failures.append(record)
                self._by_signature[record.signature] = target.ticket
                self._counts["merged"] += 1
                return "merged", target.ticket
        self._counts["dropped"] += 1
        return "dropped", None

    # --------------------------------------------------------------------------------------- the pump
    def _dispatch(self, step: int) -> tuple[int, ...]:
        submitted: list[int] = []
        for entry in self._queued():
            in_flight = sum(e.status == "in_flight" for e in self._entries.values())
            if in_flight >= self.config.max_in_flight:
                break
            if (
                self._last_submit_step is not None
                and step - self._last_submit_step < self.config.cooldown_steps
            ):
                self._counts["deferred_by_cooldown"] += 1
                break
            entry.future = self.submit(entry.fragment)
            entry.status = "in_flight"
            self._last_submit_step = step
            self._counts["submitted"] += 1
            submitted.append(entry.ticket)
        return tuple(submitted)

    def poll(self, step: int) -> tuple[CompletedSynthesis, ...]:
        """Collect finished syntheses (for ReplayPass + ILP merge by the caller), expire lapsed masks, and submit
        waiting entries the rate limit allows."""
        self._expire(step)
        done: list[CompletedSynthesis] = []
        for entry in list(self._entries.values()):
            if entry.status != "in_flight" or entry.future is None or not entry.future.done():
                continue
            try:
                result, error = entry.future.result(0), None
            except Exception as exc:  # a crashed search is reported, its masks keep protecting the agent
                result, error = None, exc
            entry.status = "awaiting_admission" if error is None else "failed"
            self._counts["completed" if error is None else "failed"] += 1
            done.append(
                CompletedSynthesis(entry.ticket, entry.fragment, tuple(entry.failures), result, error)
            )
        self._dispatch(step)
        return tuple(done)

    def on_synthesis_rejected(self, ticket: int) -> None:
        """The caller's ReplayPass / ILP merge refused the candidate: the entry fails; its temporary masks stay
        until their TTL (the failures remain blocked, the queue moves on)."""
        entry = self._entries.get(ticket)
        if entry is None or entry.status not in ("awaiting_admission", "in_flight"):
            raise StormControlError(f"no synthesis awaiting admission with ticket {ticket}")
        entry.status = "failed"
        self._counts["failed"] += 1

    # -------------------------------------------------------------------------------------- hot swap
    def on_scar_admitted(self, scar: Scar | Rule, *, step: int, ticket: int | None = None) -> tuple[str, ...]:
        """Hot swap: lift the temporary masks of every failure the admitted scar covers. Call it right after the
        scar became active in the control plane. ``ticket``: the synthesis that produced the scar, if any — that
        entry is finished, and its failures the scar does not cover (merged piggybacks) are re-queued."""
        if isinstance(scar, Scar):
            if scar.id not in self.plane:
                raise StormControlError(
                    f"scar {scar.id} is not active in the control plane; add it before lifting temporary masks "
                    "(otherwise the covered failures would be unprotected in between)"
                )
            rule, reason = scar.rule, f"hot swap: scar {scar.id} admitted"
        elif isinstance(scar, Rule):
            rule, reason = scar, "hot swap: scar admitted"
        else:
            raise StormControlError(f"on_scar_admitted takes a Scar or a Rule, got {type(scar).__name__}")
        lifted: list[str] = []
        # Every active temporary mask whose failure the scar covers — including failures dropped from a full queue.
        for record in list(self._active_masks.values()):
            if fires(rule, record.context, record.action, self.classes):
                lifted.extend(self._lift(record, reason))
        for entry in list(self._entries.values()):
            covered = [f for f in entry.failures if fires(rule, f.context, f.action, self.classes)]
            for record in covered:
                self._by_signature.pop(record.signature, None)
            entry.failures = [f for f in entry.failures if f not in covered]
            if not entry.failures:
                del self._entries[entry.ticket]
                self._counts["resolved"] += 1
            elif entry.ticket == ticket:
                del self._entries[entry.ticket]
                self._counts["resolved"] += 1
                self._requeue(entry.failures)
        self._dispatch(step)
        return tuple(lifted)

    def _requeue(self, failures: list[FailureRecord]) -> None:
        for i, record in enumerate(failures):
            outcome, ticket = self._enqueue(record)
            self._counts["requeued"] += 1
            if outcome == "dropped":
                self._by_signature.pop(record.signature, None)
            elif outcome == "queued":
                # Keep the rest together with the first one re-queued (one synthesis for the leftovers).
                entry = self._entries[ticket]  # type: ignore[index]
                for other in failures[i + 1 :]:
                    entry.failures.append(other)
                    self._by_signature[other.signature] = entry.ticket
                return

    def _lift(self, record: FailureRecord, reason: str) -> list[str]:
        if self._active_masks.pop(record.mask_id, None) is None:
            return []
        if self._sig_mask.get(record.signature) == record.mask_id:
            del self._sig_mask[record.signature]
        if record.mask_id in self.plane.temporary_mask_ids:  # the caller may have expired it already
            self.plane.lift_temporary_mask(record.mask_id)
        if self.ledger is not None:
            self.ledger.lift_temp_mask(record.mask_id, reason=reason)
        self._counts["temp_masks_lifted"] += 1
        return [record.mask_id]

    def _expire(self, step: int) -> None:
        for record in [r for r in self._active_masks.values() if r.until_step <= step]:
            self._lift(record, "temporary mask TTL elapsed")
            ticket = self._by_signature.get(record.signature)
            entry = self._entries.get(ticket) if ticket is not None else None
            if entry is not None and entry.status == "failed":
                entry.failures = [f for f in entry.failures if f.mask_id != record.mask_id]
                self._by_signature.pop(record.signature, None)
                if not entry.failures:
                    del self._entries[entry.ticket]

    # ------------------------------------------------------------------------------------------ stats
    def stats(self) -> StormStats:
        status = [e.status for e in self._entries.values()]
        return StormStats(
            queued=status.count("queued"),
            in_flight=status.count("in_flight"),
            awaiting_admission=status.count("awaiting_admission"),
            max_queue_seen=self._max_queue_seen,
            temp_masks_active=len(self._active_masks),
            **self._counts,
        )

    def in_flight(self) -> tuple[tuple[int, SynthesisFuture], ...]:
        """(ticket, handle) of every synthesis running now, e.g. to wait on one at the end of an episode."""
        return tuple(
            (e.ticket, e.future)
            for e in self._entries.values()
            if e.status == "in_flight" and e.future is not None
        )

    @property
    def active_temporary_masks(self) -> tuple[str, ...]:
        return tuple(self._active_masks)
