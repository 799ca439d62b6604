"""The scar runtime (paper §3.1, §4.2; SPEC §1, §5): dual-plane scars, online enforcement, the audit ledger.

- ``scar``:    ``Scar`` = control plane (rule: guard, mask) + audit plane (evidence, ``Provenance``, ``Scope``).
- ``control``: ``ControlPlane`` enforces H ∪ S_t ∪ temporary masks on candidate actions and base logits.
- ``ledger``:  ``Ledger``, the append-only, bitemporal, hash-chained SQLite store the control plane projects from.
- ``store``:   ``SchemaStore``, the one owner of both: typed commands append events and apply them to the plane.
"""

from agents.runtime.control import ControlPlane, ControlPlaneError, Expired, Governed
from agents.runtime.ledger import (
    EVENT_TYPES,
    Event,
    Ledger,
    LifecycleError,
    ResurrectionRefused,
    TemporaryMask,
    VerifyReport,
)
from agents.runtime.scar import Provenance, Scar, Scope, canonical_json, scar_id_of
from agents.runtime.store import SchemaIntegrityError, SchemaStore

__all__ = [
    "EVENT_TYPES",
    "ControlPlane",
    "ControlPlaneError",
    "Event",
    "Expired",
    "Governed",
    "Ledger",
    "LifecycleError",
    "Provenance",
    "ResurrectionRefused",
    "SchemaIntegrityError",
    "SchemaStore",
    "Scar",
    "Scope",
    "TemporaryMask",
    "VerifyReport",
    "canonical_json",
    "scar_id_of",
]
