"""End to end (paper §4.2): monitor → storm control → background MCTS synthesis → admission → hot swap, in a
commons-like harvest loop. The agent keeps acting while synthesis runs; no failure repeats; the temporary masks are
lifted when the mature scar is admitted, which gives back the harvests that are safe at a full pool."""

from __future__ import annotations

import numpy as np

from scars.agents.runtime.equilibration import equilibrate
from scars.agents.runtime.scar import Scar
from scars.agents.runtime.store import SchemaStore
from scars.agents.storm import StormConfig, StormController, StormRequests
from scars.disequilibrium.composite import DisequilibriumConfig, DisequilibriumMonitor, StepRecord
from scars.synthesis.dsl.ast import Action
from scars.synthesis.executors import InProcessExecutor
from scars.synthesis.fragments import RecordedStep, build_dataset, extract_fragment

ACTIONS = (Action.tool("harvest", amount=5), Action.tool("harvest", amount=10), Action.tool("rest"))
LOGITS = (1.0, 1.2, 0.2)  # the base policy likes to harvest


def violates(q, a) -> bool:
    """Harvesting below 20 tons collapses the commons."""
    pool = q.get("pool_resource_level")
    return a.kind == "tool" and a.name == "harvest" and isinstance(pool, int | float) and pool < 20


def test_storm_pipeline_with_real_synthesis(tmp_path):
    store = SchemaStore(tmp_path / "ledger.sqlite")
    plane = store.plane
    executor = InProcessExecutor()
    recorded: list[RecordedStep] = []
    storm = StormController(StormConfig(max_queue=4, cooldown_steps=0))

    def carry(requests: StormRequests) -> StormRequests:
        for m in requests.masks:
            store.mask_temporarily(m.mask_id, m.rule, until_step=m.until_step, reason=m.reason)
        for lift in requests.lifts:
            store.lift_mask(lift.mask_id, reason=lift.reason)
        for sub in requests.submits:
            data = build_dataset(list(recorded), violates, sub.failure)
            storm.started(sub.ticket, executor.submit(data, sub.failure, seed=0))
        return requests

    monitor = DisequilibriumMonitor(DisequilibriumConfig(weights=(1.0, 0.0, 0.0, 0.0), tau=0.6))
    pools = [100, 60, 40, 30, 15, 8]
    failures: list[tuple[int, Action]] = []
    for month, pool in enumerate(pools):
        q = {"pool_resource_level": pool, "month": month}
        governed = plane.govern(q, ACTIONS, LOGITS, step=month)
        chosen = int(np.argmax(governed.probs))
        violated = violates(q, ACTIONS[chosen])
        recorded.append(RecordedStep(q, ACTIONS, LOGITS, chosen, violated, 0, month))
        events = ({"type": "rule_violation", "rule": "collapse"},) if violated else ()
        if monitor.observe(StepRecord(month, q, ACTIONS[chosen], events=events)).crossed:
            failures.append((month, ACTIONS[chosen]))
            fragment = extract_fragment(recorded[-1], violates)
            carry(storm.on_disequilibrium(month, fragment, context=q).requests)
        carry(storm.poll(month)[1])

    # Harvest 10 failed at 15 tons; its temporary mask made the agent try harvest 5 at 8 tons (a different action).
    assert failures == [(4, ACTIONS[1]), (5, ACTIONS[0])]
    assert len(plane.temporary_mask_ids) == 2
    assert plane.masked({"pool_resource_level": 100}, ACTIONS, step=6) == [
        True,
        True,
        False,
    ]  # the storm's price

    ((ticket, handle),) = storm.in_flight()  # one search runs; the harvest-5 failure waits in the queue
    handle.result(timeout=60)
    completed, requests = storm.poll(6)
    carry(requests)
    assert [c.ticket for c in completed] == [ticket] and completed[0].result.admitted
    scar = Scar(completed[0].result.rule)
    assert len(plane.temporary_mask_ids) == 2  # nothing lifted before admission
    equilibrate(store, [scar], [], merge_mode="append")
    lifted = carry(storm.on_scar_admitted(scar.rule, step=6, ticket=completed[0].ticket)).lifts
    assert len(lifted) == 2 and plane.temporary_mask_ids == ()  # the scar covers both failures
    assert storm.stats().queued == 0 and storm.stats().resolved == 2

    # The scar keeps the low pool safe and gives the full pool its harvests back.
    low = plane.govern({"pool_resource_level": 12}, ACTIONS, LOGITS, step=7)
    high = plane.govern({"pool_resource_level": 100}, ACTIONS, LOGITS, step=7)
    assert low.probs[0] == low.probs[1] == 0.0 and low.probs[2] == 1.0
    assert high.probs[0] > 0 and high.probs[1] > 0
    assert store.consistent()
    executor.shutdown()
    store.close()
