"""The ledger's admission policy: when a scar may be admitted, and no resurrection (seed 000 §3.4).

One place decides (``judge_admission``; ``Ledger.may_admit`` and ``Ledger.admit`` call it): a new id is admitted; an
active id only with evidence never recorded for it; a retired or revoked id only with *verifier-backed* fresh
evidence — an evidence item ``{"verdict_event": {"seq": k, "hash": h}}`` naming a ``failure_observed`` event
recorded after the retirement, not used before for this id, not part of the counter-evidence that revoked it, and a
failure — read through the one ``Failure`` type, never a raw payload key — of which at least one failed action
(of F) is covered by the scar's mask. A verdict event whose payload is not a ``Failure`` record backs nothing.
Free JSON never unlocks it.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable, Mapping
from typing import Any

from scars.agents.runtime.errors import LifecycleError, ResurrectionRefused
from scars.agents.runtime.events import (
    SCAR_ADMITTED,
    SCAR_RETIRED,
    SCAR_REVOKED,
    VERDICT_EVENTS,
    Event,
    verdict_ref,
)
from scars.agents.runtime.scar import Scar, evidence_item_hash
from scars.synthesis.dsl.semantics import mask_covers
from scars.synthesis.errors import ConfigError, LedgerError, ScarsError
from scars.synthesis.failure import Failure


def read_failure(event: Event) -> tuple[Failure | None, str]:
    """The failure a verdict event records, read through the one ``Failure`` type (``Failure.from_json``), or
    (None, why it is not one). Every writer records this shape (``SchemaStore.record_failure``,
    ``Ledger.observe_failure``); a payload of any other shape is no failure, so it backs nothing (fail closed)."""
    try:
        return Failure.from_json(event.payload), ""
    except (ConfigError, KeyError, TypeError, ValueError, AttributeError, ScarsError) as exc:
        why = str(exc) if isinstance(exc, ScarsError) else f"{type(exc).__name__}: {exc}"
        return None, (
            f"verdict event {event.seq} is not a failure record (Failure.from_json: {why:.120}); only a recorded "
            "failure of an action the scar masks backs a re-admission"
        )


def judge_admission(
    scar: Scar, history: list[Event], event_at: Callable[[int], Event | None]
) -> tuple[type[LedgerError] | None, str]:
    """(None, why it may be admitted) or (the error class, why not): the only no-resurrection check."""
    lifecycle = [e for e in history if e.type in (SCAR_ADMITTED, SCAR_RETIRED, SCAR_REVOKED)]
    if not lifecycle:
        return None, f"scar {scar.id} is new to this ledger"
    admissions = [e for e in history if e.type == SCAR_ADMITTED]
    seen = {h for e in admissions for h in e.payload.get("evidence_hashes", ())}
    fresh = [(i, item) for i, item in enumerate(scar.evidence) if evidence_item_hash(item) not in seen]
    last = lifecycle[-1]
    if last.type == SCAR_ADMITTED:
        if not fresh:
            return LifecycleError, (
                f"scar {scar.id} is already active (admitted at seq {last.seq}) and this admission carries "
                "no new evidence"
            )
        return None, f"scar {scar.id} is active; the admission adds {len(fresh)} new evidence item(s)"
    state = last.type.removeprefix("scar_")
    counter_hashes: set[str] = set()
    counter_refs: set[int] = set()
    for e in history:
        if e.type == SCAR_REVOKED:
            for item in e.payload.get("counter_evidence", ()):
                if isinstance(item, dict):
                    counter_hashes.add(evidence_item_hash(item))
                    ref = verdict_ref(item)
                    if ref is not None:
                        counter_refs.add(ref[0])
    used_refs = {
        ref[0]
        for e in admissions
        for item in e.payload.get("evidence", ())
        if isinstance(item, dict) and (ref := verdict_ref(item)) is not None
    }
    backed: list[int] = []
    problems: list[str] = []
    for i, item in fresh:
        problem = _verdict_problem(scar, item, last, counter_hashes, counter_refs, used_refs, event_at)
        if problem is None:
            backed.append(verdict_ref(item)[0])  # type: ignore[index]
        else:
            problems.append(f"item {i}: {problem}")
    if backed:
        return (
            None,
            f"scar {scar.id} was {state} at seq {last.seq}; re-admitted on verdict event(s) {backed}",
        )
    got = (
        f"got {len(scar.evidence)} item(s), all already recorded for this id"
        if not fresh
        else "; ".join(problems[:4]) + (f"; … ({len(problems) - 4} more)" if len(problems) > 4 else "")
    )
    return ResurrectionRefused, (
        f"scar {scar.id} was {state} at seq {last.seq}; re-admission needs fresh verifier-backed evidence — an "
        'evidence item {"verdict_event": {"seq": K, "hash": H}} naming a failure_observed event recorded after '
        f"seq {last.seq}, not used before for this id and not its counter-evidence (verdict_evidence(event)); "
        f"{got}"
    )


def _verdict_problem(
    scar: Scar,
    item: Mapping[str, Any],
    retirement: Event,
    counter_hashes: set[str],
    counter_refs: set[int],
    used_refs: set[int],
    event_at: Callable[[int], Event | None],
) -> str | None:
    if evidence_item_hash(item) in counter_hashes:
        return f"it is the counter-evidence that revoked the scar (seq {retirement.seq})"
    if "verdict_event" not in item:
        return "free JSON, not a reference to a recorded verdict"
    ref = verdict_ref(item)
    if ref is None:
        return 'its verdict_event is not {"seq": <int>, "hash": <64 hex digits>}'
    seq, digest = ref
    event = event_at(seq)
    if event is None:
        return f"verdict event {seq} is not in this ledger (or cannot be read)"
    if not hmac.compare_digest(event.hash, digest):
        return f"verdict event {seq} has hash {event.hash[:12]}…, not {digest[:12]}…"
    if event.type not in VERDICT_EVENTS:
        return f"event {seq} is a {event.type}, not a verdict ({', '.join(VERDICT_EVENTS)})"
    if seq <= retirement.seq:
        return f"verdict event {seq} predates the {retirement.type} at seq {retirement.seq}: not fresh"
    if seq in counter_refs:
        return f"verdict event {seq} is part of the counter-evidence that revoked the scar"
    if seq in used_refs:
        return f"verdict event {seq} already backed an admission of this scar"
    failure, problem = read_failure(event)
    if failure is None:
        return problem
    masked = [a for a in failure.F if mask_covers(scar.rule.mask, a)]
    if not masked:
        names = ", ".join(sorted({repr(a.name) for a in failure.F}))
        return f"verdict event {seq} is a failure of {names}, which this scar does not mask"
    return None
