"""The paper's guarantees, measured on a run as it goes (paper §5; SPEC §6) — checks that can fail.

``GuaranteeMonitor`` reads an agent's self-schema (``SchemaStore``: its ledger and live control plane) and the
decisions of the run; it never writes to either. Four checks, each a count and an ``ok``:

* **Plane = fold(ledger).** A shadow control plane is rebuilt incrementally from the ledger's new events; at every
  change of the self-schema the two must be equal in content, and at every step in their active ids (a scar
  unloaded or a mask lifted behind the ledger's back is caught at the next decision). At every decision the
  ledger's head (one read) must also be what the agent's store last committed: an event another process wrote (a
  scar retired behind the agent's back) is a mismatch named at once, and the run stops (``ForeignWriteError``).
* **Prop. 1, against the ledger's evidence.** Every recorded failure (q, F) that an admitted scar brought as
  evidence is *owed* coverage until the scar's scope ends (scope retirement, revocation); a merge's report never
  excuses it (what a merge says it left uncovered is a violation, named as such), a scar dropped by the ILP merge
  leaves its failures owed (the merge promised to keep them covered), and a scar admitted without (q, F) evidence
  is itself a violation (it would owe nothing). A failure a later scar brings again, re-attributed from the same
  recorded step (narrowing, ``synthesis.narrowing``), is owed by that scar as attributed now instead of by a
  retired one — still owed.
  Coverage is by S_t, the scars, as the paper states it (F(q) ⊆ U_{S_t}(q)): a temporary mask (storm control), the
  core schema H or a fallback a⊥ covers nothing here. At every change of the self-schema each owed failure is
  replayed against the live scars (every a ∈ F fired on by some scar at q); at every decision, owed failures whose
  context matches the current one are checked against what the controller's scars actually masked. Each uncovered
  failed action is a violation; the first one is reported.
* **Prop. 2.** At every change, C(S_t) ≤ K_t·C_max (K_t: distinct failure patterns seen so far — the distinct rules
  the agent was *told* it broke, the verdicts' rule ids, which is what the agent can know; C_max: the largest single
  scar cost so far). The growth exponent b of C(S_t) ≈ a·t^b (C sampled after every decision) must be < 1 where K
  is finite — the run went on at least as long again after its last new failure pattern (``growth_checked``;
  otherwise b is reported, not checked). The same bound check with K_t =
  the experimenter's rule families (``prop2["families"]``, reported, not the verdict: the agent is never told them).
* **Prop. 3 as stated.** For each admitted scar σ the drift budget is recorded at admission — the configured ε and
  the scar's own L_drift from its synthesis. Afterwards, on every decision that is *off-failure for σ* (no
  admissible action breaks the rule family σ was learned from; other rules may be in play, so a too-broad σ shows
  drift), the TV distance between π_S and π_{S∖σ}, both governed from the base policy's *proposal* (its logits
  before any re-plan around what the controller blocked: a re-plan moves the mass off the masked action and would
  hide the drift), is measured. ``prop3_ok`` is the paper's statement: mean TV per scar within sqrt(ε/2), the
  configured bound (beyond ``DRIFT_TOLERANCE`` fails it). The scar's own sqrt(L_drift/2) — its synthesis' estimate on
  the data it had, which a run can exceed out of sample — is a separate diagnostic with its own key,
  ``prop3_own_bound_exceeded`` (how many scars drift above it); it is not Prop. 3 and never marks it violated. A
  retired or revoked scar's record is kept.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from scars.agents.runtime.control import ControlPlane, Governed
from scars.agents.runtime.errors import ForeignWriteError
from scars.agents.runtime.scar import Scar
from scars.agents.runtime.store import SchemaStore, apply, plane_state
from scars.envs.api import Decision
from scars.experiments.metrics import growth_fit
from scars.synthesis.dsl import Action, description_length
from scars.synthesis.dsl.semantics import Classes
from scars.synthesis.failure import Failure
from scars.synthesis.merge import requirement_ids

_TOL = 1e-9

DRIFT_TOLERANCE = 0.005
"""Prop. 3's tolerance: half a percentage point of probability mass per off-failure decision. A scar's own bound
sqrt(L_drift/2) is an estimate from the synthesis data (often L_drift = 0: no recorded success was masked), and
the run then meets states that data never held; a mean TV within the tolerance is not counted against either bound.
A scar widened to forbid its verb drifts by 0.009–0.031 on seed 0 (caught); clean seed-0/1 runs stay below 3e-4."""

GUARANTEES: tuple[tuple[str, str], ...] = (
    ("enforcement_ok", "a rule in force was not enforced (or a masked action ran)"),
    ("plane_ledger_ok", "control plane ≠ fold of the ledger"),
    ("ledger_verified", "the ledger fails verification (a chain, MAC or head-file check)"),
    ("prop1_ok", "Prop. 1 (a covered failure is not masked)"),
    ("prop2_ok", "Prop. 2 (C(S_t) > K·C_max, or C(S_t) grows as t^b with b ≥ 1)"),
    ("prop3_ok", "Prop. 3 (off-failure drift above the configured bound sqrt(ε/2))"),
    ("generate_mask_ok", "generate mode wrote a masked command"),
)
"""The checks a run must pass, every tier: summary key (False = violated, None = does not apply), what a
violation means. The CLI prints GUARANTEE VIOLATED for each that is False."""


def broken_guarantees(summary: dict) -> list[str]:
    """What each violated check of a run's summary means (empty when every check holds or does not apply)."""
    return [meaning for key, meaning in GUARANTEES if summary.get(key) is False]


def diagnostic_notes(summary: dict) -> list[str]:
    """What a run's diagnostics report that is not a guarantee (printed as a note, never as a violation): scars whose
    off-failure drift exceeds their own sqrt(L_drift/2) while Prop. 3's configured bound is a separate check."""
    own = summary.get("prop3_own_bound_exceeded")
    if not own:
        return []
    measured = (summary.get("prop3") or {}).get("scars_measured")
    return [
        f"{own} of {measured} scars drift off-failure above their own sqrt(L_drift/2) (their synthesis' estimate; "
        "Prop. 3's configured bound is checked apart)"
    ]


@dataclass
class _Owed:
    """A recorded failure an admitted scar brought as evidence, and that scar."""

    scar_id: str
    failure: Failure


@dataclass
class _Drift:
    epsilon: float
    own: float | None
    family: str | None
    admitted_t: int
    tv_sum: float = 0.0
    n: int = 0
    fired_n: int = 0  # off-failure decisions at which the scar masked something (TV > 0 possible only there)
    tv_max: float = 0.0
    ended_t: int | None = None  # retired or revoked: the record is kept, measuring stops


@dataclass
class GuaranteeMonitor:
    """Props 1–3 and plane/ledger consistency for one agent's run (module docstring)."""

    store: SchemaStore
    classes: Classes | None = None
    families: Mapping[str, str] = field(default_factory=dict)
    """rule id → family (a schedule's equivalence); a rule outside it is its own family."""
    drift_tolerance: float = DRIFT_TOLERANCE
    """Prop. 3: a scar's mean TV may exceed a bound by this much before the check fails (module docstring)."""

    def __post_init__(self) -> None:
        self._shadow = ControlPlane(
            core=self.store.plane.core_rules,
            classes=self.classes,
            mode=self.store.plane.mode,
            soft_bias=self.store.plane.soft_bias,
            fallback=self.store.plane.fallback,
        )
        self._seen = 0
        self._owed: dict[tuple[str, int], _Owed] = {}
        self._left: set[str] = set()  # scars retired by a merge or a narrowing (their failures stay owed)
        self._versions: dict[str, str | None] = {}  # scar id -> the world version its scope names (None: any)
        self._drift: dict[str, _Drift] = {}
        self._patterns: set[str] = set()
        self._families: set[str] = set()
        self._c_max = 0.0
        self._c_now = 0.0
        self._c_every: list[tuple[int, float]] = []  # C(S_t) after every decision (the growth fit's samples)
        self._last_pattern_t: int | None = None  # when the last new failure pattern (a new K) arrived
        self.consistency = {"checks": 0, "mismatches": 0, "first": None}
        self.prop1 = {"checks": 0, "uncovered": 0, "merge_reported_uncovered": 0, "first": None}
        self.prop2 = {"checks": 0, "violations": 0, "first": None}
        self.prop2_families = {"checks": 0, "violations": 0, "first": None}
        self._catch_up(0)

    # --------------------------------------------------------------------------------------------- events
    def _family(self, rule_id: str) -> str:
        return self.families.get(rule_id, rule_id)

    def _catch_up(self, t: int) -> bool:
        """Apply the ledger's new events to the shadow plane and the owed set; True when the schema changed."""
        if self.store.version == self._seen:
            return False  # nothing was appended (reading the ledger only when the store reports a change)
        events = self.store.ledger.events(after=self._seen)
        for event in events:
            self._seen = event.seq
            apply(self._shadow, event)
            p = event.payload
            if event.type == "failure_observed":
                theta = str(p.get("theta", ""))
                if theta not in self._patterns:
                    self._last_pattern_t = t
                self._patterns.add(theta)
                self._families.add(self._family(str(p.get("theta", ""))))
            elif event.type == "scar_admitted":
                scar = Scar.from_json(p)
                for i, item in enumerate(scar.evidence):
                    if "q" in item and "F" in item:  # a failure's JSON form (evidence may carry more)
                        failure = Failure.from_json(item)
                        # the same failure re-attributed (narrowing): the new scar owes it as attributed now, in
                        # place of a retired scar that owed the older attribution — still owed, never dropped
                        self._owed = {
                            k: v
                            for k, v in self._owed.items()
                            if not (v.failure.id == failure.id and v.scar_id in self._left)
                        }
                        self._owed[(scar.id, i)] = _Owed(scar.id, failure)
                if not any(k[0] == scar.id for k in self._owed):
                    # Prop. 1 is owed by the evidence itself: a scar admitted without a recorded failure (q, F)
                    # would owe nothing — its admission is the violation
                    self._violation(t, scar.id, None, "admitted without (q, F) evidence")
                self._versions[scar.id] = scar.scope.env_version
                settings = dict(scar.provenance.synthesiser_settings)
                theta = next((item.get("theta") for item in scar.evidence if "theta" in item), None)
                if "drift_budget" in settings:
                    self._drift[scar.id] = _Drift(
                        float(settings["drift_budget"]),
                        None if settings.get("l_drift") is None else float(settings["l_drift"]),
                        None if theta is None else self._family(str(theta)),
                        t,
                    )
                self._c_max = max(self._c_max, description_length(scar.rule))
            elif event.type == "scar_revoked" or (
                event.type == "scar_retired" and str(p.get("reason", "")).startswith("scope")
            ):
                self._owed = {k: v for k, v in self._owed.items() if v.scar_id != event.subject}
                self._end_drift(str(event.subject), t)
                ended = self._versions.get(str(event.subject)) if event.type == "scar_retired" else None
                if (
                    ended is not None
                ):  # the world left that version: every scar scoped to it has its scope ended,
                    # including one a merge dropped earlier (it gets no retirement of its own), so its failures are
                    # owed no more
                    self._owed = {
                        k: v for k, v in self._owed.items() if self._versions.get(v.scar_id) != ended
                    }
            elif event.type == "scar_retired":
                self._end_drift(str(event.subject), t)  # a merge dropped it: its failures stay owed
                self._left.add(str(event.subject))
            elif event.type == "merge_decision":
                # a merge's own report never excuses an owed failure: what it says it left uncovered stays owed
                # (the replay below finds it unmasked), and the report is named as the cause
                uncovered = set(p.get("uncovered", ()))
                for owed in self._owed.values():
                    if uncovered & {owed.failure.id, *requirement_ids(owed.failure.id, owed.failure.F)}:
                        self.prop1["merge_reported_uncovered"] += 1
                        self._violation(t, owed.scar_id, owed.failure.id, "a merge reported it uncovered")
        return bool(events)

    def _end_drift(self, scar_id: str, t: int) -> None:
        """A scar left the plane: its drift record is kept (reported) and measuring it stops."""
        d = self._drift.get(scar_id)
        if d is not None and d.ended_t is None:
            d.ended_t = t

    # ------------------------------------------------------------------------------------------- per step
    def before_decision(self, t: int) -> None:
        """Catch up with what changed since the last step (e.g. a world-version retirement) before the next
        decision is governed, so the decision is checked against the self-schema it was governed by."""
        self._sync(t)

    def after_step(
        self,
        t: int,
        decision: Decision,
        logits: Sequence[float],
        governed: Governed,
        flagged: Sequence[Sequence[str]],
    ) -> None:
        """Check the decision just taken (with the plane it was governed by), then catch up with the ledger."""
        self._check_decision(t, decision, governed)
        self._measure_drift(t, decision, logits, governed, flagged)
        self._sync(t)
        self._c_every.append((t, self._c_now))

    def _sync(self, t: int) -> None:
        self._refuse_foreign(t)
        changed = self._catch_up(t)
        live = self.store.plane
        self.consistency["checks"] += 1
        same_ids = (live.active_ids, live.temporary_mask_ids) == (
            self._shadow.active_ids,
            self._shadow.temporary_mask_ids,
        )
        if changed or not same_ids:
            same = same_ids and plane_state(live) == plane_state(self._shadow)
            if not same:
                self.consistency["mismatches"] += 1
                if self.consistency["first"] is None:
                    self.consistency["first"] = {
                        "t": t,
                        "live": list(live.active_ids),
                        "ledger": list(self._shadow.active_ids),
                    }
            self._replay_owed(t)
            self._check_growth(t)

    def _refuse_foreign(self, t: int) -> None:
        """Plane = ledger against other writers: the ledger's head (one read) must be what this agent's store last
        committed. An event another process wrote (a retirement behind the agent's back) makes the plane stale:
        it is a mismatch, named at once, and the run stops (``ForeignWriteError``; the runner writes out what was
        recorded so far, its summary marked incomplete)."""
        foreign = self.store.foreign_events()
        if not foreign:
            return
        self.consistency["checks"] += 1
        self.consistency["mismatches"] += 1
        named = [{"seq": e.seq, "type": e.type, "subject": e.subject} for e in foreign]
        if self.consistency["first"] is None:
            self.consistency["first"] = {
                "t": t,
                "live": list(self.store.plane.active_ids),
                "ledger": list(self._shadow.active_ids),
                "foreign_events": named,
            }
        listed = "; ".join(f"event {e['seq']} {e['type']} {e['subject'] or '-'}" for e in named[:5])
        more = f" and {len(named) - 5} more" if len(named) > 5 else ""
        raise ForeignWriteError(
            f"{self.store.path}: at decision {t} the ledger holds {len(named)} event(s) this agent did not write — "
            f"{listed}{more} — another process wrote it, so the control plane is no longer the fold of the ledger; "
            "the run stops (fail closed)"
        )

    def _check_decision(self, t: int, decision: Decision, governed: Governed) -> None:
        """Owed failures whose context matches this decision's: each failed action must have been masked by a scar
        of S_t (``Governed.fired``); a temporary mask, the core schema or a fallback a⊥ does not count (Prop. 1)."""
        q = decision.context
        index = {(a.kind, a.name, a.args): i for i, a in enumerate(decision.actions)}
        scar_ids = set(self.store.plane.active_ids)
        by_scar = {i for i, ids in governed.fired if not scar_ids.isdisjoint(ids)}
        for owed in self._owed.values():
            if all(k in q and q[k] == v for k, v in owed.failure.q.items()):
                for a in owed.failure.F:
                    i = index.get((a.kind, a.name, a.args))
                    if i is not None:
                        self.prop1["checks"] += 1
                        if i not in by_scar:
                            self._uncovered(t, owed, a, "at a decision")

    def _replay_owed(self, t: int) -> None:
        """Every owed failure replayed against S_t: F(q) ⊆ U_{S_t}(q), the masked set of the scars alone (SPEC §4,
        ReplayPass) — a temporary mask set for the same failure (storm control, up to its TTL) covers nothing here,
        so a scar that masks none of its own failure is caught while that mask still lasts."""
        plane = self.store.plane
        scar_ids = set(plane.active_ids)
        for owed in self._owed.values():
            f = owed.failure
            for a in f.F:
                self.prop1["checks"] += 1
                if scar_ids.isdisjoint(plane.fired_rules(f.q, a, step=t)):
                    self._uncovered(t, owed, a, "on replay")

    def _uncovered(self, t: int, owed: _Owed, action: Action, where: str) -> None:
        self._violation(t, owed.scar_id, owed.failure.id, where, action.text or action.name)

    def _violation(
        self, t: int, scar_id: str, failure_id: str | None, where: str, action: str | None = None
    ) -> None:
        """One Prop. 1 violation; the first is named (when, where or why, which failure, scar and action)."""
        self.prop1["uncovered"] += 1
        if self.prop1["first"] is None:
            self.prop1["first"] = {
                "t": t,
                "where": where,
                "failure": failure_id,
                "scar": scar_id,
                "action": action,
            }

    def _check_growth(self, t: int) -> None:
        c = sum(description_length(s.rule) for s in self.store.scars)
        self._c_now = c
        for record, k in ((self.prop2, len(self._patterns)), (self.prop2_families, len(self._families))):
            record["checks"] += 1
            if c > k * self._c_max + _TOL:
                record["violations"] += 1
                if record["first"] is None:
                    record["first"] = {"t": t, "C": c, "K": k, "C_max": self._c_max}

    def _measure_drift(
        self,
        t: int,
        decision: Decision,
        logits: Sequence[float],
        governed: Governed,
        flagged: Sequence[Sequence[str]],
    ) -> None:
        if not self._drift:
            return
        exposed = {self._family(r) for rs in flagged for r in rs}
        fired = dict(governed.fired)
        for scar_id, d in self._drift.items():
            if d.ended_t is not None or t <= d.admitted_t or (d.family is not None and d.family in exposed):
                continue  # not a later, off-failure decision for this scar while it is in force
            d.n += 1
            if any(scar_id in ids for ids in fired.values()):  # elsewhere σ changes nothing: TV = 0
                tv = _tv_without(logits, decision.actions, fired, scar_id, self.store.plane)
                d.tv_sum += tv
                d.fired_n += 1
                d.tv_max = max(d.tv_max, tv)

    # ------------------------------------------------------------------------------------------- results
    def summary(self) -> dict[str, Any]:
        growth = growth_fit(
            np.array([t + 1 for t, _ in self._c_every], dtype=float),
            np.array([c for _, c in self._c_every], dtype=float),
        )
        b = growth["b"]
        # Prop. 2's growth claim where K is finite: once no new failure pattern arrives (the run went on at least as
        # long again after the last one), C(S_t) ≈ a·t^b must be sublinear (b < 1) over the whole run
        t_end = self._c_every[-1][0] + 1 if self._c_every else 0
        last = self._last_pattern_t
        growth_checked = last is not None and b == b and t_end >= 2 * (last + 1)
        growth_ok = (b < 1.0) if growth_checked else None
        per_scar = {
            sid: {
                "epsilon": d.epsilon,
                "bound": math.sqrt(d.epsilon / 2),
                "l_drift": d.own,
                "own_bound": None if d.own is None else math.sqrt(d.own / 2),
                "mean_tv": d.tv_sum / d.n if d.n else None,
                "max_tv": d.tv_max if d.n else None,
                "n": d.n,
                "fired_n": d.fired_n,
                "ended_t": d.ended_t,
            }
            for sid, d in self._drift.items()
        }
        measured = [v for v in per_scar.values() if v["mean_tv"] is not None]
        slack = self.drift_tolerance + _TOL
        exceeds = [v for v in measured if v["mean_tv"] > v["bound"] + slack]
        exceeds_own = [
            v for v in measured if v["own_bound"] is not None and v["mean_tv"] > v["own_bound"] + slack
        ]
        return {
            "plane_ledger_ok": self.consistency["mismatches"] == 0,
            "plane_ledger": dict(self.consistency),
            "prop1_ok": self.prop1["uncovered"] == 0,
            "prop1": dict(self.prop1),
            "prop2_ok": (self.prop2["violations"] == 0 and growth_ok is not False)
            if self.prop2["checks"]
            else None,
            "prop2": {
                **self.prop2,
                "K": len(self._patterns),
                "C_max": self._c_max,
                "growth_exponent": None if b != b else b,
                "growth_checked": growth_checked,
                "growth_ok": growth_ok,
                "last_new_pattern_t": last,
                "families": {
                    **self.prop2_families,
                    "K": len(self._families),
                    "ok": self.prop2_families["violations"] == 0 if self.prop2_families["checks"] else None,
                },
            },
            "prop3_ok": not exceeds if measured else None,
            "prop3_own_bound_exceeded": len(exceeds_own) if measured else None,
            "prop3": {
                "scars_measured": len(measured),
                "exceeds_configured_bound": len(exceeds),
                "exceeds_own_l_drift_bound": len(exceeds_own),
                "max_mean_tv": max((v["mean_tv"] for v in measured), default=None),
                "per_scar": per_scar,
            },
        }


def _governed_outcomes(
    base: np.ndarray, counts: np.ndarray, control: np.ndarray, hard: bool, soft_bias: float
) -> np.ndarray:
    """The governed distribution over the admissible actions and the fallback a⊥ (the last entry), as the control
    plane computes it (``ControlPlane.govern``) from base logits and how many rules fire on each action."""
    n = len(base)
    if hard:
        z = np.where(counts > 0, -np.inf, base)
        if control.any() and not np.isfinite(z[control]).any():
            return np.append(np.zeros(n), 1.0)
    else:
        z = base + soft_bias * counts
    if not np.isfinite(z).any():
        return np.append(np.zeros(n), 1.0)
    e = np.exp(z - z[np.isfinite(z)].max())
    return np.append(e / e.sum(), 0.0)


def _tv_without(
    logits: Sequence[float],
    actions: Sequence[Action],
    fired: Mapping[int, tuple[str, ...]],
    scar_id: str,
    plane: ControlPlane,
) -> float:
    """TV(π_{S}, π_{S∖σ}) at one decision, both governed from the same base logits — the base policy's proposal,
    before any re-plan around what the controller blocked — with the fallback a⊥ as an outcome."""
    base = np.asarray(logits, dtype=np.float64)
    n = len(base)
    control = np.array([a.kind in ("env", "tool") for a in actions], dtype=bool)
    count = np.array([len(fired.get(i, ())) for i in range(n)], dtype=float)
    without = count - np.array([scar_id in fired.get(i, ()) for i in range(n)], dtype=float)
    hard = plane.mode == "hard"
    with_p = _governed_outcomes(base, count, control, hard, plane.soft_bias)
    without_p = _governed_outcomes(base, without, control, hard, plane.soft_bias)
    return 0.5 * float(np.abs(with_p - without_p).sum())
