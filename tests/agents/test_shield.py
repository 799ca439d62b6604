"""ScarShield on constructed cases: a violation → a scar → the action masked next time; the oracle reads the verifier
only through the protocol's counterfactual oracle; the scars shield never reads it; the controls."""

from __future__ import annotations

import numpy as np
import pytest

from scars.agents.shield import ScarShield
from scars.envs.api import ProtocolError
from scars.envs.household import RuleSchedule, SafetyRule
from scars.envs.household.adapter import HouseholdAdapter
from scars.envs.rl import make_household_view
from scars.synthesis.dsl import parse_rule
from scars.synthesis.errors import ConfigError, WorldError

SEED = 0


def _schedule_against_the_first_destination() -> tuple[RuleSchedule, str]:
    """A rule forbidding a walk to every receptacle of the type the first ``go to`` of game SEED leads to."""
    view = make_household_view()
    view.reset(seed=SEED)
    goto = next(a for a in view.slot_actions() if a.name == "goto")
    rtype = goto.arg("recep_type")
    rule = parse_rule(f'if action.recep_type == "{rtype}" then forbid_env_action("goto")')
    return RuleSchedule(
        (SafetyRule(f"no_walking_to_{rtype}", rule, f"Keep away from every {rtype}."),)
    ), goto.text


def _slot(shield: ScarShield, command: str) -> int:
    return [a.text for a in shield.view.decision().actions].index(command)


def test_a_violation_becomes_a_scar_that_masks_the_action_next_time(tmp_path):
    schedule, command = _schedule_against_the_first_destination()
    shield = ScarShield(
        make_household_view(schedule=schedule), shield="scars", ledger_path=tmp_path / "l.jsonl"
    )
    shield.reset(seed=SEED)
    assert shield.action_masks()[_slot(shield, command)]  # nothing learned yet: the learner may walk there
    _, _, _, _, info = shield.step(_slot(shield, command))
    assert [v["rule_id"] for v in info["violations"]] == [schedule.rules[0].id]
    for _ in range(6):  # the synthesis is collected a few steps later (synthesis_latency_steps)
        shield.step(_slot(shield, "look"))
    assert shield.scars(), "the verified violation was not turned into a scar"
    shield.reset(seed=SEED)  # the same game again: the same walk is now masked
    assert not shield.action_masks()[_slot(shield, command)]
    assert shield.action_masks().sum() < shield.view.action_masks().sum()
    events = [e.type for e in shield.agent.store.ledger.events()]
    assert events[:2] == ["failure_observed", "temp_mask_set"] and "scar_admitted" in events, events
    shield.close()


def test_the_scars_shield_never_asks_the_world_verifier(monkeypatch):
    schedule, command = _schedule_against_the_first_destination()
    asked = []
    monkeypatch.setattr(HouseholdAdapter, "check", lambda self, q, a: asked.append(a) or ())
    shield = ScarShield(make_household_view(schedule=schedule), shield="scars")
    shield.reset(seed=SEED)
    rng = np.random.default_rng(0)
    for _ in range(60):
        _, _, terminated, truncated, _ = shield.step(rng.choice(np.flatnonzero(shield.action_masks())))
        if terminated or truncated:
            shield.reset()
    assert asked == [] and shield.verifier_calls == 0
    # and the world it holds refuses the question outright
    with pytest.raises(ProtocolError):
        shield.agent.world.check({}, shield.view.decision().actions[0])
    shield.close()


def test_the_oracle_masks_exactly_the_flagged_actions_through_the_protocol_oracle():
    schedule, command = _schedule_against_the_first_destination()
    view = make_household_view(schedule=schedule)
    shield = ScarShield(view, shield="oracle")
    shield.reset(seed=SEED)
    decision = view.decision()
    flagged = {a.text for a in decision.actions if view.household.verifier.check(decision.context, a)}
    assert command in flagged
    mask = shield.action_masks()
    assert {a.text for i, a in enumerate(decision.actions) if not mask[i]} == flagged
    assert shield.verifier_calls == sum(
        a.is_control for a in decision.actions
    )  # one question per control action
    _, _, _, _, info = shield.step(_slot(shield, command))  # a learner that ignores the mask: a⊥ instead
    assert info["shield_replaced"] and info["command"] == "look" and info["violations"] == []
    shield.close()


def test_the_blocklist_masks_exactly_the_failed_action_in_its_situation():
    schedule, command = _schedule_against_the_first_destination()
    shield = ScarShield(make_household_view(schedule=schedule), shield="blocklist")
    shield.reset(seed=SEED)
    shield.step(_slot(shield, command))
    shield.reset(seed=SEED)
    assert not shield.action_masks()[_slot(shield, command)]
    assert shield.scars() == ()  # no synthesis: a mask, not a rule
    others = [a.text for a in shield.view.decision().actions if a.name == "goto" and a.text != command]
    assert all(shield.action_masks()[_slot(shield, c)] for c in others)
    shield.close()


def test_no_shield_is_the_view_and_dict_observations_carry_the_shield_mask():
    schedule, command = _schedule_against_the_first_destination()
    plain = ScarShield(make_household_view(schedule=schedule), shield="none")
    plain.reset(seed=SEED)
    assert np.array_equal(plain.action_masks(), plain.view.action_masks())
    oracle = ScarShield(make_household_view(schedule=schedule, dict_obs=True), shield="oracle")
    obs, info = oracle.reset(seed=SEED)
    assert np.array_equal(obs["action_mask"], oracle.action_masks().astype(np.int8))
    assert not obs["action_mask"][_slot(oracle, command)]


def test_bad_shield_names_and_envs_are_one_clear_error():
    with pytest.raises(ConfigError, match="shield = 'magic'"):
        ScarShield(make_household_view(), shield="magic")
    import gymnasium as gym

    with pytest.raises(ConfigError, match="MaskedView"):
        ScarShield(gym.make("CartPole-v1"), shield="none")


def test_shields_of_one_learner_share_its_scars():
    schedule, command = _schedule_against_the_first_destination()
    first = ScarShield(make_household_view(schedule=schedule), shield="blocklist")
    second = ScarShield(make_household_view(schedule=schedule), shield="blocklist", share_with=first)
    first.reset(seed=SEED)
    second.reset(seed=SEED)
    first.step(_slot(first, command))  # the first env's violation
    second.step(_slot(second, "look"))  # the second env's next decision is governed by the shared S_t
    second.reset(seed=SEED)
    assert not second.action_masks()[_slot(second, command)]
    with pytest.raises(ConfigError, match="cannot share"):
        ScarShield(make_household_view(), shield="scars", share_with=first)
    second.close()
    first.close()


def _arena(shield: str, **kwargs):
    from scars.agents.shield import ParallelScarShield
    from scars.envs.commons import commons_v0
    from scars.envs.rl import ResourceRLView

    return ParallelScarShield(ResourceRLView(commons_v0.parallel_env(arena="A")), shield=shield, **kwargs)


def test_a_seat_that_over_harvests_gets_a_scar_that_masks_large_requests(tmp_path):
    arena = _arena("scars", ledger_dir=tmp_path)
    obs, _ = arena.reset(seed=0)
    # the largest request H allows: above the sustainable share f(t)/|I|, which the verifier reports
    greedy = int(np.flatnonzero(arena.action_mask("agent_0"))[-1])
    assert greedy > 10 and not arena.action_mask("agent_0")[greedy + 1]  # H's own bound
    modest = 2
    for _ in range(6):  # two months: harvest (agent_0 over-harvests), discussion, punishment (nobody)
        obs, *_ = arena.step(
            {a: (greedy if a == "agent_0" and obs[a]["observations"][0] == 1 else 0) for a in arena.agents}
        )
    # the scar, synthesised a few steps after the verdict, names the norm's own quantity
    assert arena.scars()["agent_0"] == (
        'if action.amount > sustainable_share then forbid_tool_call("harvest")',
    )
    assert not arena.action_mask("agent_0")[greedy] and arena.action_mask("agent_0")[modest]
    assert not arena.scars()["agent_1"]  # the others broke nothing: nothing learned for them
    assert (tmp_path / "ledger-agent_0.jsonl").is_file()
    arena.close()


def test_the_arena_oracle_reads_the_verifier_only_through_the_protocol(monkeypatch):
    from scars.envs.commons.adapter import CommonsAdapter

    asked = []
    original = CommonsAdapter.check
    monkeypatch.setattr(CommonsAdapter, "check", lambda self, q, a: asked.append(a) or original(self, q, a))
    scars = _arena("scars")
    obs, _ = scars.reset(seed=0)
    for _ in range(6):  # everyone takes the most it may: the pool collapses, and a new episode starts
        if not scars.agents:
            obs, _ = scars.reset()
        obs, *_ = scars.step({a: int(np.flatnonzero(obs[a]["action_mask"])[-1]) for a in scars.agents})
    assert asked == [] and scars.verifier_calls == 0
    scars.close()
    oracle = _arena("oracle")
    obs, _ = oracle.reset(seed=0)
    assert (
        oracle.verifier_calls == len(asked) > 0
    )  # every question went through the protocol's counted oracle
    assert (
        oracle.action_mask("agent_0")[2] and not oracle.action_mask("agent_0")[15]
    )  # share 10: 15 is over it


def test_the_arena_shield_passes_the_parallel_api_test():
    import warnings

    from pettingzoo.test import parallel_api_test

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        arena = _arena("blocklist")
        parallel_api_test(arena, num_cycles=40)
        arena.close()


@pytest.mark.parametrize(
    "action", [None, "x", "3", float("nan"), float("inf"), 2.7, np.array([1, 2]), -1, 40, True]
)
def test_the_shield_refuses_an_action_outside_its_space(action):
    """Issue 41 item 1: ``-1`` used to be replaced by a⊥ in silence, ``2.7`` and ``"3"`` played as slots 2 and 3."""
    shield = ScarShield(make_household_view(), shield="none")
    shield.reset(seed=SEED)
    with pytest.raises(WorldError, match=r"action .* is outside Discrete\(40\)"):
        shield.step(action)
    assert shield.replaced == 0 and shield.view.household.world.steps == 0
    shield.close()


@pytest.mark.parametrize("action", [None, 2.7, "3", np.array([1, 2]), -1, 10**6], ids=repr)
def test_the_arena_shield_refuses_an_action_outside_its_space(action):
    arena = _arena("none")
    arena.reset(seed=0)
    actions = dict.fromkeys(arena.agents, 0)
    actions["agent_0"] = action
    with pytest.raises(WorldError, match=r"action .* of 'agent_0' is outside Discrete"):
        arena.step(actions)
    assert arena.replaced == 0
    arena.close()


def test_check_env_passes_on_the_shield_as_a_user_builds_it(tmp_path):
    """Issue 41 item 7: over ``gym.make``'s view, and over the view of a made household; the shield records its
    arguments (``RecordConstructorArgs``), so its spec recreates it."""
    import warnings

    import gymnasium as gym
    from gymnasium.utils.env_checker import check_env

    from scars.envs.rl import HouseholdRLView

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*different from the unwrapped")
        for shield in ("none", "blocklist"):
            made = ScarShield(gym.make("scars.envs.rl:scars/HouseholdRL-v0"), shield=shield)
            check_env(made, skip_render_check=True)
            remade = made.spec.make()
            assert isinstance(remade, ScarShield) and remade.shield == shield
            remade.close()
            made.close()
        wrapped = ScarShield(HouseholdRLView(gym.make("scars/Household-v0")), shield="oracle")
        check_env(wrapped, skip_render_check=True)
        # a wrapper above a shield deep-copies its spec (RLlib's env runners do): the spec holds settings only
        first = ScarShield(make_household_view(), shield="scars", ledger_path=tmp_path / "l.jsonl", seed=3)
        second = ScarShield(make_household_view(), shield="scars", share_with=first, adapter=first.adapter)
        for shield in (first, second):
            shield.unwrapped.spec = gym.envs.registration.EnvSpec("scars/Household-v0")
            above = gym.wrappers.RecordEpisodeStatistics(shield)
            assert above.spec is not None
            assert above.spec.additional_wrappers[-2].kwargs == {
                "shield": "scars",
                "seed": 3 if shield is first else 0,
                "config": None,
                "search_iterations": 120,
            }
        second.close()
        first.close()


def test_the_shield_module_names_no_world():
    """Issue 41 item 9: importing ``agents.shield`` loads no world; the caller hands the adapters in."""
    import subprocess
    import sys

    loaded = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, scars.agents.shield; print(sorted(m for m in sys.modules if m.startswith('scars.envs')))",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert loaded.strip() == "['scars.envs', 'scars.envs.api', 'scars.envs.rl', 'scars.envs.rl.view']"


def test_the_arena_shield_uses_the_adapters_it_is_handed():
    from scars.agents.shield import ParallelScarShield
    from scars.envs.commons import commons_v0
    from scars.envs.rl import ResourceRLView

    view = ResourceRLView(commons_v0.parallel_env(arena="A"))
    adapters = view.seat_adapters(overuse_verdicts=True)
    arena = ParallelScarShield(view, shield="none", adapters=adapters)
    assert all(arena.adapters[s] is adapters[s] for s in view.possible_agents)
    arena.close()
    with pytest.raises(ConfigError, match=r"adapters\['agent_1'\] must be an envs.rl.view.SeatAdapter"):
        ParallelScarShield(view, shield="none", adapters={"agent_0": adapters["agent_0"]})
    with pytest.raises(ConfigError, match="adapter must be an envs.api.WorldAdapter, got str"):
        ScarShield(make_household_view(), shield="none", adapter="household")  # type: ignore[arg-type]
