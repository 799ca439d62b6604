"""The scars agent's narrowing bookkeeping: which proposals scars blocked, and which narrowing syntheses are pending.

What a blocked proposal says about a scar, and how it becomes a presumption, is ``synthesis.narrowing``'s; this
module keeps the agent's record of them across decisions and episodes and decides *when* to narrow:
- at each governed decision, the model's proposals masked by scars alone (``on_govern``), and whether the scars
  left the model no unmasked way forward (narrowing at once, in the same episode: ``at_once``);
- at a lost episode's end, the episode's blocked proposals not narrowed at once already (``lost``);
- per told rule, the blocked proposals of lost episodes (the presumptions of its next synthesis: ``presumptions``);
- per narrowing synthesis in flight (its fragment's id), the wide scars it would replace; a wide scar's batch waits
  for all of its narrowing syntheses (``arrived``) before the agent decides on retiring it.

It decides nothing about admission: the agent extracts the fragments, submits the syntheses, and takes the batches
this book hands back to the merge.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from scars.agents.runtime.control import ControlPlane, Governed
from scars.agents.runtime.scar import Scar
from scars.envs.api import Decision
from scars.synthesis.narrowing import BlockedProposal, blocked_presumptions, situation


@dataclass(frozen=True)
class NarrowedBatch:
    """The wide scars whose narrowing syntheses are all back (``ready``, sorted ids) and the scars those syntheses
    brought, each with its storm ticket, once each."""

    ready: tuple[str, ...]
    scars: tuple[tuple[Scar, int], ...]


class NarrowingBook:
    """The blocked proposals and the pending narrowing syntheses of one scars agent (``enabled``: its ``narrow``
    setting; ``bookkeeping``: the world's bookkeeping variables, left out of a situation)."""

    def __init__(self, *, enabled: bool, bookkeeping: Collection[str]) -> None:
        self.enabled = enabled
        self.bookkeeping = bookkeeping
        # the proposals scars blocked this episode; per told rule, those of lost episodes; per narrowing synthesis in
        # flight (its fragment's id), the scars it would replace
        self._blocked_now: list[BlockedProposal] = []
        self._blocked: dict[str, list[BlockedProposal]] = {}
        self._pending: dict[str, frozenset[str]] = {}
        self._wait: dict[str, set[str]] = {}  # wide scar id -> its narrowing syntheses still in flight
        self._results: dict[str, list[tuple[Scar, int]]] = {}  # wide scar id -> (scar, ticket) arrived
        self._governed_t = -1
        # narrowing at once: the first governing's logits of this decision (a second governing with other logits
        # is the model's re-plan), the decision that left the model no way forward, and the blocked situations
        # narrowed at once in this episode (the episode's end does not narrow them again)
        self._first_logits: np.ndarray = np.zeros(0)
        self._stuck: BlockedProposal | None = None
        self._narrowed_now: set[tuple] = set()
        # per scar, the situations in which it masked the model's step in this episode
        self._refused_now: dict[str, set[tuple]] = {}
        self._replanned_now = False  # whether the model re-planned around a mask in this episode
        self.counts = {
            "lost_episodes_with_blocks": 0,
            "stuck_decisions": 0,
            "syntheses": 0,
            "syntheses_at_once": 0,
            "syntheses_at_episode_end": 0,
            "syntheses_not_run": 0,
            "replaced": 0,
            "consolidations_refused": 0,
        }

    # ---------------------------------------------------------------------------------- at each decision
    def on_govern(
        self, decision: Decision, logits: np.ndarray, governed: Governed, plane: ControlPlane
    ) -> None:
        """One governing of a decision by ``plane``: the first governs the model's own proposal, a later one with
        other logits is its re-plan around what was masked."""
        if decision.t != self._governed_t:
            self._governed_t = decision.t
            self._first_logits = logits
            self._note_blocked(decision, logits, governed, plane)
            self._note_stuck(decision, logits, governed, plane, replanned=False)
        elif not np.array_equal(logits, self._first_logits):  # the model re-planned around what was masked
            self._replanned_now = True
            self._note_stuck(decision, logits, governed, plane, replanned=True)

    def _note_blocked(
        self, decision: Decision, logits: np.ndarray, governed: Governed, plane: ControlPlane
    ) -> None:
        """The model's proposals masked by scars alone, kept for narrowing: its most likely action and its runner-up
        (its next choice, when the model ranks it above the bulk of the actions: the alternative route it would
        take). The habitual step is often the failure itself — the scar is right to block it — while the scar's
        width shows on the alternative it also blocks (another basin, another microwave)."""
        if not self.enabled or not len(logits):
            return
        if not governed.fired:
            return  # nothing was masked (most decisions): an action is masked exactly when some rule fired on it
        masked = governed.masked
        scores = np.asarray(logits, dtype=np.float64)
        best = _model_step(scores)
        if best is None:
            return
        proposals = [best]
        if len(scores) > 2:
            second = int(np.argsort(-scores, kind="stable")[1])
            if (masked[best] or masked[second]) and scores[second] > float(np.median(scores)):
                proposals.append(second)
        if not any(masked[i] for i in proposals):
            return  # no proposal was masked
        fired = dict(governed.fired)
        for i in proposals:
            ids = fired.get(i, ())
            if not ids:
                continue
            scars = frozenset(x for x in ids if x in plane)
            if len(scars) == len(set(ids)):  # H, a temporary mask or a fallback did not take part
                self._blocked_now.append(
                    BlockedProposal(
                        scars, decision.context, decision.actions[i], (decision.episode, decision.step)
                    )
                )

    def _note_stuck(
        self,
        decision: Decision,
        logits: np.ndarray,
        governed: Governed,
        plane: ControlPlane,
        *,
        replanned: bool,
    ) -> None:
        """Whether the scars in force leave the model no unmasked way forward (narrowing at once). The model's step
        (its most likely action) is masked by scars alone, and
        - it re-planned around what the controller masked at this decision (a second governing with new logits,
          ``experiments.loop.decide``) and the step it now proposes is masked again; or
        - it has re-planned around a mask in this episode, and a scar that masked its step earlier in the episode
          masks it again in another situation (another action, or another categorical context: ``situation``): it
          went its new way (put the load down, walked to the other basin) and is refused by the same rule — the
          same step proposed again where it was refused is its habit coming back, and without a re-plan a changed
          situation is the world's doing (a commons seat's over-harvest once the group agreed a limit); or
        - every admissible action is masked (the fallback).
        H and temporary masks may not take part (they are not narrowed). The situation is kept for the agent's
        ``observe``, which starts the narrowing of the scars' told rules at once (``at_once``)."""
        if not self.enabled or not len(logits) or not governed.fired:
            return
        best = _model_step(np.asarray(logits, dtype=np.float64))
        if best is None:
            return
        ids = dict(governed.fired).get(best, ())
        scars = frozenset(x for x in ids if x in plane)
        if not scars or len(scars) != len(set(ids)):
            return  # its step is free, or H, a temporary mask or a fallback took part
        blocked = BlockedProposal(
            scars, decision.context, decision.actions[best], (decision.episode, decision.step)
        )
        where = situation(blocked, self.bookkeeping)[1:]
        # refused again by a scar that refused it earlier in this episode, in another situation, after the model
        # re-planned (a new way); the same proposal where it was refused is its habit coming back, and a model that
        # never re-planned is only meeting its habit's step in a changed world (a commons seat's over-harvest once
        # the group agreed a limit)
        again = self._replanned_now and any(
            where not in self._refused_now.get(sid, (where,)) for sid in scars
        )
        for sid in scars:
            self._refused_now.setdefault(sid, set()).add(where)
        if replanned or again or governed.fallback is not None:
            self._stuck = blocked

    def at_once(self, at: tuple[int, int]) -> list[BlockedProposal]:
        """The blocked proposals to narrow from now, when the decision at ``at`` (episode, step) left the model no
        unmasked way forward (issue 40 #3): the episode's blocked proposals of the scars that masked its step, the
        stuck step among them, as at a lost episode's end. A situation is narrowed at once once per episode, and
        the episode's end does not narrow it again. Empty: nothing to narrow now."""
        stuck, self._stuck = self._stuck, None
        if stuck is None or stuck.at != at:
            return []
        self.counts["stuck_decisions"] += 1
        key = situation(stuck, self.bookkeeping)
        if key in self._narrowed_now:
            return []  # narrowed at once in this episode already: the same evidence would ask the same question
        self._blocked_now.append(stuck)
        used = [
            b
            for b in self._blocked_now
            if b.scars & stuck.scars and situation(b, self.bookkeeping) not in self._narrowed_now
        ]
        self._narrowed_now.update(situation(b, self.bookkeeping) for b in used)
        return used

    # ---------------------------------------------------------------------------------- at an episode's end
    def lost(self) -> list[BlockedProposal]:
        """The episode was lost: its blocked proposals to narrow from (a blocked situation already narrowed at once
        in this episode is not narrowed again for the loss)."""
        rest = [b for b in self._blocked_now if situation(b, self.bookkeeping) not in self._narrowed_now]
        if rest:
            self.counts["lost_episodes_with_blocks"] += 1
        return rest

    def new_episode(self) -> None:
        self._blocked_now = []
        self._narrowed_now = set()
        self._refused_now = {}
        self._replanned_now = False

    # ---------------------------------------------------------------------------------- narrowing syntheses
    def told_rules(self, blocked: Iterable[BlockedProposal], scars: Sequence[Scar]) -> dict[str, set[str]]:
        """Per told rule of the scars (``scars``: the active ones) that blocked ``blocked``, the ids of those scars;
        the proposals are kept as that rule's presumptions from now on."""
        by_id = {s.id: s for s in scars}
        rules: dict[str, set[str]] = {}
        for b in blocked:
            for sid in b.scars:
                scar = by_id.get(sid)
                for theta in {str(e["theta"]) for e in (scar.evidence if scar else ()) if "theta" in e}:
                    rules.setdefault(theta, set()).add(sid)
                    self._blocked.setdefault(theta, []).append(b)
        return rules

    def has_blocked(self, theta: str) -> bool:
        """Whether the told rule has blocked proposals (presumptions for its next synthesis)."""
        return bool(self._blocked.get(theta))

    def presumptions(self, theta: str, context, failures: Sequence[tuple]) -> tuple:
        """The told rule's blocked proposals as presumptions around a failure's context (``failures``: the rule's
        recorded failures as (context, action), which refute a presumption: ``blocked_presumptions``)."""
        blocked = self._blocked.get(theta)
        if not blocked:
            return ()
        return blocked_presumptions(context, failures, blocked, ignore=frozenset(self.bookkeeping))

    def is_pending(self, failure_id: str) -> bool:
        """Whether a narrowing synthesis of this fragment is in flight."""
        return failure_id in self._pending

    def started(self, failure_id: str, scars: Iterable[str], when: str) -> None:
        """A narrowing synthesis of the fragment ``failure_id`` was handed to storm control, to replace ``scars``
        (``when``: ``at_once`` or ``at_episode_end``)."""
        sids = frozenset(scars)
        self._pending[failure_id] = sids
        for sid in sids:
            self._wait.setdefault(sid, set()).add(failure_id)
        self.counts["syntheses"] += 1
        self.counts[f"syntheses_{when}"] += 1

    def not_run(self, failure_id: str) -> NarrowedBatch | None:
        """Storm control merged or dropped the synthesis (a full queue): none of its own will come back, and the
        wide scars' batch must not wait for one forever."""
        self.counts["syntheses_not_run"] += 1
        return self.arrived(failure_id, None)

    def arrived(self, failure_id: str, result: tuple[Scar, int] | None) -> NarrowedBatch | None:
        """A narrowing synthesis came back (``result`` = its scar and ticket; None: nothing admissible). A wide scar
        may hold the failures of several told rules (a consolidation), each narrowed by its own synthesis; the wide
        scar's batch waits for all of them. None: not a narrowing synthesis, or its batch still waits."""
        olds = self._pending.pop(failure_id, None)
        if olds is None:
            return None
        for sid in olds:
            self._wait.get(sid, set()).discard(failure_id)
            if result is not None:
                self._results.setdefault(sid, []).append(result)
        ready = sorted(sid for sid in olds if not self._wait.get(sid))
        batch: dict[str, tuple[Scar, int]] = {}
        for sid in ready:
            self._wait.pop(sid, None)
            for scar, ticket in self._results.pop(sid, []):
                batch.setdefault(scar.id, (scar, ticket))
        if not ready:
            return None  # waits for the rest of its batch
        tickets = {ticket for _, ticket in batch.values()}
        for sid in list(self._results):  # a scar answering for several wide ones goes to the merge once
            self._results[sid] = [r for r in self._results[sid] if r[1] not in tickets]
        return NarrowedBatch(tuple(ready), tuple(batch.values()))


def _model_step(scores: np.ndarray) -> int | None:
    """The model's step: its most likely action; None for flat logits (a shield's zeros, a generate-mode model's first
    call), which propose nothing in particular."""
    best = int(np.argmax(scores))
    return None if scores[best] <= scores.min() else best
