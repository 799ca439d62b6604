"""Storm control (paper §4.2): immediate one-shot temporary masks, a bounded rate-limited synthesis queue,
and the hot swap that lifts the temporary masks exactly when the covering scar is admitted."""

from __future__ import annotations

from concurrent.futures import Future

import numpy as np
import pytest

from agents.runtime.control import ControlPlane
from agents.runtime.ledger import Ledger
from agents.runtime.scar import Scar
from agents.storm import StormConfig, StormControlError, StormController, temporary_mask_rule
from disequilibrium.composite import DisequilibriumConfig, DisequilibriumMonitor, StepRecord
from synthesis.dsl.ast import Action, ForbidToolCall, Named, Rule
from synthesis.errors import ConfigError


class PendingSynthesis:
    """A fake ``submit``: every call returns a Future that only the test completes (synthesis stays pending)."""

    def __init__(self) -> None:
        self.submitted: list[tuple[object, Future]] = []

    def __call__(self, fragment):
        future: Future = Future()
        self.submitted.append((fragment, future))
        return future


class Fragment:
    def __init__(self, q, action):
        self.q = q
        self.F = (action,)


SAFE = [Action.tool("lookup", key=f"k{i}") for i in range(2)]
N_BAD = 400
BAD = [Action.tool("send_data", dest=f"attacker-{i}") for i in range(N_BAD)]
SEND_DATA_SCAR = Rule(Named("tool_is", "send_data"), ForbidToolCall("send_data"))


def _violates(action: Action) -> bool:
    return action.name == "send_data"


def test_flood_keeps_queue_bounded_and_no_masked_failure_repeats():
    rng = np.random.default_rng(7)
    plane = ControlPlane()
    pending = PendingSynthesis()
    config = StormConfig(max_queue=6, max_in_flight=1, cooldown_steps=3, overflow="merge")
    storm = StormController(plane, pending, config)
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
                storm.on_disequilibrium(step, chosen, q, Fragment({"intent": "summarise"}, chosen))
        else:
            storm.poll(step)
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
    assert (
        stats.submitted == 1 == len(pending.submitted)
    )  # one search running, the rest wait: no backlog of MCTS

    # The synthesis finishes; nothing is lifted until the scar is admitted.
    fragment, future = pending.submitted[0]
    future.set_result(SEND_DATA_SCAR)
    (done,) = storm.poll(600)
    assert done.result == SEND_DATA_SCAR and done.error is None
    assert len(plane.temporary_mask_ids) == failures
    scar = Scar(done.result)
    with pytest.raises(StormControlError, match="not active"):
        storm.on_scar_admitted(scar, step=600, ticket=done.ticket)
    plane.add(scar)
    lifted = storm.on_scar_admitted(scar, step=600, ticket=done.ticket)
    assert len(lifted) == failures and plane.temporary_mask_ids == ()
    after = storm.stats()
    assert after.temp_masks_active == 0 and after.queued == 0 and after.temp_masks_lifted == failures
    # The scar now does the masking: the failures stay at probability 0 after the swap.
    governed = plane.govern({"intent": "summarise"}, [BAD[0], SAFE[0]], [6.0, 0.0], step=601)
    assert governed.probs[0] == 0.0 and governed.probs[1] == 1.0


def test_rate_limit_and_hot_swap_per_entry_with_ledger(tmp_path):
    plane = ControlPlane()
    pending = PendingSynthesis()
    ledger = Ledger(tmp_path / "ledger.sqlite")
    storm = StormController(
        plane, pending, StormConfig(max_queue=4, max_in_flight=2, cooldown_steps=5), ledger=ledger
    )
    q = {"location": "kitchen"}
    cup = Action.env("move", obj_type="cup", recep="sinkbasin 1")
    plate = Action.env("move", obj_type="plate", recep="sinkbasin 1")
    knife = Action.env("move", obj_type="knife", recep="sinkbasin 1")
    d1 = storm.on_disequilibrium(0, cup, q, None)
    d2 = storm.on_disequilibrium(1, plate, q, None)
    assert (d1.outcome, d1.submitted, d2.outcome, d2.submitted) == ("queued", (d1.ticket,), "queued", ())
    assert storm.stats().deferred_by_cooldown == 1  # two in flight allowed, but the cooldown spaces them
    assert plane.masked(q, [cup, plate, knife], step=1) == [True, True, False]  # immediate, exact masks
    assert storm.poll(4) == () and storm.stats().submitted == 1
    storm.poll(5)
    assert storm.stats().submitted == 2 and storm.stats().in_flight == 2

    # The cup synthesis returns the exact cup rule: only the cup's temporary mask is lifted.
    pending.submitted[0][1].set_result(temporary_mask_rule(cup))
    (done,) = storm.poll(6)
    cup_scar = Scar(done.result)
    plane.add(cup_scar)
    assert storm.on_scar_admitted(cup_scar, step=6, ticket=done.ticket) == (d1.mask_id,)
    assert plane.temporary_mask_ids == (d2.mask_id,)
    assert plane.masked(q, [cup, plate], step=6) == [
        True,
        True,
    ]  # no gap: scar for the cup, temp mask for the plate

    # A failed search is reported, its mask keeps protecting the agent until the TTL.
    pending.submitted[1][1].set_exception(RuntimeError("search crashed"))
    (crashed,) = storm.poll(7)
    assert isinstance(crashed.error, RuntimeError) and storm.stats().failed == 1
    assert plane.masked(q, [plate], step=7) == [True]
    types = [e.type for e in ledger.events()]
    assert types.count("temp_mask_set") == 2 and types.count("temp_mask_lifted") == 1


def test_ttl_drop_policy_and_requeue_of_merged_leftovers():
    plane = ControlPlane()
    pending = PendingSynthesis()
    storm = StormController(
        plane,
        pending,
        StormConfig(max_queue=1, max_in_flight=1, cooldown_steps=0, overflow="drop", temp_mask_ttl=10),
    )
    q = {}
    a, b, c = (Action.tool("send_data", dest=d) for d in ("x", "y", "z"))
    assert storm.on_disequilibrium(0, a, q, None).outcome == "queued"  # submitted at once
    assert storm.on_disequilibrium(0, b, q, None).outcome == "queued"
    dropped = storm.on_disequilibrium(0, c, q, None)
    assert dropped.outcome == "dropped" and plane.masked(q, [c], step=5) == [True]  # still masked until TTL
    assert storm.on_disequilibrium(1, c, q, None).outcome == "deduplicated"
    storm.poll(10)
    assert plane.temporary_mask_ids == () and storm.stats().temp_masks_active == 0

    merging = StormController(
        ControlPlane(), PendingSynthesis(), StormConfig(max_queue=1, cooldown_steps=100)
    )
    merging.on_disequilibrium(0, a, q, None)  # submitted
    merging.on_disequilibrium(0, b, q, None)  # queued
    merged = merging.on_disequilibrium(0, c, q, None)  # queue full -> merged into b's entry
    assert merged.outcome == "merged"
    ticket_b = merged.ticket
    # A scar covering only b arrives (from b's entry): c is re-queued, keeping its temporary mask.
    b_rule = temporary_mask_rule(b)
    merging.plane.add(Scar(b_rule))
    merging.on_scar_admitted(b_rule, step=1, ticket=ticket_b)
    stats = merging.stats()
    assert stats.requeued == 1 and stats.queued == 1 and merging.plane.masked(q, [c], step=1) == [True]


def test_config_and_mask_errors():
    with pytest.raises(ConfigError, match="max_queue"):
        StormConfig(max_queue=0)
    with pytest.raises(ConfigError, match="overflow"):
        StormConfig(overflow="evict")  # type: ignore[arg-type]
    with pytest.raises(StormControlError, match="control actions"):
        temporary_mask_rule(Action("text", "say"))
    rule = temporary_mask_rule(Action.env("clean", obj="cup 1"), {"location": "sink", "blob": [1]})
    assert "location" in repr(rule) and "blob" not in repr(rule)
