"""The scars agent's equilibration: what enters and leaves S_t on the agent's side, through the schema store.

- A new scar is merged with S_t (``equilibrate``): the ILP merge of ``agents.runtime.equilibration`` over S_t, the
  new scar and the consolidations it makes possible (one rule in place of several narrower scars with the same
  mask, ``synthesis.consolidate``), owing coverage to every recorded failure some candidate resolves.
- A wide scar whose narrowing syntheses are all back is retired before the merge when the new scars cover its
  failures (``retire_narrowed``).
- A verified success recorded after a scar's admission that the scar would have blocked revokes it
  (``revoke_refuted``, §4.5).

The store writes every decision to the ledger; this class keeps the merge log and each scar's admission time (the
successes newer than it are counter-evidence). Which syntheses run, and when, is the agent's.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from scars.agents.narrowing_book import NarrowingBook
from scars.agents.runtime.equilibration import MergeMode, equilibrate, owed_failures
from scars.agents.runtime.scar import Scar
from scars.agents.runtime.store import SchemaStore
from scars.synthesis import RecordedStep
from scars.synthesis.consolidate import consolidations, successes_of
from scars.synthesis.dsl.cost import Lambdas
from scars.synthesis.dsl.semantics import Classes, fires
from scars.synthesis.failure import Failure
from scars.synthesis.retirement import VerifiedSuccess, decide_retirement, scoped


class Equilibrator:
    """Admission, narrowing's retirements and revocation of one scars agent's scars (``narrowing``: its narrowing
    book, whose presumptions a consolidation must respect and whose counts record what narrowing replaced)."""

    def __init__(
        self,
        store: SchemaStore,
        *,
        classes: Classes | None,
        lambdas: Lambdas,
        merge_mode: MergeMode,
        consolidate: bool,
        min_counter_evidence: int,
        narrowing: NarrowingBook,
    ) -> None:
        self.store = store
        self.classes = classes
        self.lambdas = lambdas
        self.merge_mode = merge_mode
        self.consolidate = consolidate
        self.min_counter_evidence = min_counter_evidence
        self.narrowing = narrowing
        self.successes: list[tuple[int, VerifiedSuccess]] = []  # (t, success) since the last revocation check
        self.admitted_at: dict[
            str, int
        ] = {}  # scar id -> t of its admission (counter-evidence must be newer)
        self.merge_log: list[dict[str, Any]] = []

    def equilibrate(
        self,
        new: Scar,
        *,
        t: int,
        failures: Sequence[Failure],
        history: Sequence[RecordedStep],
        presumed: Callable[[str], tuple],
    ) -> None:
        """S_{t+1} = ILP-Merge(S_t ∪ {ΔS*}), written through the schema store. ``failures``: every verified failure
        of the run; ``history``: the recorded steps; ``presumed``: a told rule's narrowing presumptions."""
        # Coverage is owed to every recorded failure some in-scope candidate resolves — the whole run's failures,
        # not just the recent window: retiring a rule must not forget a failure (§4.5). Failures only resolved by
        # scars retired for scope have no candidate left and drop out with them.
        started = time.perf_counter()
        merged = [new, *self._consolidations(new, failures, history, presumed)]
        consolidation_seconds = time.perf_counter() - started
        candidates = [*self.store.scars, *merged]
        owed = owed_failures(failures, candidates, self.classes)
        before = tuple(s.rule for s in self.store.scars)
        report = equilibrate(
            self.store,
            merged,
            owed,
            [(step.context, step.actions) for step in history],
            self.classes,
            self.lambdas,
            merge_mode=self.merge_mode,
        )
        for sid in report.admitted:
            self.admitted_at[sid] = t
        result = report.result
        self.merge_log.append(
            {
                "t": t,
                "candidates": len(before) + 1,
                "active": len(result.active),
                "retired": list(report.retired),
                "refused_resurrection": list(report.refused_resurrection),
                "optimal": result.optimal,
                "seconds": result.wall_seconds,
                "uncovered": len(result.uncovered),
                "consolidation_seconds": consolidation_seconds,
            }
        )

    def _consolidations(
        self,
        new: Scar,
        failures: Sequence[Failure],
        history: Sequence[RecordedStep],
        presumed: Callable[[str], tuple],
    ) -> list[Scar]:
        """Scars that would replace several of the active ones plus ``new`` (``synthesis.consolidate``), each with
        its members' evidence (so it owes what they owed) and their common scope."""
        if not self.consolidate or self.merge_mode != "ilp":
            return []
        pool = [*self.store.scars, new]
        found = consolidations([s.rule for s in pool], failures, successes_of(history), self.classes)
        # what narrowing learned holds here too: a consolidation may not mask a proposal a member's scar blocked in
        # a lost episode (presumed safe until a failure refutes it), or it would undo the narrowing
        presumptions = [
            p
            for theta in sorted({str(e["theta"]) for s in pool for e in s.evidence if "theta" in e})
            for p in presumed(theta)
        ]
        out = []
        for c in found:
            if any(fires(c.rule, q, a, self.classes) for q, a in presumptions):
                self.narrowing.counts["consolidations_refused"] += 1
                continue
            members = [pool[i] for i in c.members]
            scopes = {m.scope.env_version for m in members}
            if len(scopes) != 1:
                continue  # scars of different world versions retire at different times: not one rule
            evidence = list(
                {json.dumps(e, sort_keys=True, default=str): e for m in members for e in m.evidence}.values()
            )
            settings = dict(members[0].provenance.synthesiser_settings)
            settings.pop("l_drift", None)  # no search estimated this rule's drift: the configured ε bounds it
            settings["consolidates"] = ",".join(sorted(m.id for m in members))
            out.append(
                Scar(
                    rule=c.rule,
                    evidence=tuple(evidence),
                    provenance=replace(
                        members[0].provenance,
                        synthesiser="consolidation",
                        synthesiser_settings=tuple(sorted(settings.items())),
                    ),
                    scope=replace(members[0].scope, confidence=min(m.scope.confidence for m in members)),
                )
            )
        return out

    def retire_narrowed(self, news: list[Scar], old: frozenset[str]) -> None:
        """A wide scar's narrowing syntheses are all back: it is retired *before* the merge when the new scars and
        the other active ones mask every failed action of every failure in its evidence (a failure the new scars
        re-attribute counts as attributed there) — the merge then chooses without it (with it, the cheaper wide
        rule would always win). Its failures stay owed: the merge must cover them, and Prop. 1 replays them. The
        retirement is the ledger's, with the reason; no resurrection brings the wide rule back without new
        evidence."""
        news = [n for n in news if n.id not in self.store.plane and self.store.may_admit(n)[0]]
        if not old or not news:
            return
        classes = self.classes
        mine = {
            x.id: x for n in news for x in (Failure.from_json(e) for e in n.evidence if "q" in e and "F" in e)
        }
        ever = [
            Failure.from_json(item)
            for e in self.store.ledger.events()
            if e.type == "scar_admitted"
            for item in e.payload.get("evidence", ())
            if "q" in item and "F" in item
        ]
        for sid in sorted(old):
            scar = next((s for s in self.store.scars if s.id == sid), None)
            if scar is None:
                continue
            rules = [n.rule for n in news] + [s.rule for s in self.store.scars if s.id not in old]
            # what it covers of every failure any scar ever brought as evidence (a scar a merge dropped still owes its
            # failures, and this one may be what covers them): each must stay covered without it
            owed = [f for f in ever if any(fires(scar.rule, f.q, a, classes) for a in f.F)]
            covered = all(
                any(fires(r, f.q, a, classes) for r in rules)
                for f in (mine.get(f.id, f) for f in owed)
                for a in f.F
            )
            if covered:
                ids = ", ".join(n.id for n in news)
                self.store.retire(
                    sid,
                    reason=f"narrowed: it blocked the model's proposals in lost tasks or left it no way forward; {ids} cover its failures",
                )
                self.narrowing.counts["replaced"] += 1

    def note_success(self, t: int, success: VerifiedSuccess) -> None:
        """A verified success at decision ``t``: counter-evidence against the scars admitted before it."""
        self.successes.append((t, success))

    def revoke_refuted(self) -> None:
        """Revocation by counter-evidence (§4.5): a verified success recorded *after* a scar's admission that the
        scar would have blocked refutes it (it can only happen where the mask leaked: soft mode, text rules, or a
        success the agent reached another way). Earlier successes are history from before the rule changed, not
        counter-evidence. A revoked id never returns without new evidence (the ledger's no-resurrection check),
        which is what keeps admission and revocation from oscillating.

        Each success is checked once (the list is cleared here), and only against the scars that fire on it: the
        control plane's index answers that (the same ``fires``, by mask key and the guards' indexed values), so the
        cost follows the successes, not the number of scars."""
        if not self.successes:
            return
        plane = self.store.plane
        newest: dict[str, int] = {}  # scar id -> t of the newest success it fires on
        for t, success in self.successes:
            for sid in plane.fired_rules(success.context, success.action):
                newest[sid] = t
        if not any(sid in plane and t > self.admitted_at.get(sid, -1) for sid, t in newest.items()):
            self.successes.clear()  # no scar has a success after its admission (most episodes): nothing to decide
            return
        for sid, scar in zip(plane.active_ids, plane.scars, strict=True):
            since = self.admitted_at.get(sid, -1)
            if newest.get(sid, since) <= since:
                continue  # no success recorded after its admission fires on it: nothing refutes it
            newer = [s for t, s in self.successes if t > since]
            decision = decide_retirement(
                [scoped(scar)],
                successes=newer,
                classes=self.classes,
                min_counter_evidence=self.min_counter_evidence,
            )
            if decision.revoke:
                self.store.apply_retirement(decision)
        self.successes.clear()
