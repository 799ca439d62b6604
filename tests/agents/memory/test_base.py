"""Every text baseline states a rule as the world states it: each schedule file's rule texts, fed through every
registered baseline's memory (as the verifier's verdict, and as the rules in force for the method told them) and
rendered by the prompt builder, appear verbatim, never behind a word that negates them."""

import re

import numpy as np
import pytest

from scars.agents.builtin import COMPARISON
from scars.agents.policies import PolicyInput, SimulatedLM, build_prompt
from scars.agents.registry import METHODS, MethodSpec
from scars.envs.api import Verdict
from scars.experiments.schedules import SCHEDULE_FILES, load_schedule_file
from support.kitchen import CARD, CTX, SINK, decision, feedback

BASELINES = tuple(m for m in COMPARISON if m != "scars")
KEEPS_NO_RULE_TEXT = {"voyager"}
"""Voyager's library holds verified successful action sequences only: no rule text ever enters its prompt."""
NEGATION = re.compile(r"(?:\bnever|\bnot|\bno|n't|\bavoid|\bdon't|\bforbidden)[\s:,'\"(\-]*$", re.IGNORECASE)


def _world_texts() -> list[tuple[str, str, str]]:
    out = []
    for path in sorted(SCHEDULE_FILES.glob("*.toml")):
        _, schedule = load_schedule_file(str(path))
        out += [(path.stem, r.id, r.description) for r in schedule.rule_schedule(36).rules]
    return out


TEXTS = _world_texts()


class _World:
    card = CARD


def _prompt(method: str, rule_id: str, text: str, tmp_path) -> str:
    agent = METHODS.get(method)(MethodSpec(_World(), SimulatedLM(), tmp_path, 0))
    told = decision(0, rules=(text,))
    agent.begin_episode(told)
    agent.observe(feedback(SINK, (Verdict(rule_id, text, CARD.verifier_id),)))
    agent.end_episode(False)
    agent.begin_episode(decision(1, rules=(text,)))
    window = agent.window(decision(1, rules=(text,)))
    return build_prompt(PolicyInput("", "clean a cup", CTX, told.actions, window, np.zeros(3)))


def test_every_schedule_file_gives_rule_texts():
    assert len({f for f, _, _ in TEXTS}) == len(list(SCHEDULE_FILES.glob("*.toml"))) >= 5
    assert {"rulebook", "insight", "static_persona"} <= set(BASELINES)


@pytest.mark.parametrize("method", BASELINES)
def test_the_rule_is_stated_as_the_world_states_it(method, tmp_path):
    for schedule, rule_id, text in TEXTS:
        prompt = _prompt(method, rule_id, text, tmp_path)
        where = f"{method} on {schedule}:{rule_id}"
        if method in KEEPS_NO_RULE_TEXT:
            assert text not in prompt, where
            continue
        starts = [m.start() for m in re.finditer(re.escape(text), prompt)]
        assert starts, f"{where}: the world's sentence {text!r} is not in the prompt"
        for start in starts:
            assert not NEGATION.search(prompt[max(0, start - 24) : start]), f"{where}: negated: {prompt!r}"
        # no rewording of its opening either (a lowered first letter is a template splicing it into a sentence)
        body = re.escape(text[1:])
        for m in re.finditer(body, prompt):
            assert prompt[m.start() - 1] == text[0], f"{where}: the sentence was re-cased: {prompt!r}"


def test_the_check_catches_an_inverting_template():
    prompt = "Rules you must follow:\n- Never Open drawers only with empty hands."
    start = prompt.index("Open drawers")
    assert NEGATION.search(prompt[start - 24 : start])


def test_the_comparison_lists_every_built_in_method_whatever_was_imported_first():
    """COMPARISON once came out as ("scars",) when the scars agent (which imports the baselines' base) was imported
    before ``agents.builtin``: the tier-1 comparison then ran scars alone. A fresh interpreter checks both orders."""
    import subprocess
    import sys

    for first in ("scars.agents.scars_agent", "scars.agents.memory", "scars.agents.registry"):
        code = f"import {first}\nfrom scars.agents.builtin import COMPARISON\nprint(','.join(COMPARISON))"
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
        assert out.strip() == ",".join(COMPARISON), first
    assert set(COMPARISON) >= {"scars", "static_persona", "rag", "reflexion", "scg_mem", "voyager"}
