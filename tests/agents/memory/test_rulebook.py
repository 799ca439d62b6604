import numpy as np

from scars.agents.memory import Rulebook
from scars.agents.policies import PolicyInput, SimulatedLM, build_prompt
from scars.envs.api import Verdict
from support.kitchen import CARD, CTX, GO, SINK, TUB, VERDICT, decision, feedback


def _p(mechanism, action_index=0):
    inp = PolicyInput(
        "", "clean a cup", CTX, (SINK, TUB, GO), mechanism.window(decision()), np.array([1, 0.6, 0])
    )
    lg = SimulatedLM().logits(inp, np.random.default_rng(0))
    p = np.exp(lg - lg.max())
    return (p / p.sum())[action_index]


def test_a_verified_failure_adds_one_rule_shown_at_every_step():
    book = Rulebook(CARD)
    book.begin_episode(decision(0))
    assert book.memory_texts(decision()) == []
    before = _p(book)
    book.observe(feedback(GO))  # no verdict: nothing learned
    assert book.memory_texts(decision()) == []
    book.observe(feedback(SINK, (VERDICT,)))
    (rule,) = book.memory_texts(decision())
    assert rule == "no washing cups in the sink (Broken by: 'clean cup 1 with sinkbasin 1' at sinkbasin 1.)"
    book.end_episode(False)
    book.begin_episode(decision(1))
    # shown at every step (any decision, whatever the situation), under the prompt's rules
    later = decision(1, step=0, context={"location": "fridge 1", "held_object": "none"})
    assert book.memory_texts(later) == [rule]
    assert f"Rules you must follow:\n- {rule}" in build_prompt(
        PolicyInput("", "t", later.context, later.actions, book.window(later))
    )
    assert _p(book) < before  # the simulated LM reads it: the failed command is less likely


def test_failures_of_the_same_cause_merge_into_one_rule():
    book = Rulebook(CARD)
    book.observe(feedback(SINK, (VERDICT,)))
    book.observe(feedback(SINK, (VERDICT,)))  # the same failure again: nothing new
    book.observe(feedback(TUB, (VERDICT,)))  # the same cause, another command: merged
    book.observe(feedback(GO, (Verdict("fridge", "Open the fridge only with empty hands.", "v"),)))
    texts = book.memory_texts(decision())
    assert len(texts) == 2 and book.stats() == {"rulebook_rules": 2}
    assert "'clean cup 1 with sinkbasin 1' at sinkbasin 1, 'clean cup 1 with bathtubbasin 1'" in texts[0]
    assert texts[1].startswith("Open the fridge only with empty hands.")


def test_a_model_writes_the_rule_and_its_merge():
    asked = []

    def write(fb, verdict, current):
        asked.append(current)
        return f"rule v{len(asked)}"

    book = Rulebook(CARD, write=write)
    book.observe(feedback(SINK, (VERDICT,)))
    book.observe(feedback(TUB, (VERDICT,)))
    assert asked == [None, "rule v1"] and book.memory_texts(decision()) == ["rule v2"]


def test_the_book_carries_over():
    book = Rulebook(CARD)
    book.observe(feedback(SINK, (VERDICT,)))
    again = Rulebook(CARD)
    again.load_memory_state(book.memory_state())
    assert again.memory_texts(decision()) == book.memory_texts(decision())
