"""Storm control: temporary masks, a rate-limited bounded synthesis queue, and the hot swap (paper §4.2).

A burst of failures in a short time (e.g. frequent adversarial injections) would pile up MCTS searches — a
"disequilibrium storm". The ``StormController`` keeps the agent safe and the synthesis pipeline stable:

Storm control is pure bookkeeping: it decides and returns requests (``StormRequests``: temporary masks to set and
to lift, syntheses to start); the agent carries them out through the schema store and the executor, and reports
back (``started``, ``on_synthesis_rejected``, ``on_scar_admitted``). It never calls into the agent, the control
plane or the ledger.

1. **Temporary mask, one shot.** When d_t crosses τ, the offending action gets a temporary mask *immediately* (a
   ``SetMask`` request), so its governed probability is exactly 0 from the next decision on, while synthesis runs
   in the background. A failure signature gets its mask once; a repeat of the
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
   ``cooldown_steps`` steps apart; a ``Submit`` request names the failure to synthesise from, and the caller hands
   back the running search's handle (anything with ``done()`` and ``result()``) with ``started``.
4. **Hot swap.** ``poll(step)`` hands finished syntheses to the caller (ReplayPass and the ILP merge decide
   admission). When a scar has been admitted, ``on_scar_admitted`` returns the lifts of exactly the temporary masks
   of the failures that scar covers (checked with ``synthesis.dsl.semantics.fires`` on each recorded (q, a)); the
   caller applies them right after the admission, so there is no step at which neither is in force.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal, Protocol

from scars.agents.runtime.control import TEMP_PREFIX
from scars.agents.runtime.scar import scar_id_of
from scars.synthesis.dsl.ast import (
    Action,
    And,
    Compare,
    ForbidEnvAction,
    ForbidToolCall,
    Guard,
    Named,
    Rule,
)
from scars.synthesis.dsl.semantics import Classes, fires
from scars.synthesis.errors import ConfigError, ScarsError
from scars.synthesis.failure import Failure


class StormControlError(ScarsError, ValueError):
    """A storm-control call got an action or a ticket it cannot handle."""


class SynthesisFuture(Protocol):
    def done(self) -> bool: ...

    def result(self, timeout: float | None = None) -> Any: ...


@dataclass(frozen=True, slots=True)
class StormConfig:
    """max_queue: entries waiting for submission (bounded). max_in_flight: syntheses running at once.
    cooldown_steps: minimum steps between two submissions (the rate limit). temp_mask_ttl: steps after which a
    temporary mask lapses if no scar replaced it. overflow: "merge" or "drop" when the queue is full.
    max_failures_per_entry: a cap on failures one entry carries (beyond it, merges become drops).
    mask_scope: "action" (the exact offending action anywhere) or "action_in_context" (also the causal context).
    rejected_mask_ttl: when the synthesis of a failure is rejected (no admissible rule), its temporary mask lapses
    at most this many steps later (a mask is a stopgap, not a rule)."""

    max_queue: int = 8
    max_in_flight: int = 1
    cooldown_steps: int = 5
    temp_mask_ttl: int = 1000
    overflow: Literal["merge", "drop"] = "merge"
    max_failures_per_entry: int = 32
    mask_scope: Literal["action", "action_in_context"] = "action"
    rejected_mask_ttl: int = 50

    def __post_init__(self) -> None:
        for name in (
            "max_queue",
            "max_in_flight",
            "temp_mask_ttl",
            "max_failures_per_entry",
            "rejected_mask_ttl",
        ):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be ≥ 1, got {getattr(self, name)}")
        if self.cooldown_steps < 0:
            raise ConfigError(f"cooldown_steps must be ≥ 0, got {self.cooldown_steps}")
        if self.overflow not in ("merge", "drop"):
            raise ConfigError(f"overflow must be 'merge' or 'drop', got {self.overflow!r}")
        if self.mask_scope not in ("action", "action_in_context"):
            raise ConfigError(f"mask_scope must be 'action' or 'action_in_context', got {self.mask_scope!r}")


# ----------------------------------------------------------------------------------------------- requests
@dataclass(frozen=True, slots=True)
class SetMask:
    """Set temporary mask ``mask_id`` = ``rule`` until ``until_step``."""

    mask_id: str
    rule: Rule
    until_step: int
    reason: str


@dataclass(frozen=True, slots=True)
class LiftMask:
    """Lift temporary mask ``mask_id``."""

    mask_id: str
    reason: str


@dataclass(frozen=True, slots=True)
class Submit:
    """Start a synthesis for ``failure`` and report its handle with ``StormController.started(ticket, handle)``."""

    ticket: int
    failure: Failure


@dataclass(frozen=True, slots=True)
class StormRequests:
    """What storm control asks its caller to do, in this order: set masks, lift masks, start syntheses."""

    masks: tuple[SetMask, ...] = ()
    lifts: tuple[LiftMask, ...] = ()
    submits: tuple[Submit, ...] = ()

    def __add__(self, other: StormRequests) -> StormRequests:
        return StormRequests(self.masks + other.masks, self.lifts + other.lifts, self.submits + other.submits)

    def __bool__(self) -> bool:
        return bool(self.masks or self.lifts or self.submits)


_NO_REQUESTS = StormRequests()


@dataclass(frozen=True, slots=True)
class PendingFailure:
    """A failure under storm control: the ``Failure``, the full context it happened in, its temporary mask."""

    signature: Hashable
    failure: Failure
    context: Mapping[str, Any] = field(hash=False)
    step: int
    mask_id: str
    mask_rule: Rule
    until_step: int

    @property
    def action(self) -> Action:
        return self.failure.action


@dataclass(frozen=True, slots=True)
class StormDecision:
    """What ``on_disequilibrium`` did. outcome: "queued" (new entry), "deduplicated" (signature already pending),
    "merged" (queue full, piggybacked on ``ticket``), "dropped" (queue full, nothing to merge into)."""

    outcome: Literal["queued", "deduplicated", "merged", "dropped"]
    signature: Hashable
    mask_id: str | None
    ticket: int | None
    requests: StormRequests


@dataclass(frozen=True, slots=True)
class CompletedSynthesis:
    """A finished background synthesis: ``result`` is what the future returned, ``error`` what it raised;
    ``future`` is the handle the caller passed to ``started``."""

    ticket: int
    failure: Failure
    pending: tuple[PendingFailure, ...]
    result: Any
    error: BaseException | None
    future: SynthesisFuture | None = None


@dataclass(frozen=True, slots=True)
class StormStats:
    queued: int
    in_flight: int
    awaiting_admission: int
    max_queue_seen: int
    triggers: int
    resyntheses: int
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
    failures: list[PendingFailure]
    status: Literal["queued", "submitting", "in_flight", "awaiting_admission", "failed"] = "queued"
    future: SynthesisFuture | None = None

    @property
    def failure(self) -> Failure:
        return self.failures[0].failure


def failure_signature(failure: Failure) -> Hashable:
    """Dedupe key: the offending action's identity plus the failure's (causal) context."""
    a, q = failure.action, failure.q
    return (a.kind, a.name, a.args, tuple(sorted((k, q[k]) for k in q)))


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
        config: StormConfig = StormConfig(),
        *,
        classes: Classes | None = None,
        signature: Callable[[Failure], Hashable] = failure_signature,
    ) -> None:
        self.config = config
        self.classes = classes
        self.signature = signature
        self._tickets = itertools.count(1)
        self._mask_numbers = itertools.count(1)
        self._resynthesis_numbers = itertools.count(1)
        self._entries: dict[int, _Entry] = {}  # live entries, in creation order
        self._by_signature: dict[Hashable, int] = {}
        self._last_submit_step: int | None = None
        self._counts = dict.fromkeys(
            (
                "triggers",
                "resyntheses",
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
        self._active_masks: dict[str, PendingFailure] = {}
        self._sig_mask: dict[Hashable, str] = {}

    # --------------------------------------------------------------------------------------- triggers
    def on_disequilibrium(
        self, step: int, failure: Failure, *, context: Mapping[str, Any] | None = None
    ) -> StormDecision:
        """d_t crossed τ at ``step`` because of ``failure`` (taken in the full ``context``, default ``failure.q``):
        mask it now, queue its synthesis."""
        self._counts["triggers"] += 1
        context = dict(failure.q if context is None else context)
        lifts = self._expire(step)
        sig = self.signature(failure)
        ticket = self._by_signature.get(sig)
        mask_id = self._sig_mask.get(sig)
        if ticket is not None or mask_id is not None:
            # One shot: a pending signature keeps its single temporary mask and its single queue entry.
            self._counts["deduplicated"] += 1
            if mask_id is not None:
                record = self._active_masks[mask_id]
                if step > record.step and fires(record.mask_rule, context, failure.action, self.classes):
                    # A later step took an action that was masked (a duplicate report of the same step is not).
                    self._counts["repeats_while_masked"] += 1
            requests = StormRequests(lifts=lifts) + self._dispatch(step)
            return StormDecision("deduplicated", sig, mask_id, ticket, requests)

        return self._new_entry(step, sig, failure, context, lifts)

    def on_resynthesis(
        self, step: int, failure: Failure, *, context: Mapping[str, Any] | None = None
    ) -> StormDecision:
        """A deliberate new synthesis of a failure that was handled already (narrowing: the scar learned from it blocked
        a lost task, ``synthesis.narrowing``). It gets a queue entry of its own even while the failure's signature is
        pending — a rejected candidate's mask lapsing, an earlier narrowing in flight — which ``on_disequilibrium``
        would deduplicate: this request is not a repeat of the failure but a new question about it. Queue bounds,
        cooldown and the in-flight limit apply as to any entry."""
        self._counts["resyntheses"] += 1
        context = dict(failure.q if context is None else context)
        lifts = self._expire(step)
        sig = ("resynthesis", next(self._resynthesis_numbers), self.signature(failure))
        return self._new_entry(step, sig, failure, context, lifts)

    def _new_entry(
        self,
        step: int,
        sig: Hashable,
        failure: Failure,
        context: Mapping[str, Any],
        lifts: tuple[LiftMask, ...],
    ) -> StormDecision:
        """Mask the failure now, queue its synthesis under ``sig``, and dispatch what may run."""
        record, mask = self._mask(step, sig, failure, context)
        outcome, ticket = self._enqueue(record)
        requests = StormRequests(masks=(mask,), lifts=lifts) + self._dispatch(step)
        return StormDecision(outcome, sig, record.mask_id, ticket, requests)

    def _mask(
        self, step: int, sig: Hashable, failure: Failure, context: Mapping[str, Any]
    ) -> tuple[PendingFailure, SetMask]:
        causal = failure.q if self.config.mask_scope == "action_in_context" else None
        rule = temporary_mask_rule(failure.action, causal)
        until = step + self.config.temp_mask_ttl
        mask_id = f"{TEMP_PREFIX}{next(self._mask_numbers)}:{scar_id_of(rule)}"
        self._counts["temp_masks_set"] += 1
        record = PendingFailure(sig, failure, context, step, mask_id, rule, until)
        self._active_masks[mask_id] = record
        self._sig_mask[sig] = mask_id
        return record, SetMask(mask_id, rule, until, "storm control: d_t > tau")

    def _queued(self) -> list[_Entry]:
        return [e for e in self._entries.values() if e.status == "queued"]

    def _enqueue(self, record: PendingFailure) -> tuple[Literal["queued", "merged", "dropped"], int | None]:
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
    def _dispatch(self, step: int) -> StormRequests:
        submits: list[Submit] = []
        for entry in self._queued():
            running = sum(e.status in ("in_flight", "submitting") for e in self._entries.values())
            if running >= self.config.max_in_flight:
                break
            if (
                self._last_submit_step is not None
                and step - self._last_submit_step < self.config.cooldown_steps
            ):
                self._counts["deferred_by_cooldown"] += 1
                break
            entry.status = "submitting"
            self._last_submit_step = step
            self._counts["submitted"] += 1
            submits.append(Submit(entry.ticket, entry.failure))
        return StormRequests(submits=tuple(submits))

    def started(self, ticket: int, future: SynthesisFuture) -> None:
        """The caller started the synthesis a ``Submit`` request asked for; ``future`` is its handle."""
        entry = self._entries.get(ticket)
        if entry is None or entry.status != "submitting":
            raise StormControlError(f"no synthesis waiting to start with ticket {ticket}")
        entry.future, entry.status = future, "in_flight"

    def poll(self, step: int) -> tuple[tuple[CompletedSynthesis, ...], StormRequests]:
        """Collect finished syntheses (for ReplayPass + ILP merge by the caller); return the lifts of lapsed masks
        and the submissions the rate limit allows."""
        if not self._entries and not self._active_masks:  # nothing queued, running or masked (most steps)
            return (), _NO_REQUESTS
        lifts = self._expire(step)
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
                CompletedSynthesis(
                    entry.ticket, entry.failure, tuple(entry.failures), result, error, entry.future
                )
            )
        return tuple(done), StormRequests(lifts=lifts) + self._dispatch(step)

    def awaiting_admission(self, ticket: int) -> bool:
        """Whether ``ticket``'s synthesis came back and waits for the caller's decision. False once another admitted
        scar covered every failure of its entry (the hot swap resolved it) — a caller that held the result back
        (narrowing's batch) then has nothing to reject."""
        entry = self._entries.get(ticket)
        return entry is not None and entry.status in ("awaiting_admission", "in_flight")

    def on_synthesis_rejected(self, ticket: int, *, step: int | None = None) -> None:
        """The caller's ReplayPass / ILP merge refused the candidate: the entry fails; its temporary masks stay
        until their TTL, shortened to ``rejected_mask_ttl`` steps after ``step`` (the failures remain blocked for a
        while, the queue moves on)."""
        entry = self._entries.get(ticket)
        if entry is None or entry.status not in ("awaiting_admission", "in_flight"):
            raise StormControlError(f"no synthesis awaiting admission with ticket {ticket}")
        entry.status = "failed"
        self._counts["failed"] += 1
        if step is not None:
            until = step + self.config.rejected_mask_ttl
            for record in entry.failures:
                held = self._active_masks.get(record.mask_id)
                if held is not None and held.until_step > until:
                    self._active_masks[record.mask_id] = replace(held, until_step=until)

    # -------------------------------------------------------------------------------------- hot swap
    def on_scar_admitted(
        self, rule: Rule, *, step: int, ticket: int | None = None, scar_id: str = ""
    ) -> StormRequests:
        """Hot swap: the lifts of the temporary masks of every failure the admitted scar's ``rule`` covers (the
        caller admitted it first). ``ticket``: the synthesis that produced it, if any — that entry is finished,
        and its failures the scar does not cover (merged piggybacks) are re-queued."""
        if not isinstance(rule, Rule):
            raise StormControlError(f"on_scar_admitted takes the scar's Rule, got {type(rule).__name__}")
        reason = f"hot swap: scar {scar_id} admitted" if scar_id else "hot swap: scar admitted"
        lifts: list[LiftMask] = []
        # Every active temporary mask whose failure the scar covers — including failures dropped from a full queue.
        for record in list(self._active_masks.values()):
            if fires(rule, record.context, record.action, self.classes):
                lifts.extend(self._lift(record, reason))
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
        return StormRequests(lifts=tuple(lifts)) + self._dispatch(step)

    def _requeue(self, failures: list[PendingFailure]) -> None:
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

    def _lift(self, record: PendingFailure, reason: str) -> list[LiftMask]:
        if self._active_masks.pop(record.mask_id, None) is None:
            return []
        if self._sig_mask.get(record.signature) == record.mask_id:
            del self._sig_mask[record.signature]
        self._counts["temp_masks_lifted"] += 1
        return [LiftMask(record.mask_id, reason)]

    def _expire(self, step: int) -> tuple[LiftMask, ...]:
        lifts: list[LiftMask] = []
        for record in [r for r in self._active_masks.values() if r.until_step <= step]:
            lifts.extend(self._lift(record, "temporary mask TTL elapsed"))
            ticket = self._by_signature.get(record.signature)
            entry = self._entries.get(ticket) if ticket is not None else None
            if entry is not None and entry.status == "failed":
                entry.failures = [f for f in entry.failures if f.mask_id != record.mask_id]
                self._by_signature.pop(record.signature, None)
                if not entry.failures:
                    del self._entries[entry.ticket]
        return tuple(lifts)

    # ------------------------------------------------------------------------------------------ stats
    def stats(self) -> StormStats:
        status = [e.status for e in self._entries.values()]
        return StormStats(
            queued=status.count("queued"),
            in_flight=status.count("in_flight") + status.count("submitting"),
            awaiting_admission=status.count("awaiting_admission"),
            max_queue_seen=self._max_queue_seen,
            temp_masks_active=len(self._active_masks),
            **self._counts,
        )

    def in_flight(self) -> tuple[tuple[int, SynthesisFuture], ...]:
        """(ticket, handle) of every synthesis running now, e.g. to wait on one at the end of a run."""
        return tuple(
            (e.ticket, e.future)
            for e in self._entries.values()
            if e.status == "in_flight" and e.future is not None
        )

    @property
    def active_temporary_masks(self) -> tuple[str, ...]:
        return tuple(self._active_masks)
