"""The ledger's event record (seed 000 §3.1–3.2): event types, the stored ``Event``, its canonical body and hash.

h_i = sha256(h_{i−1} ‖ canon(e_i ∖ {h_i})) (seed 000, eq. 3). Everything here is a pure function of an event's
fields: the storage (``ledger``), the head anchoring (``head``), the admission policy (``admission``) and the
projections (``projection``) all read events through these definitions.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from scars.agents.runtime.head import format_anchor
from scars.agents.runtime.scar import canonical_json, sha256_hex
from scars.synthesis.dsl import Rule
from scars.synthesis.errors import ConfigError

GENESIS_HASH = "0" * 64
_HEX64 = re.compile(r"[0-9a-f]{64}")  # matched whole (fullmatch): no trailing newline

SCAR_ADMITTED = "scar_admitted"
SCAR_RETIRED = "scar_retired"  # validity scope expired (SPEC §5)
SCAR_REVOKED = "scar_revoked"  # counter-evidence refutes it (SPEC §5)
TEMP_MASK_SET = "temp_mask_set"  # storm control (SPEC §4)
TEMP_MASK_LIFTED = "temp_mask_lifted"
FAILURE_OBSERVED = "failure_observed"
MERGE_DECISION = "merge_decision"
LIFECYCLE_EVENTS: tuple[str, ...] = (
    SCAR_ADMITTED,
    SCAR_RETIRED,
    SCAR_REVOKED,
    TEMP_MASK_SET,
    TEMP_MASK_LIFTED,
)
EVENT_TYPES: tuple[str, ...] = (*LIFECYCLE_EVENTS, FAILURE_OBSERVED, MERGE_DECISION)
VERDICT_EVENTS: tuple[str, ...] = (FAILURE_OBSERVED,)
"""Event types that record a verifier's verdict: the only evidence that can bring a retired scar back."""
EVENT_NAME = re.compile(r"[a-z][a-z0-9_]{0,63}")
"""An event type: snake_case, matched whole (``EVENT_NAME.fullmatch``; ``$`` would let ``"scar_admitted\n"`` through)."""


@dataclass(frozen=True, slots=True)
class Event:
    """One ledger event, as stored. ``payload`` is the decoded canonical JSON."""

    seq: int
    type: str
    subject: str | None
    payload: dict[str, Any]
    tx_time: int
    valid_from: int | None
    valid_to: int | None
    prev_hash: str
    hash: str


@dataclass(frozen=True, slots=True)
class VerifyReport:
    """Result of ``Ledger.verify``: ``first_bad_seq`` names the first event that fails (None when intact).

    ``keyed``: the MACs were checked with the key. ``head_file``: the chain was checked against the sidecar head
    file. ``anchored``: against an external anchor. ``mac_unchecked``: the ledger carries MACs but no key was
    available, so a rewrite with recomputed hashes could not be ruled out.
    """

    ok: bool
    first_bad_seq: int | None
    reason: str
    count: int
    head_hash: str
    keyed: bool = False
    head_file: bool = False
    anchored: bool = False
    mac_unchecked: bool = False

    @property
    def anchor(self) -> str:
        """``"count:hash"`` of the chain as read (meaningful when ``ok``)."""
        return format_anchor((self.count, self.head_hash))


@dataclass(frozen=True, slots=True)
class TemporaryMask:
    """A temporary mask in the projection (storm control, SPEC §4)."""

    mask_id: str
    rule: Rule
    until_step: int


def event_body(
    seq: int,
    type_: str,
    subject: str | None,
    payload_text: str,
    tx_time: int,
    valid_from: int | None,
    valid_to: int | None,
    prev_hash: str,
) -> str:
    """canon(e ∖ {h}): the canonical serialisation every hash covers (the payload as its canonical text)."""
    return canonical_json(
        {
            "seq": seq,
            "type": type_,
            "subject": subject,
            "payload": payload_text,
            "tx_time": tx_time,
            "valid_from": valid_from,
            "valid_to": valid_to,
            "prev_hash": prev_hash,
        }
    )


def event_hash(prev_hash: str, body: str) -> str:
    """h_i = sha256(h_{i−1} ‖ canon(e_i ∖ {h_i}))."""
    return sha256_hex(prev_hash + body)


def reject_constant(name: str) -> Any:
    raise ValueError(f"non-finite number {name} in payload")


def decode_payload(text: Any) -> dict[str, Any]:
    """A stored payload, decoded; ``ValueError`` (naming what is wrong) for anything but a JSON object."""
    if not isinstance(text, str):
        raise ValueError(f"payload is stored as {type(text).__name__}, not as JSON text")
    try:
        payload = json.loads(text, parse_constant=reject_constant)
    except RecursionError:
        raise ValueError("payload is nested too deeply") from None
    if not isinstance(payload, dict):
        raise ValueError(f"payload is a JSON {type(payload).__name__}, not a JSON object")
    return payload


def verdict_evidence(event: Event, **extra: Any) -> dict[str, Any]:
    """An evidence item backed by a recorded verdict: the only kind that can re-admit a retired/revoked scar.

    ``event`` is a ``failure_observed`` event of the same ledger (what ``observe_failure`` returns); ``extra``
    adds JSON-able detail (the fragment, …) that the hash of the item then covers too.
    """
    if not isinstance(event, Event):
        raise ConfigError(f"verdict_evidence() takes a ledger Event, got {type(event).__name__}")
    if event.type not in VERDICT_EVENTS:
        raise ConfigError(
            f"event {event.seq} is a {event.type!r}, not a verdict event (one of {VERDICT_EVENTS})"
        )
    return {"verdict_event": {"seq": event.seq, "hash": event.hash, "type": event.type}, **extra}


def verdict_ref(item: Mapping[str, Any]) -> tuple[int, str] | None:
    """The (seq, hash) an evidence item's ``verdict_event`` names, or None when it names none (validly)."""
    ref = item.get("verdict_event")
    if not isinstance(ref, dict):
        return None
    seq, digest = ref.get("seq"), ref.get("hash")
    if isinstance(seq, bool) or not isinstance(seq, int) or seq < 1:
        return None
    if not isinstance(digest, str) or not _HEX64.fullmatch(digest):
        return None
    return seq, digest
