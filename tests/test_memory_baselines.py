import numpy as np

from agents.memory import RAGMemory, Reflexion, SCGMemory, SkillLibrary, StaticPersona, StepOutcome, Violation
from agents.policies import PolicyInput, SimulatedLM, render_window
from synthesis.dsl import Action

SINK = Action.env(
    "clean", "clean cup 1 with sinkbasin 1", obj="cup 1", obj_type="cup", recep_type="sinkbasin"
)
TUB = Action.env(
    "clean", "clean cup 1 with bathtubbasin 1", obj="cup 1", obj_type="cup", recep_type="bathtubbasin"
)
GO = Action.env("go", "go to fridge 1", recep="fridge 1", recep_type="fridge")
CTX = {"location": "sinkbasin 1", "held_object": "cup 1"}
VIOLATION = Violation("no_cup_in_sink", "no washing cups in the sink", 3)


def _outcome(action, violations=(), episode=0, step=3, won=False):
    return StepOutcome(
        episode, step, "clean a cup", "pick_clean", CTX, action, "You clean the cup.", 0.0, violations, won
    )


def _p_sink(mechanism):
    window = mechanism.window("You are at sinkbasin 1.", CTX)
    inp = PolicyInput(
        "You are at sinkbasin 1.", "clean a cup", CTX, (SINK, TUB, GO), window, np.array([1, 0.6, 0])
    )
    lg = SimulatedLM().logits(inp, np.random.default_rng(0))
    p = np.exp(lg - lg.max())
    return (p / p.sum())[0]


def _after_failure(mechanism, won=False):
    mechanism.begin_episode(0, "clean a cup", "pick_clean", ())
    base = _p_sink(mechanism)
    mechanism.observe(_outcome(SINK, (VIOLATION,)))
    mechanism.end_episode(won)
    mechanism.begin_episode(1, "clean a cup", "pick_clean", ())
    return base, _p_sink(mechanism)


def test_static_persona_declares_the_rules_in_force_and_learns_nothing():
    m = StaticPersona()
    m.begin_episode(0, "clean a cup", "pick_clean", ["wash cups in the sinkbasin"])
    assert "Never wash cups in the sinkbasin" in render_window(m.window("", CTX))
    m.begin_episode(1, "clean a cup", "pick_clean", [])
    m.observe(_outcome(SINK, (VIOLATION,)))
    assert m.memory_texts() == []


def test_reflexion_keeps_the_last_three_reflections():
    m = Reflexion()
    for ep in range(5):
        m.begin_episode(ep, "clean a cup", "pick_clean", ())
        m.observe(_outcome(SINK, (Violation("r", f"rule {ep}", 1),), episode=ep))
        m.end_episode(False)
    texts = m.memory_texts()
    assert len(texts) == 3 and "rule 4" in texts[-1] and "rule 1" not in " ".join(texts)


def test_each_learning_baseline_lowers_the_failed_action_after_one_failure():
    for mechanism in (RAGMemory(), Reflexion(), SCGMemory()):
        if isinstance(mechanism, SCGMemory):
            mechanism.set_candidates((SINK, TUB, GO))
        before, after = _after_failure(mechanism)
        assert after < before, mechanism.name


def test_scg_memory_deduplicates_on_its_schema_key():
    m = SCGMemory()
    m.begin_episode(0, "t", "pick_clean", ())
    for _ in range(10):
        m.observe(_outcome(SINK, (VIOLATION,)))
    m.set_candidates((SINK, GO))
    assert len(m.memory_texts()) == 1


def test_skill_library_grows_additively_from_won_episodes_only():
    m = SkillLibrary()
    for ep, won in enumerate([True, False, True]):
        m.begin_episode(ep, "clean a cup", "pick_clean", ())
        m.observe(_outcome(SINK, won=won))
        m.end_episode(won)
    assert len(m.skills) == 2
    assert _p_sink(m) > _p_sink(SkillLibrary())  # the skill pulls towards its (habitual) route
