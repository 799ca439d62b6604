"""The two projections of the ledger's events: the scar set S_t and the live control plane (paper §3.1, §4).

Both are folds of verified events: ``active_scars_of`` (S_t, as of now or at a valid time) and ``replay`` (the
``ControlPlane``: scars and temporary masks) through its one transition ``apply``. The ledger verifies before it
projects (``Ledger.active_scars`` / ``control_plane``); the schema store applies each event it appends, so its live
plane is the fold of the ledger (``plane_state`` compares two planes).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from scars.agents.runtime.control import ControlPlane
from scars.agents.runtime.events import (
    SCAR_ADMITTED,
    SCAR_RETIRED,
    SCAR_REVOKED,
    TEMP_MASK_LIFTED,
    TEMP_MASK_SET,
    Event,
    TemporaryMask,
)
from scars.agents.runtime.scar import Scar
from scars.synthesis.dsl import canonical_text, parse_rule
from scars.synthesis.errors import LedgerIntegrityError, ScarsError


def apply(plane: ControlPlane, event: Event) -> None:
    """The one transition of the control plane: the effect of one ledger event (non-lifecycle events: none)."""
    t, p = event.type, event.payload
    if t == SCAR_ADMITTED:
        plane.add(Scar.from_json(p))  # a re-admission with new evidence refreshes the audit plane
    elif t in (SCAR_RETIRED, SCAR_REVOKED) and event.subject in plane:
        plane.remove(event.subject)
    elif t == TEMP_MASK_SET:
        plane.set_temporary_mask(parse_rule(p["rule"]), until_step=p["until_step"], mask_id=p["mask_id"])
    elif t == TEMP_MASK_LIFTED and p["mask_id"] in plane.temporary_mask_ids:
        plane.lift_temporary_mask(p["mask_id"])


def replay(events: Iterable[Event], **plane_kwargs: Any) -> ControlPlane:
    """The control plane as the fold of ``events`` (``plane_kwargs`` go to ``ControlPlane``: core, classes, mode…)."""
    plane = ControlPlane(**plane_kwargs)
    for event in events:
        apply(plane, event)
    return plane


def plane_state(plane: ControlPlane) -> tuple:
    """What a control plane enforces, comparable across instances: H, the active scars (with their audit plane),
    the temporary masks (rule and expiry), the mode."""
    return (
        plane.mode,
        plane.soft_bias,
        plane.fallback,
        plane.core_ids,
        tuple((s.id, s.to_json()) for s in plane.scars),
        tuple(
            (mask_id, canonical_text(rule), until) for mask_id, (rule, until) in plane.temporary_masks.items()
        ),
    )


@contextmanager
def projecting(where: str | Path, event: Event) -> Iterator[None]:
    """A verified event whose payload still cannot be projected (written by a bug, or by a key holder)."""
    try:
        yield
    except (KeyError, TypeError, ValueError, ScarsError) as exc:
        raise LedgerIntegrityError(
            f"{where}: event {event.seq} ({event.type}) cannot be projected: {exc!s:.200}; fail closed"
        ) from None


def active_scars_of(
    events: Iterable[Event], where: str | Path, valid_at: int | None = None
) -> tuple[Scar, ...]:
    """S_t: the scars admitted and not retired/revoked since, in first-admission order; with ``valid_at``, the
    scars whose valid-time interval contains that instant (``Ledger.active_scars``)."""
    state: dict[str, tuple[Scar, list[list[int | None]], bool]] = {}
    for event in events:
        with projecting(where, event):
            if event.type == SCAR_ADMITTED:
                scar = Scar.from_json(event.payload)
                _, intervals, is_open = state.get(scar.id, (scar, [], False))
                if not is_open:
                    intervals = [*intervals, [event.valid_from, event.valid_to]]
                state[scar.id] = (scar, intervals, True)
            elif event.type in (SCAR_RETIRED, SCAR_REVOKED) and event.subject in state:
                scar, intervals, _ = state[event.subject]
                start, end = intervals[-1]
                cut = event.valid_from if end is None else min(end, event.valid_from)
                state[event.subject] = (scar, [*intervals[:-1], [start, cut]], False)
    if valid_at is None:
        return tuple(scar for scar, _, is_open in state.values() if is_open)
    return tuple(
        scar
        for scar, intervals, _ in state.values()
        if any(start <= valid_at and (end is None or valid_at < end) for start, end in intervals)
    )


def temporary_masks_of(events: Iterable[Event], where: str | Path) -> tuple[TemporaryMask, ...]:
    """The temporary masks set and not lifted (``Ledger.temporary_masks``)."""
    masks: dict[str, TemporaryMask] = {}
    for event in events:
        with projecting(where, event):
            if event.type == TEMP_MASK_SET:
                p = event.payload
                masks[p["mask_id"]] = TemporaryMask(p["mask_id"], parse_rule(p["rule"]), p["until_step"])
            elif event.type == TEMP_MASK_LIFTED:
                masks.pop(event.payload["mask_id"], None)
    return tuple(masks.values())
