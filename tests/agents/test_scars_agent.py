"""The scars agent's lifecycle pieces that the tier-1 runs exercise only sometimes, on a small world of its own."""

from __future__ import annotations

import sqlite3

import numpy as np
import pytest

from scars.agents.runtime.equilibration import equilibrate
from scars.agents.runtime.scar import Scar, Scope
from scars.agents.runtime.store import SchemaIntegrityError, SchemaStore
from scars.agents.scars_agent import ScarsAgent, ScarsAgentConfig
from scars.disequilibrium.trustgate import TrustGateConfig
from scars.envs.api import Decision, Feedback, Punishment, Verdict, WorldAdapter, WorldCard
from scars.synthesis.dsl import Action, canonical_text, parse_rule
from scars.synthesis.errors import ConfigError

HEAT_1 = Action.env("heat", "heat apple 1 with microwave 1", obj_type="apple", recep="microwave 1")
HEAT_2 = Action.env("heat", "heat apple 1 with microwave 2", obj_type="apple", recep="microwave 2")
LOOK = Action.env("look", "look")


class Kitchen:
    """A one-rule world: microwave 1 is broken. ``punish`` adds a norm verifier (a peer punishes harvests > 5)."""

    def __init__(self, punish: bool = False) -> None:
        self.card = WorldCard("kitchen", "v0", "You are a cook.", "kitchen.verifier", classes={})
        self._norms = _Norms() if punish else None

    @property
    def norm_verifier(self):
        return self._norms

    @property
    def judge(self):
        return None

    def decision(self, observation, info, *, t):
        raise NotImplementedError  # the tests build decisions themselves

    def command(self, decision, action):
        return action.text

    def verdicts(self, info):
        return ()

    def punishments(self, info):
        return ()

    def check(self, context, action):
        if action.name == "heat" and action.arg("recep") == "microwave 1":
            return (Verdict("microwave_1_broken", "microwave 1 is broken", "kitchen.verifier"),)
        return ()


class _Norms:
    def judge(self, punished_action, context):
        return punished_action.arg("amount", 0) > 5


def _agent(tmp_path, world=None, **kw):
    return ScarsAgent(
        ScarsAgentConfig.for_ablation(**kw),
        world=world or Kitchen(),
        ledger_path=tmp_path / "l.sqlite",
        agent_id="me",
    )


def _step(
    agent, t, actions=(HEAT_1, HEAT_2, LOOK), chosen=0, verdicts=None, punishments=(), utterance="I heat."
):
    q = {"location": "kitchen", "step": t}
    d = Decision("You are in the kitchen.", "heat an apple", "heat", q, actions, t, 0, t)
    governed = agent.govern(d, np.zeros(len(actions)))
    action = actions[chosen]
    if verdicts is None:
        verdicts = agent.world.check(q, action)
    feedback = Feedback(
        d, action, chosen, (1.0,) * len(actions), "ok", 0.0, verdicts, punishments, False, utterance
    )
    return governed, agent.observe(feedback)


def test_the_agent_implements_the_agent_protocol_and_the_world_the_adapter_protocol(tmp_path):
    from scars.agents.api import Agent

    agent = _agent(tmp_path)
    assert isinstance(agent, Agent) and isinstance(agent.world, WorldAdapter)
    agent.close()


def test_a_verified_failure_masks_at_once_then_a_scar_replaces_the_mask(tmp_path):
    agent = _agent(tmp_path, search_iterations=60)
    _, reading = _step(agent, 0)
    assert reading.crossed and reading.z.z_v == 1.0
    governed, _ = _step(agent, 1, chosen=1)  # the temporary mask holds from the next decision on
    assert governed.probs[0] == 0.0
    for t in range(2, 6):
        _step(agent, t, chosen=1)
    (scar,) = agent.store.scars
    assert agent.store.plane.temporary_mask_ids == ()  # hot swap: the mature scar replaced the mask
    assert scar.provenance.verifier_id == "kitchen.verifier" and scar.provenance.seed is not None
    assert dict(scar.provenance.synthesiser_settings)["world"] == "kitchen-v0"
    assert 0.5 <= scar.scope.confidence < 1.0  # (k + 1) / (k + m + 2) over its data
    assert agent.store.consistent()
    agent.close()


def test_the_stats_say_how_long_the_loop_waited_for_syntheses_and_each_kind_of_search_took(tmp_path):
    agent = _agent(tmp_path, search_iterations=60)
    _step(agent, 0)
    for t in range(1, 6):
        _step(agent, t, chosen=1)
    stats = agent.stats()
    (entry,) = agent.synthesis_log
    assert entry["kind"] == "failure" and agent.merge_log[0]["consolidation_seconds"] >= 0
    by_kind = stats["synthesis_median_seconds_by_kind"]
    assert set(by_kind) == {"failure", "narrowing", "consolidation"} and by_kind["narrowing"] is None
    assert by_kind["failure"] == entry["seconds"] > 0 and by_kind["consolidation"] is not None
    assert stats["synthesis_wait_seconds"] >= 0.0 and 0.0 <= stats["synthesis_wait_share"] < 1.0
    agent.close()


def test_world_version_change_retires_exactly_the_version_scoped_scars(tmp_path):
    agent = _agent(tmp_path)
    scoped = Scar(
        parse_rule('if action.recep == "microwave 1" then forbid_env_action("heat")'),
        ({"e": 1},),
        scope=Scope(env_version="0"),
    )
    general = Scar(parse_rule('if action.obj_type == "cup" then forbid_env_action("clean")'), ({"e": 2},))
    equilibrate(agent.store, [scoped, general], [], merge_mode="append")
    assert set(agent.scar_ids()) == {scoped.id, general.id}
    agent.on_world_version("1", t=10)
    assert agent.scar_ids() == (general.id,)
    retired = [e for e in agent.store.ledger.events() if e.type == "scar_retired"]
    assert [e.subject for e in retired] == [scoped.id] and "version" in retired[0].payload["reason"]
    assert agent.store.verify() and agent.store.consistent()  # nothing deleted: the evidence stays
    agent.close()


def test_a_verified_success_after_admission_revokes_the_scar_but_an_earlier_one_does_not(tmp_path):
    agent = _agent(tmp_path, ablation="soft_bias_only")  # soft masks leak: the agent can take a masked action
    wrong = Scar(parse_rule('if action.recep == "microwave 2" then forbid_env_action("heat")'), ({"e": 1},))
    _step(agent, 0, chosen=1, verdicts=())  # a safe heat with microwave 2 *before* the scar existed
    equilibrate(agent.store, [wrong], [], merge_mode="append")
    agent.admitted_at[wrong.id] = 0
    agent.end_episode(False)
    assert agent.scar_ids() == (wrong.id,)  # old history is not counter-evidence
    _step(agent, 1, chosen=1, verdicts=())  # now it leaks through and the verifier says it was safe
    agent.end_episode(False)
    assert agent.scar_ids() == ()
    (revoked,) = [e for e in agent.store.ledger.events() if e.type == "scar_revoked"]
    assert revoked.payload["counter_evidence"][0]["evidence_id"] == "0:1"
    assert agent.stats()["scars_revoked"] == 1 and agent.store.consistent()
    agent.close()


def test_revocation_checks_a_success_only_against_the_scars_that_fire_on_it(tmp_path, monkeypatch):
    import scars.agents.equilibrium as equilibrium

    agent = _agent(tmp_path, ablation="soft_bias_only")
    wrong = Scar(parse_rule('if action.recep == "microwave 2" then forbid_env_action("heat")'), ({"e": 1},))
    others = [  # never fire on the run's heats: other receptacles, another verb
        Scar(parse_rule(f'if action.recep == "oven {i}" then forbid_env_action("heat")'), ({"e": i},))
        for i in range(40)
    ] + [Scar(parse_rule('if action.recep == "microwave 2" then forbid_env_action("cool")'), ({"e": 99},))]
    equilibrate(agent.store, [*others, wrong], [], merge_mode="append")
    for scar in (*others, wrong):
        agent.admitted_at[scar.id] = 0
    decided = []
    real = equilibrium.decide_retirement
    monkeypatch.setattr(
        equilibrium, "decide_retirement", lambda scars, **kw: decided.append(scars) or real(scars, **kw)
    )
    _step(agent, 1, chosen=1, verdicts=())  # the safe heat with microwave 2 leaks through the soft mask
    _step(agent, 2, chosen=2, verdicts=())  # a look: no scar's mask covers it
    agent.end_episode(False)
    assert [s.scar_id for (s,) in decided] == [wrong.id]  # 42 scars, one decision: the one that fires
    assert wrong.id not in agent.scar_ids() and len(agent.scar_ids()) == len(others)
    assert agent.successes == []  # each success is checked once
    agent.close()


def test_punishment_alone_triggers_accommodation_when_the_trustgate_counts_it(tmp_path):
    world = Kitchen(punish=True)
    config = dict(trust=TrustGateConfig(saturating_drop=1.0))
    harvest = Action.tool("harvest", amount=8)
    rest = Action.tool("rest")
    agent = ScarsAgent(
        ScarsAgentConfig.for_ablation(**config), world=world, ledger_path=tmp_path / "l.sqlite", agent_id="me"
    )
    _step(agent, 0, actions=(harvest, rest), chosen=0, verdicts=())  # no verifier violation
    punished = Punishment("p1", "me", 0, harvest, {"location": "kitchen"}, karma_drop=1.0)
    _, reading = _step(agent, 1, actions=(harvest, rest), chosen=1, verdicts=(), punishments=(punished,))
    assert reading.z.z_v == 0.0 and reading.z.z_r == 1.0 and reading.crossed
    assert agent.accommodations["punishment"] == 1
    governed, _ = _step(agent, 2, actions=(harvest, rest), chosen=1, verdicts=())
    assert governed.probs[0] == 0.0  # the punished harvest is masked at once
    # an unjustified punishment (a sustainable harvest) is filtered by the norm check: no accommodation
    fair = Punishment("p2", "me", 0, Action.tool("harvest", amount=2), {"location": "kitchen"})
    _, reading = _step(agent, 3, actions=(harvest, rest), chosen=1, verdicts=(), punishments=(fair,))
    assert reading.z.z_r == 0.0 and agent.accommodations["punishment"] == 1
    agent.close()


def test_the_agents_own_utterances_drive_identity_drift(tmp_path):
    agent = _agent(tmp_path)
    for t in range(5):  # the imprint y_0
        _step(agent, t, chosen=1, verdicts=(), utterance="I will heat the apple with microwave 2.")
    _, reading = _step(agent, 5, chosen=1, verdicts=(), utterance="I must not heat it; no, never, not there!")
    assert reading.z.z_i > 0.0
    agent.close()


def test_a_ledger_that_fails_verification_stops_the_agent(tmp_path):
    with SchemaStore(tmp_path / "l.sqlite") as store:
        equilibrate(
            store,
            [Scar(parse_rule('if action.recep == "microwave 1" then forbid_env_action("heat")'))],
            [],
            merge_mode="append",
        )
    with sqlite3.connect(tmp_path / "l.sqlite") as conn:
        conn.execute(
            "UPDATE events SET payload = replace(payload, 'microwave 1', 'microwave 9') WHERE type = 'scar_admitted'"
        )
    with pytest.raises(SchemaIntegrityError, match="fails verification at event 2.*fail closed"):
        _agent(tmp_path)


def test_ablations_are_one_setting_each():
    assert ScarsAgentConfig.for_ablation("no_ilp_merge").merge_mode == "append"
    assert ScarsAgentConfig.for_ablation("soft_bias_only").mask_mode == "soft"
    assert ScarsAgentConfig.for_ablation("text_reflection_scar").enforce is False
    assert ScarsAgentConfig.for_ablation("llm_only_patch").search == "direct"
    assert ScarsAgentConfig.for_ablation("no_drift_loss").search_config.weights.beta3 == 0.0
    assert ScarsAgentConfig.for_ablation("no_mdl").search_config.weights.use_description_length is False
    assert ScarsAgentConfig.for_ablation("storm_only").search == "none"
    blocklist = ScarsAgentConfig.for_ablation("hard_blocklist")
    assert (blocklist.search, blocklist.extract, blocklist.storm.rejected_mask_ttl) == ("none", False, 10**9)
    no_c = ScarsAgentConfig.for_ablation("no_contradiction").signal
    assert no_c.weights[2] == 0.0 and abs(sum(no_c.weights) - 1.0) < 1e-12
    with pytest.raises(
        ConfigError, match="unknown ablation .no_such.; known: none, no_mdl, .*, no_contradiction"
    ):
        ScarsAgentConfig.for_ablation("no_such")


def test_the_hard_blocklist_blocks_the_exact_situation_forever_and_nothing_else(tmp_path):
    agent = _agent(tmp_path, ablation="hard_blocklist")
    _step(agent, 0)  # heat with microwave 1 fails
    for t in range(1, 300):  # no synthesis, and the mask never lapses
        governed, _ = _step(agent, t, chosen=1, verdicts=())
        assert governed.probs[0] == 0.0 and governed.probs[1] > 0
    assert agent.store.scars == () and agent.stats()["syntheses"] == 0
    elsewhere = Decision("", "", "", {"location": "pantry", "step": 1}, (HEAT_1, HEAT_2), 301, 0, 1)
    assert agent.govern(elsewhere, np.zeros(2)).probs[0] > 0  # another situation: not blocked
    agent.close()


def test_the_merge_owes_the_failure_as_attributed_not_the_whole_context(tmp_path):
    """The failure the merge keeps covered is the one a scar's evidence carries and Prop. 1 replays: after
    accommodation, the extracted fragment takes the raw observation's place (same id)."""
    agent = _agent(tmp_path, search_iterations=60)
    _step(agent, 0)
    (failure,) = agent.failures
    # the fragment (the action's arguments; no context variable the agent never saw vary) replaced the raw one
    assert "recep" in failure.causal_args and failure.id == "kitchen-v0:0:0"
    assert dict(failure.q) != {"location": "kitchen", "step": 0}
    agent.close()


def test_a_labelled_but_unexecuted_unsafe_action_leads_to_a_scar(tmp_path):
    """Issue 24, item 4: under ``--verdicts state`` a labelled unsafe action of a visited state is a failure (D⁻)
    though the agent never executed it; accommodation starts from it and a scar masks it. Without the label the
    same steps teach nothing (the check can fail)."""
    for labelled in (True, False):
        agent = _agent(tmp_path / str(labelled), search_iterations=60, verdicts="state")
        for t in range(6):
            q = {"location": "kitchen", "step": t}
            actions = (HEAT_1, HEAT_2, LOOK)
            d = Decision("You are in the kitchen.", "heat an apple", "heat", q, actions, t, 0, t)
            agent.govern(d, np.zeros(3))
            feedback = Feedback(
                d,
                HEAT_2,
                1,
                (1.0, 1.0, 1.0),
                "ok",
                0.0,
                (),
                (),
                False,
                "I heat.",
                unsafe=(HEAT_1,) if labelled else None,
            )
            agent.observe(feedback)
        masked = agent.store.plane.masked({"location": "kitchen", "step": 9}, (HEAT_1, HEAT_2), 9)
        if labelled:
            assert agent.labelled_failures == 1 and agent.accommodations["label"] == 1
            assert masked == [True, False]  # the labelled action, not the one executed safely
            assert agent.store.scars  # a mature scar, not only the temporary mask
        else:
            assert agent.labelled_failures == 0 and masked == [False, False]
        agent.close()


def test_a_scar_the_verdict_ties_to_a_world_version_retires_at_the_change(tmp_path):
    """Issue 24, item 5: the paper's "Microwave 1 is broken in world version 0" and "Desk lamp 1 is faulty in world
    version 0" scars are scoped to version 0 (the verdict writes the version variable with its value, in the world's
    vocabulary) and retire when the version changes; on the previous main the version was dropped from every
    fragment (its what-if values equalled 0) and both scars survived the change."""
    from scars.experiments.config import Tier1Config
    from scars.experiments.tier1 import run_tier1

    result = run_tier1(Tier1Config(method="scars", seed=0, episodes=12), tmp_path / "run")
    store = SchemaStore(tmp_path / "run" / "ledger.sqlite")
    events = store.ledger.events()
    admitted = {e.subject: Scar.from_json(e.payload) for e in events if e.type == "scar_admitted"}
    retired = {e.subject: e.payload["reason"] for e in events if e.type == "scar_retired"}
    appliance = {
        sid: s
        for sid, s in admitted.items()
        if any(x in canonical_text(s.rule) for x in ('"microwave 1"', '"desklamp 1"'))
    }
    assert appliance, "the run learns an appliance scar"
    assert all(scar.scope.env_version == "0" for scar in appliance.values())
    assert any("version" in retired.get(sid, "") for sid in appliance)
    assert not any('"desklamp 1"' in r or '"microwave 1"' in r for r in result.summary["active_rules"])
    store.close()


def test_a_forged_label_without_an_executed_action_is_refused_under_the_executed_protocol(tmp_path):
    """Issue 31 (forged evidence): the same labelled steps that teach under ``--verdicts state`` teach nothing under
    the default protocol, where no verifier labels unexecuted actions — the label is refused, counted, and neither a
    failure nor a mask nor a scar follows."""
    agent = _agent(tmp_path, search_iterations=60)  # verdicts="executed", the default
    for t in range(6):
        q = {"location": "kitchen", "step": t}
        d = Decision("You are in the kitchen.", "heat an apple", "heat", q, (HEAT_1, HEAT_2, LOOK), t, 0, t)
        agent.govern(d, np.zeros(3))
        agent.observe(
            Feedback(d, HEAT_2, 1, (1.0,) * 3, "ok", 0.0, (), (), False, "I heat.", unsafe=(HEAT_1,))
        )
    assert agent.labels_refused == 6 and agent.stats()["labels_refused"] == 6
    assert agent.labelled_failures == 0 and not agent.failures and not agent.store.scars
    assert agent.store.plane.masked({"location": "kitchen", "step": 9}, (HEAT_1, HEAT_2), 9) == [False, False]
    agent.close()


def test_a_forged_verdict_is_not_learned_when_extraction_is_verifier_backed(tmp_path):
    """Issue 31: a forged verdict on a needed safe action (heat with microwave 2, which the world's verifier passes)
    becomes a failure and a mask from the verdicts received alone; with the what-if oracle the extraction re-asks
    the world, finds nothing wrong and no accommodation starts (the ``+oracle`` defence row)."""
    forged = (
        Verdict("forged_rule", "'heat apple 1 with microwave 2' is not allowed here", "kitchen.verifier"),
    )
    masked = {}
    for oracle in ("none", "counterfactual"):
        agent = _agent(tmp_path / oracle, search_iterations=60, oracle=oracle)
        for t in range(6):
            _step(agent, t, chosen=1, verdicts=forged if t == 0 else ())
        masked[oracle] = agent.store.plane.masked({"location": "kitchen", "step": 1}, (HEAT_2,), 1)[0]
        assert agent.accommodations["verdict"] == (1 if oracle == "none" else 0)
        agent.close()
    assert masked == {"none": True, "counterfactual": False}


OPEN_FRIDGE = Action.env("open", "open fridge 1", recep="fridge 1", recep_type="fridge")
OPEN_DRAWER = Action.env("open", "open drawer 1", recep="drawer 1", recep_type="drawer")


class Fridge(Kitchen):
    """Open the fridge only with empty hands."""

    def __init__(self) -> None:
        self.card = WorldCard("fridge", "v0", "You are a cook.", "fridge.verifier", classes={})
        self._norms = None

    def check(self, context, action):
        if action.name == "open" and action.arg("recep") == "fridge 1" and context["held_type"] != "none":
            return (Verdict("fridge_empty_hands", "the fridge only with empty hands", "fridge.verifier"),)
        return ()


def _fridge_step(agent, episode, step, held, chosen, proposal=0):
    """One decision: the model proposes ``proposal`` (its logits favour it), the agent executes ``chosen``."""
    actions = (OPEN_FRIDGE, OPEN_DRAWER, LOOK)
    q = {"location": "kitchen", "held_type": held, "step": step}
    t = episode * 100 + step
    d = Decision("You are in the kitchen.", "cool an apple", "cool", q, actions, t, episode, step)
    logits = np.zeros(3)
    logits[proposal] = 5.0
    governed = agent.govern(d, logits)
    action = actions[chosen]
    feedback = Feedback(
        d, action, chosen, tuple(logits), "ok", 0.0, agent.world.check(q, action), (), False, "I act."
    )
    agent.observe(feedback)
    return governed


def test_a_scar_that_blocked_a_lost_task_is_narrowed_and_the_wide_one_retired(tmp_path):
    """Issue 24, "a wrong guess should cost a repeat, not the task": the first failure (opening the fridge holding a
    tomato) with no evidence about empty hands yields a scar on the fridge alone. In an episode the agent then
    loses, that scar blocked the model's proposal to open the fridge with empty hands; narrowing presumes that safe,
    a new synthesis finds the rule that still covers the failure and spares empty hands, and the wide scar is
    retired (ledger reason "narrowed"). With narrowing off, the wide scar stays (the check can fail)."""
    for narrow in (True, False):
        agent = ScarsAgent(
            ScarsAgentConfig.for_ablation(search_iterations=120, narrow=narrow),
            world=Fridge(),
            ledger_path=tmp_path / str(narrow) / "l.sqlite",
        )
        _fridge_step(agent, 0, 0, "tomato", chosen=0)  # the verified failure
        for s in range(1, 6):
            _fridge_step(agent, 0, s, "tomato", chosen=2, proposal=2)
        agent.end_episode(True)
        empty = {"location": "kitchen", "held_type": "none", "step": 3}
        full = {"location": "kitchen", "held_type": "tomato", "step": 3}
        assert agent.store.plane.masked(full, (OPEN_FRIDGE,), 150) == [True]
        assert agent.store.plane.masked(empty, (OPEN_FRIDGE,), 150) == [True], "the first scar is wide"
        (wide,) = agent.store.scars
        _fridge_step(
            agent, 1, 0, "none", chosen=2, proposal=0
        )  # the model wants the fridge; the scar blocks it
        agent.end_episode(False)  # ... and the task is lost
        for s in range(1, 6):
            _fridge_step(agent, 2, s, "none", chosen=2, proposal=2)
        agent.end_episode(True)
        retired = {
            e.subject: e.payload["reason"] for e in agent.store.ledger.events() if e.type == "scar_retired"
        }
        if narrow:
            assert agent.narrowings | {"consolidations_refused": 0} == {
                "lost_episodes_with_blocks": 1,
                "stuck_decisions": 0,
                "syntheses": 1,
                "syntheses_at_once": 0,
                "syntheses_at_episode_end": 1,
                "syntheses_not_run": 0,
                "replaced": 1,
                "consolidations_refused": 0,
            }
            assert retired[wide.id].startswith("narrowed")
            assert agent.store.plane.masked(empty, (OPEN_FRIDGE,), 250) == [False]
            assert agent.store.plane.masked(full, (OPEN_FRIDGE,), 250) == [True]  # the failure stays covered
        else:
            assert wide.id not in retired and agent.narrowings["syntheses"] == 0
            assert agent.store.plane.masked(empty, (OPEN_FRIDGE,), 250) == [True]
        agent.close()


def test_the_models_runner_up_blocked_in_a_lost_task_is_narrowed_from_too(tmp_path):
    """The habitual step is often the failure itself (the scar is right to block it); the scar's width shows on the
    model's next choice. Here the model's top proposal is to look around (not masked) and its runner-up, well above
    the bulk of the actions, is to open the fridge with empty hands — which the wide scar blocks. A lost episode
    narrows the scar from the runner-up; a runner-up no higher than the bulk is not a proposal and narrows nothing."""
    wait = Action.env("wait", "wait")
    actions = (OPEN_FRIDGE, OPEN_DRAWER, LOOK, wait)
    empty = {"location": "kitchen", "held_type": "none", "step": 3}
    for runner_up in (3.0, 0.0):
        agent = ScarsAgent(
            ScarsAgentConfig.for_ablation(search_iterations=120),
            world=Fridge(),
            ledger_path=tmp_path / f"r{runner_up}" / "l.sqlite",
        )
        _fridge_step(agent, 0, 0, "tomato", chosen=0)  # the verified failure
        for s in range(1, 6):
            _fridge_step(agent, 0, s, "tomato", chosen=2, proposal=2)
        agent.end_episode(True)
        assert agent.store.plane.masked(empty, (OPEN_FRIDGE,), 150) == [True], "the first scar is wide"
        q = {"location": "kitchen", "held_type": "none", "step": 0}
        d = Decision("You are in the kitchen.", "cool an apple", "cool", q, actions, 100, 1, 0)
        logits = np.array([runner_up, 0.0, 5.0, 0.0])
        agent.govern(d, logits)
        agent.observe(Feedback(d, LOOK, 2, tuple(logits), "ok", 0.0, (), (), False, "I look."))
        agent.end_episode(False)
        for s in range(1, 6):
            _fridge_step(agent, 2, s, "none", chosen=2, proposal=2)
        agent.end_episode(True)
        if runner_up:
            assert agent.narrowings["syntheses"] == 1
            assert agent.store.plane.masked(empty, (OPEN_FRIDGE,), 250) == [False]
        else:
            assert agent.narrowings["syntheses"] == 0
            assert agent.store.plane.masked(empty, (OPEN_FRIDGE,), 250) == [True]
        agent.close()


def test_flat_logits_propose_nothing_so_a_lost_episode_narrows_nothing(tmp_path):
    """A shield governs with zeros (``agents.shield.ScarShield``), a generate-mode model's first call likewise: flat
    logits name no step the model had in mind, so a scar masking the first admissible action is no blocked proposal,
    and losing the episode is no evidence against it (before, action 0 was read as the model's proposal and the wide
    scar was narrowed from it)."""
    agent = ScarsAgent(
        ScarsAgentConfig.for_ablation(search_iterations=120),
        world=Fridge(),
        ledger_path=tmp_path / "l.sqlite",
    )
    _fridge_step(agent, 0, 0, "tomato", chosen=0)  # the verified failure: a wide scar on the fridge
    for s in range(1, 6):
        _fridge_step(agent, 0, s, "tomato", chosen=2, proposal=2)
    agent.end_episode(True)
    empty = {"location": "kitchen", "held_type": "none", "step": 3}
    assert agent.store.plane.masked(empty, (OPEN_FRIDGE,), 150) == [True], "the first scar is wide"
    actions = (OPEN_FRIDGE, OPEN_DRAWER, LOOK)
    q = {"location": "kitchen", "held_type": "none", "step": 0}
    d = Decision("You are in the kitchen.", "cool an apple", "cool", q, actions, 100, 1, 0)
    governed = agent.govern(d, np.zeros(3))
    assert dict(governed.fired).get(0), "the scar masks action 0"
    agent.observe(Feedback(d, LOOK, 2, (0.0, 0.0, 0.0), "ok", 0.0, (), (), False, "I look."))
    agent.end_episode(False)
    assert agent.narrowings["lost_episodes_with_blocks"] == 0 and agent.narrowings["syntheses"] == 0
    assert agent.store.plane.masked(empty, (OPEN_FRIDGE,), 250) == [True]
    agent.close()


class _OnlyRoute:
    """A model whose only route to its goal is the fridge: it proposes opening it, and when the controller masks that
    it re-plans (``replan_prior``) — and the route it finds is the fridge again."""

    name = "only_route"
    writes_text = False

    def logits(self, inp, rng):
        base = np.array([5.0, 0.0, 1.0])
        return base if inp.replan_prior is None else base + np.asarray(inp.replan_prior)

    def utter(self, inp, action, blocked):
        return "I act."

    def write_text(self, prompt):
        raise NotImplementedError


def _fridge_episode(agent, episode, max_steps):
    """Episode ``episode`` of "cool an apple" with empty hands, through the decision step every tier uses
    (``experiments.loop.decide`` and ``learn``); won when the fridge is opened. Returns (won, steps played)."""
    from scars.experiments.loop import decide, learn

    policy, rng = _OnlyRoute(), np.random.default_rng(0)
    for step in range(max_steps):
        q = {"location": "kitchen", "held_type": "none", "step": step}
        t = episode * 100 + step
        d = Decision(
            "You are in the kitchen.",
            "cool an apple",
            "cool",
            q,
            (OPEN_FRIDGE, OPEN_DRAWER, LOOK),
            t,
            episode,
            step,
        )
        choice = decide(
            policy,
            agent,
            d,
            np.zeros(3),
            (),
            rng,
            replan=lambda decision, declined: np.array([4.0, 0.0, 0.0]),
        )
        won = choice.action == OPEN_FRIDGE
        learn(agent, choice, "ok", float(won), agent.world.check(q, choice.action), (), won)
        if won:
            return True, step + 1
    return False, max_steps


def _wide_fridge_scar(tmp_path, **kw):
    """An agent whose first failure (opening the fridge holding a tomato) left a scar on the fridge alone."""
    agent = ScarsAgent(
        ScarsAgentConfig.for_ablation(search_iterations=120, **kw),
        world=Fridge(),
        ledger_path=tmp_path / "l.sqlite",
    )
    _fridge_step(agent, 0, 0, "tomato", chosen=0)
    for s in range(1, 6):
        _fridge_step(agent, 0, s, "tomato", chosen=2, proposal=2)
    agent.end_episode(True)
    empty = {"location": "kitchen", "held_type": "none", "step": 3}
    assert agent.store.plane.masked(empty, (OPEN_FRIDGE,), 99) == [True], "the first scar is wide"
    return agent


def test_a_scar_that_masks_the_only_route_is_narrowed_within_the_episode_and_the_task_won(tmp_path):
    """Issue 40 #3, "a wrong guess repairs itself on the first lost step, not the next episode": the wide scar masks
    the model's only route (the fridge with empty hands); the model re-plans and its new step is masked again — no
    unmasked way forward. That decision starts the narrowing at once; the result arrives ``synthesis_latency_steps``
    decisions later, the fridge with empty hands is free, and the same episode is won. The failure stays covered.
    Before, the episode ran to its step limit and only its end narrowed the scar."""
    agent = _wide_fridge_scar(tmp_path)
    (wide,) = agent.store.scars
    won, played = _fridge_episode(agent, 1, max_steps=10)
    assert won and played <= 1 + agent.config.synthesis_latency_steps + 1
    assert agent.narrowings["syntheses_at_once"] == 1 and agent.narrowings["syntheses_at_episode_end"] == 0
    assert agent.narrowings["replaced"] == 1 and wide.id not in agent.store.plane
    agent.end_episode(won)
    full = {"location": "kitchen", "held_type": "tomato", "step": 3}
    assert agent.store.plane.masked(full, (OPEN_FRIDGE,), 150) == [True]  # the failure stays covered
    stats = agent.stats()
    # every decision before the narrowed scar arrived left it stuck; one synthesis answered them (one situation)
    assert (stats["narrowing_stuck_decisions"], stats["narrowing_syntheses_at_once"]) == (played - 1, 1)
    agent.close()


def test_a_situation_narrowed_at_once_is_not_narrowed_again_at_the_lost_episodes_end(tmp_path):
    """The episode ends (its step limit) before the narrowing started at once comes back: the loss is the same blocked
    situation, so the episode's end starts no second synthesis for it — and the one in flight still lands."""
    agent = _wide_fridge_scar(tmp_path)
    won, _ = _fridge_episode(agent, 1, max_steps=2)
    assert not won
    agent.end_episode(False)
    assert agent.narrowings["syntheses_at_once"] == 1
    assert agent.narrowings["syntheses_at_episode_end"] == 0 and agent.narrowings["syntheses"] == 1
    won, _ = _fridge_episode(agent, 2, max_steps=6)
    assert won and agent.narrowings["replaced"] == 1
    agent.close()
