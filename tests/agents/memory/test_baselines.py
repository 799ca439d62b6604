import numpy as np

from scars.agents.memory import RAGMemory, Reflexion, SCGMemory, SkillLibrary, StaticPersona
from scars.agents.policies import PolicyInput, SimulatedLM, render_window
from scars.envs.api import Decision, Verdict, WorldCard
from scars.synthesis.dsl import Action, parse_rule
from support.kitchen import CARD, CTX, GO, SINK, TUB, VERDICT, decision, feedback

_decision, _feedback = decision, feedback


def _p_sink(mechanism):
    window = mechanism.window(_decision())
    inp = PolicyInput(
        "You are at sinkbasin 1.", "clean a cup", CTX, (SINK, TUB, GO), window, np.array([1, 0.6, 0])
    )
    lg = SimulatedLM().logits(inp, np.random.default_rng(0))
    p = np.exp(lg - lg.max())
    return (p / p.sum())[0]


def _after_failure(mechanism, won=False):
    mechanism.begin_episode(_decision(0))
    base = _p_sink(mechanism)
    mechanism.observe(_feedback(SINK, (VERDICT,)))
    mechanism.end_episode(won)
    mechanism.begin_episode(_decision(1))
    return base, _p_sink(mechanism)


def test_static_persona_declares_the_rules_in_force_and_learns_nothing():
    m = StaticPersona(CARD)
    m.begin_episode(_decision(0))
    shown = render_window(m.window(_decision(rules=("Open drawers only with empty hands.",))))
    assert "Rule in force: Open drawers only with empty hands." in shown and "Never" not in shown
    m.observe(_feedback(SINK, (VERDICT,)))
    assert m.memory_texts(_decision()) == []


def test_reflexion_keeps_the_last_three_reflections():
    m = Reflexion(CARD)
    for ep in range(5):
        m.begin_episode(_decision(ep))
        m.observe(_feedback(SINK, (Verdict("r", f"rule {ep}", "v"),), episode=ep))
        m.end_episode(False)
    texts = m.memory_texts(_decision())
    assert len(texts) == 3 and "rule 4" in texts[-1] and "rule 1" not in " ".join(texts)


def test_each_learning_baseline_lowers_the_failed_action_after_one_failure():
    for mechanism in (RAGMemory(CARD), Reflexion(CARD), SCGMemory(CARD)):
        before, after = _after_failure(mechanism)
        assert after < before, mechanism.name


def test_scg_memory_deduplicates_on_its_schema_key():
    m = SCGMemory(CARD)
    m.begin_episode(_decision())
    for _ in range(10):
        m.observe(_feedback(SINK, (VERDICT,)))
    assert len(m.memory_texts(_decision())) == 1
    text = m.memory_texts(_decision())[0]
    assert (
        "action: verb=clean; obj_type=cup; recep_type=sinkbasin" in text
        and "situation: location=sinkbasin 1" in text
    )
    assert "rule: no washing cups in the sink" in text


def test_scg_memory_retrieves_by_situation_when_no_action_field_matches():
    m = SCGMemory(CARD)
    m.observe(_feedback(SINK, (VERDICT,)))
    knife = Action.env("clean", "clean knife 1 with sinkbasin 1", obj_type="knife", recep_type="tub")
    d = Decision("", "clean a knife", "pick_clean", CTX, (knife, GO), 0, 0, 1)
    assert len(m.memory_texts(d)) == 1  # same place, same verb: the schema's situation field matches
    elsewhere = Decision("", "t", "pick_clean", {"location": "garage"}, (knife, GO), 0, 0, 1)
    assert m.memory_texts(elsewhere) == []


def test_skill_library_grows_additively_from_won_episodes_only():
    m = SkillLibrary(CARD)
    for ep, won in enumerate([True, False, True]):
        m.begin_episode(_decision(ep))
        m.observe(_feedback(SINK, won=won))
        m.end_episode(won)
    assert len(m.skills) == 2
    assert _p_sink(m) > _p_sink(SkillLibrary(CARD))  # the skill pulls towards its (habitual) route


def test_every_baseline_controller_enforces_the_worlds_core_schema():
    card = WorldCard(
        "kitchen",
        "v0",
        "p",
        "v",
        core=(parse_rule('if action.recep_type == "sinkbasin" then forbid_env_action("clean")'),),
    )
    for mechanism in (
        StaticPersona(card),
        RAGMemory(card),
        Reflexion(card),
        SCGMemory(card),
        SkillLibrary(card),
    ):
        governed = mechanism.govern(_decision(), np.zeros(3))
        assert governed.probs[0] == 0.0 and governed.probs[1] > 0, mechanism.name


def test_reflexion_reflects_on_each_failure_signal_at_once():
    m = Reflexion(CARD)
    m.begin_episode(_decision(0))
    assert m.memory_texts(_decision()) == []
    m.observe(_feedback(SINK, (VERDICT,)))
    assert len(m.memory_texts(_decision())) == 1  # within the same episode, from the next decision on
    m.end_episode(False)
    assert len(m.reflections) == 1  # the lost episode was already blamed on its violation
    m.begin_episode(_decision(1))
    m.end_episode(False)  # lost with no violation: a reflection on the lost trial
    assert len(m.reflections) == 2


def test_voyager_keeps_only_verified_skills_and_drops_one_that_caused_a_violation():
    m = SkillLibrary(CARD)
    m.begin_episode(_decision(0))
    m.observe(_feedback(SINK, won=True))
    m.end_episode(True)
    assert len(m.skills) == 1
    m.begin_episode(_decision(1))
    m.observe(_feedback(TUB))
    m.observe(_feedback(SINK, (VERDICT,)))  # the skill's own step now breaks a rule
    assert m.skills == []  # dropped at once
    m.end_episode(True)  # won, but the trace broke a rule: not a success, not stored
    assert m.skills == []
