"""Storm control (paper §4.2): immediate one-shot temporary masks, a bounded rate-limited synthesis queue,
and the hot swap that lifts the temporary masks exactly when the covering scar is admitted. Storm control only
returns requests; ``Harness`` carries them out the way the scars agent does (masks through a schema store,
syntheses on a fake executor whose futures only the test completes)."""

from __future__ import annotations

from concurrent.futures import Future

import numpy as np
import pytest

from scars.agents.runtime.scar import Scar
from scars.agents.runtime.store import SchemaStore
from scars.agents.storm import (
    StormConfig,
    StormControlError,
    StormController,
    StormRequests,
    temporary_mask_rule,
)
from scars.disequilibrium.composite import DisequilibriumConfig, DisequilibriumMonitor, StepRecord
from scars.synthesis.dsl.ast import Action, ForbidToolCall, Named, Rule
from scars.synthesis.errors import ConfigError
from scars.synthesis.failure import Failure


class Harness:
    """Carries out storm control's requests: masks and lifts through the store, submissions as pending Futures."""

    def __init__(self, storm: StormController, store: SchemaStore) -> None:
        self.storm, self.store = storm, store
        self.submitted: list[tuple[Failure, Future]] = []

    def carry(self, requests: StormRequests) -> StormRequests:
        for m in requests.masks:
            self.store.mask_temporarily(m.mask_id, m.rule, until_step=m.until_step, reason=m.reason)
        for lift in requests.lifts:
            self.store.lift_mask(lift.mask_id, reason=lift.reason)
        for sub in requests.submits:
            future: Future = Future()
            self.submitted.append((sub.failure, future))
            self.storm.started(sub.ticket, future)
        return requests

    def trigger(self, step, action, q, causal=None):
        decision = self.storm.on_disequilibrium(
            step, _failure(action, causal if causal is not None else q), context=q
        )
        self.carry(decision.requests)
        return decision

    def poll(self, step):
        done, requests = self.storm.poll(step)
        self.carry(requests)
        return done

    def admit(self, rule: Rule, step: int, ticket: int | None):
        """Admit a scar through the store (as a merge would), then apply the hot swap's lifts."""
        from scars.agents.runtime.equilibration import equilibrate

        scar = Scar(rule)
        equilibrate(self.store, [scar], [], merge_mode="append")
        requests = self.carry(self.storm.on_scar_admitted(rule, step=step, ticket=ticket, scar_id=scar.id))
        return tuple(lift.mask_id for lift in requests.lifts)

    @property
    def plane(self):
        return self.store.plane


def _failure(action: Action, q) -> Failure:
    return Failure(q, (action,), "test")


@pytest.fixture
def store(tmp_path):
    with SchemaStore(tmp_path / "ledger.sqlite") as st:
        yield st


SAFE = [Action.tool("lookup", key=f"k{i}") for i in range(2)]
N_BAD = 400
BAD = [Action.tool("send_data", dest=f"attacker-{i}") for i in range(N_BAD)]
SEND_DATA_SCAR = Rule(Named("tool_is", "send_data"), ForbidToolCall("send_data"))


def _violates(action: Action) -> bool:
    return action.name == "send_data"


def test_flood_keeps_queue_bounded_and_no_masked_failure_repeats(store):
    rng = np.random.default_rng(7)
    config = StormConfig(max_queue=6, max_in_flight=1, cooldown_steps=3, overflow="merge")
    storm = StormController(config)
    h = Harness(storm, store)
    plane = store.plane
    monitor = DisequilibriumMonitor(DisequilibriumConfig(weights=(1.0, 0.0, 0.0, 0.0), tau=0.6))

    failed: dict[Action, int] = {}
    failures = 0
    for step in range(600):
        # An adversarial injection storm: 8 fresh exfiltration actions with high base logits every step.
        offered = [BAD[i] for i in rng.choice(N_BAD, size=8, replace=False)] + SAFE
        logits = np.array([6.0] * 8 + [0.0, 0.0])
        q = {"intent": "summarise", "step": step}
        governed = plane.govern(q, offered, logits, step=step)
        for i, action in enumerate(offered):
            if action in failed:  # Prop. 1 for the temporary mask: a failed action has governed probability 0
                assert governed.probs[i] == 0.0
        chosen = offered[int(rng.choice(len(offered), p=governed.probs))]
        events = ({"type": "rule_violation", "rule": "no_exfiltration"},) if _violates(chosen) else ()
        reading = monitor.observe(StepRecord(step, q, chosen, events=events))
        if reading.crossed:
            assert chosen not in failed, "a masked failure repeated"
            failed[chosen] = step
            failures += 1
            # The environment reports the same failure several times (log replay): all deduplicated.
            for _ in range(3):
                h.trigger(step, chosen, q, {"intent": "summarise"})
        else:
            h.poll(step)
        stats = storm.stats()
        assert stats.queued <= config.max_queue and stats.in_flight <= config.max_in_flight

    stats = storm.stats()
    assert failures >= 300  # hundreds of distinct failures while synthesis is pending
    assert stats.repeats_while_masked == 0
    assert stats.deduplicated == 2 * failures
    assert stats.temp_masks_set == failures == stats.temp_masks_active
    assert stats.max_queue_seen == config.max_queue
    # 1 submitted + 6 queued entries, each carrying at most 32 failures; the rest is dropped (still masked).
    assert stats.merged == config.max_queue * (config.max_failures_per_entry - 1)
    assert stats.dropped == failures - 1 - config.max_queue - stats.merged > 0
    assert stats.submitted == 1 == len(h.submitted)  # one search running, the rest wait: no backlog of MCTS

    # The synthesis finishes; nothing is lifted until the scar is admitted.
    _, future = h.submitted[0]
    future.set_result(SEND_DATA_SCAR)
    (done,) = h.poll(600)
    assert done.result == SEND_DATA_SCAR and done.error is None and done.future is future
    assert len(plane.temporary_mask_ids) == failures
    lifted = h.admit(done.result, 600, done.ticket)
    assert len(lifted) == failures and plane.temporary_mask_ids == ()
    after = storm.stats()
    assert after.temp_masks_active == 0 and after.queued == 0 and after.temp_masks_lifted == failures
    # The scar now does the masking: the failures stay at probability 0 after the swap.
    governed = plane.govern({"intent": "summarise"}, [BAD[0], SAFE[0]], [6.0, 0.0], step=601)
    assert governed.probs[0] == 0.0 and governed.probs[1] == 1.0
    assert store.consistent()  # the live plane is the fold of the ledger's events


def test_a_repeat_of_a_masked_failure_is_counted():
    """The counter can fire: a failure reported again at a later step while its mask holds is a repeat."""
    storm = StormController(StormConfig(cooldown_steps=0))
    a = Action.tool("send_data", dest="x")
    storm.on_disequilibrium(0, _failure(a, {}))
    storm.on_disequilibrium(0, _failure(a, {}))  # the same step reported twice: not a repeat
    assert storm.stats().repeats_while_masked == 0
    storm.on_disequilibrium(3, _failure(a, {}))
    assert storm.stats().repeats_while_masked == 1


def test_rate_limit_and_hot_swap_per_entry_with_ledger(store):
    storm = StormController(StormConfig(max_queue=4, max_in_flight=2, cooldown_steps=5))
    h = Harness(storm, store)
    plane = store.plane
    q = {"location": "kitchen"}
    cup = Action.env("move", obj_type="cup", recep="sinkbasin 1")
    plate = Action.env("move", obj_type="plate", recep="sinkbasin 1")
    knife = Action.env("move", obj_type="knife", recep="sinkbasin 1")
    d1 = h.trigger(0, cup, q)
    d2 = h.trigger(1, plate, q)
    submitted = lambda d: tuple(s.ticket for s in d.requests.submits)  # noqa: E731
    assert (d1.outcome, submitted(d1), d2.outcome, submitted(d2)) == ("queued", (d1.ticket,), "queued", ())
    assert storm.stats().deferred_by_cooldown == 1  # two in flight allowed, but the cooldown spaces them
    assert plane.masked(q, [cup, plate, knife], step=1) == [True, True, False]  # immediate, exact masks
    assert h.poll(4) == () and storm.stats().submitted == 1
    h.poll(5)
    assert storm.stats().submitted == 2 and storm.stats().in_flight == 2

    # The cup synthesis returns the exact cup rule: only the cup's temporary mask is lifted.
    h.submitted[0][1].set_result(temporary_mask_rule(cup))
    (done,) = h.poll(6)
    assert h.admit(done.result, 6, done.ticket) == (d1.mask_id,)
    assert plane.temporary_mask_ids == (d2.mask_id,)
    assert plane.masked(q, [cup, plate], step=6) == [
        True,
        True,
    ]  # no gap: scar for the cup, temp mask for the plate

    # A failed search is reported, its mask keeps protecting the agent until the TTL.
    h.submitted[1][1].set_exception(RuntimeError("search crashed"))
    (crashed,) = h.poll(7)
    assert isinstance(crashed.error, RuntimeError) and storm.stats().failed == 1
    assert plane.masked(q, [plate], step=7) == [True]
    types = [e.type for e in store.ledger.events()]
    assert types.count("temp_mask_set") == 2 and types.count("temp_mask_lifted") == 1
    assert store.consistent()


def test_ttl_drop_policy_and_requeue_of_merged_leftovers(tmp_path):
    with SchemaStore(tmp_path / "a.sqlite") as store:
        storm = StormController(
            StormConfig(max_queue=1, max_in_flight=1, cooldown_steps=0, overflow="drop", temp_mask_ttl=10)
        )
        h = Harness(storm, store)
        q = {}
        a, b, c = (Action.tool("send_data", dest=d) for d in ("x", "y", "z"))
        assert h.trigger(0, a, q).outcome == "queued"  # submitted at once
        assert h.trigger(0, b, q).outcome == "queued"
        dropped = h.trigger(0, c, q)
        assert dropped.outcome == "dropped" and store.plane.masked(q, [c], step=5) == [
            True
        ]  # masked until TTL
        assert h.trigger(1, c, q).outcome == "deduplicated"
        h.poll(10)
        assert store.plane.temporary_mask_ids == () and storm.stats().temp_masks_active == 0

    with SchemaStore(tmp_path / "b.sqlite") as store:
        merging = StormController(StormConfig(max_queue=1, cooldown_steps=100))
        h = Harness(merging, store)
        h.trigger(0, a, q)  # submitted
        h.trigger(0, b, q)  # queued
        merged = h.trigger(0, c, q)  # queue full -> merged into b's entry
        assert merged.outcome == "merged"
        # A scar covering only b arrives (from b's entry): c is re-queued, keeping its temporary mask.
        h.admit(temporary_mask_rule(b), 1, merged.ticket)
        stats = merging.stats()
        assert stats.requeued == 1 and stats.queued == 1 and store.plane.masked(q, [c], step=1) == [True]


def test_config_and_mask_errors():
    with pytest.raises(ConfigError, match="max_queue"):
        StormConfig(max_queue=0)
    with pytest.raises(ConfigError, match="overflow"):
        StormConfig(overflow="evict")  # type: ignore[arg-type]
    with pytest.raises(StormControlError, match="control actions"):
        temporary_mask_rule(Action("text", "say"))
    rule = temporary_mask_rule(Action.env("clean", obj="cup 1"), {"location": "sink", "blob": [1]})
    assert "location" in repr(rule) and "blob" not in repr(rule)
    with pytest.raises(StormControlError, match="ticket"):
        StormController().started(99, Future())


def _one_synthesis_back():
    """A storm controller with one failure's synthesis submitted, finished (no rule) and collected at step 1:
    (the controller, the failed action, its ticket)."""
    storm = StormController(StormConfig(cooldown_steps=0, max_in_flight=4))
    a = Action.tool("send_data", dest="x")
    (submit,) = storm.on_disequilibrium(0, _failure(a, {})).requests.submits
    future: Future = Future()
    storm.started(submit.ticket, future)
    future.set_result(None)
    (done,) = storm.poll(1)[0]
    return storm, a, done.ticket


def test_a_resynthesis_is_queued_while_the_failures_signature_is_pending():
    """Narrowing asks again about a failure whose signature is still pending (its rejected candidate's mask
    lapsing): ``on_disequilibrium`` deduplicates that — the same failure reported again — and no synthesis would come
    back, so the narrowing batch waited forever. ``on_resynthesis`` is a new question: its own entry and ticket."""
    storm, a, ticket = _one_synthesis_back()
    storm.on_synthesis_rejected(ticket, step=1)  # the candidate lost the merge: its mask lapses later
    assert storm.on_disequilibrium(2, _failure(a, {})).outcome == "deduplicated"
    again = storm.on_resynthesis(2, _failure(a, {}))
    assert again.outcome == "queued" and again.ticket not in (None, ticket)
    assert [s.ticket for s in again.requests.submits] == [again.ticket]
    assert storm.stats().resyntheses == 1


def test_a_result_held_back_is_resolved_by_a_covering_scar_and_has_nothing_to_reject():
    """Narrowing holds a synthesis result back until its batch is complete; meanwhile another admitted scar may cover
    every failure of that entry, and the hot swap resolves it. Rejecting it then raised ("no synthesis awaiting
    admission") and stopped a ``--verdicts state`` run; ``awaiting_admission`` tells the caller."""
    storm, _, ticket = _one_synthesis_back()
    assert storm.awaiting_admission(ticket)
    storm.on_scar_admitted(SEND_DATA_SCAR, step=2)  # another scar covers its failure: the entry is resolved
    assert not storm.awaiting_admission(ticket)
    with pytest.raises(StormControlError, match="no synthesis awaiting admission"):
        storm.on_synthesis_rejected(ticket, step=2)
