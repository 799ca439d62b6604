from scars.agents.memory import InsightList
from scars.agents.memory.insight import START_IMPORTANCE, Op
from scars.agents.rule_writer import LLMInsightEditor, parse_insight_ops
from scars.envs.api import Verdict
from support.kitchen import CARD, GO, SINK, TUB, VERDICT, decision, feedback

FRIDGE = Verdict("fridge", "Open the fridge only with empty hands.", "v")


def _clean_win(m, episode, commands):
    m.begin_episode(decision(episode))
    for action in commands:
        m.observe(feedback(action, episode=episode))
    m.end_episode(True)


def test_a_failure_adds_an_insight_that_enters_the_context():
    m = InsightList(CARD)
    m.begin_episode(decision(0))
    m.observe(feedback(SINK, (VERDICT,)))
    (text,) = m.memory_texts(decision())
    assert text.startswith("no washing cups in the sink") and "clean cup 1 with sinkbasin 1" in text
    assert m.insights[0].importance == START_IMPORTANCE and m.window(decision())[1].polarity == -1
    m.observe(feedback(SINK, (VERDICT,)))  # the same failure again: upvoted
    assert m.insights[0].importance == START_IMPORTANCE + 1
    m.observe(feedback(TUB, (VERDICT,)))  # the same cause, another command: edited (and upvoted)
    assert "clean cup 1 with bathtubbasin 1" in m.insights[0].text and m.insights[0].importance == 4
    assert m.stats()["insight_ops_add"] == 1 and m.stats()["insight_ops_edit"] == 1


def test_an_insight_a_success_contradicts_is_downvoted_out():
    m = InsightList(CARD)
    m.begin_episode(decision(0))
    m.observe(feedback(SINK, (VERDICT,)))
    m.end_episode(False)
    # two won episodes execute the warned-against command in the same situation and the verifier passes it
    _clean_win(m, 1, (SINK,))
    assert m.insights[0].importance == START_IMPORTANCE - 1
    _clean_win(m, 2, (SINK,))
    assert [i.key for i in m.insights] == ["win:pick_clean"]  # the warning is gone, the success route stays
    assert m.stats()["insights_removed"] == 1 and m.stats()["insight_ops_downvote"] == 2
    assert not any("no washing cups" in t for t in m.memory_texts(decision()))


def test_a_success_that_did_without_the_warned_command_upvotes_it():
    m = InsightList(CARD)
    m.observe(feedback(SINK, (VERDICT,)))
    _clean_win(m, 1, (TUB,))  # the sink was admissible and avoided
    assert m.insights[0].importance == START_IMPORTANCE + 1
    route = m.insights[1]
    assert route.polarity == 1 and route.commands == ["clean cup 1 with bathtubbasin 1"]
    m.observe(feedback(TUB, (VERDICT,)))  # a route whose step fails is downvoted
    assert route.importance == START_IMPORTANCE - 1


def test_only_the_top_k_by_importance_are_in_context():
    m = InsightList(CARD, k=1)
    m.observe(feedback(SINK, (VERDICT,)))
    m.observe(feedback(GO, (FRIDGE,)))
    m.observe(feedback(GO, (FRIDGE,)))  # upvoted: more important
    assert m.memory_texts(decision()) == [m.insights[1].text]


def test_a_model_answers_with_expels_operations():
    ops = parse_insight_ops(
        "ADD: Wash cups in the bathtub.\nEDIT 0: Cups go to the tub.\nUPVOTE 1\nnoise\nDOWNVOTE 0"
    )
    assert ops == [
        Op("ADD", text="Wash cups in the bathtub."),
        Op("EDIT", 0, text="Cups go to the tub."),
        Op("UPVOTE", 1),
        Op("DOWNVOTE", 0),
    ]
    prompts = []
    editor = LLMInsightEditor(lambda p: prompts.append(p) or "ADD: Never wash cups in sinkbasin 1.", CARD)
    m = InsightList(CARD, editor=editor)
    m.observe(feedback(SINK, (VERDICT,)))
    assert m.memory_texts(decision()) == ["Never wash cups in sinkbasin 1."]
    editor.write_text = lambda p: prompts.append(p) or "DOWNVOTE 0\nDOWNVOTE 0\nUPVOTE 7"
    _clean_win(m, 1, (TUB,))
    assert m.insights == [] and "0. Never wash cups in sinkbasin 1." in prompts[-1]
    assert "bathtubbasin" in prompts[-1]
