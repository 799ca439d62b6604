"""One agent for every world: registries a user extends from their own file, the composite signal's terms in a
tier-1 run, calibration that drives a run, and the commons arena behind the same interface."""

from __future__ import annotations

import importlib.util
import json
import textwrap

import numpy as np
import pytest
from click.testing import CliRunner

from scars.agents.policies import SimulatedLM
from scars.agents.registry import BACKENDS, METHODS
from scars.experiments.cli import main
from scars.experiments.config import Tier1Config
from scars.experiments.tier1 import run_tier1
from scars.synthesis.errors import ConfigError

PLUGIN = '''
import numpy as np

from scars.agents.memory.base import MemoryMechanism
from scars.agents.policies.base import ContextItem
from scars.agents.registry import register_backend, register_method


class Diary(MemoryMechanism):
    """Writes down every failed command and reads the last two back."""

    name = "diary"

    def __init__(self, card):
        super().__init__(card)
        self.pages = []

    def observe(self, feedback):
        if feedback.violated:
            self.pages.append(f"Do not {feedback.action.text} again.")

    def window(self, decision):
        return (self.persona(), *(ContextItem("memory", p, polarity=-1) for p in self.pages[-2:]))


class FirstAction:
    name, writes_text = "first", False

    def logits(self, inp, rng):
        return np.where(np.arange(len(inp.actions)) == 0, 0.0, -3.0)

    def utter(self, inp, action, blocked):
        return "ok."

    def write_text(self, prompt):
        raise RuntimeError("no text")


@register_method("diary")
def make_diary(spec):
    return Diary(spec.world.card)


@register_backend("first")
def make_first(settings):
    return FirstAction()
'''


@pytest.fixture(scope="module")
def plugin(tmp_path_factory):
    path = tmp_path_factory.mktemp("plugin") / "my_plugin.py"
    path.write_text(textwrap.dedent(PLUGIN))
    spec = importlib.util.spec_from_file_location("my_plugin", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_method_and_a_backend_registered_from_a_file_outside_the_package_run(plugin, tmp_path):
    assert "diary" in METHODS and "first" in BACKENDS
    result = run_tier1(
        Tier1Config(method="diary", backend="first", episodes=3, schedule="smoke", max_steps=10), tmp_path
    )
    assert result.summary["method"] == "diary" and result.summary["steps"] > 0
    assert set(result.steps["utterance"]) == {"ok."}


def test_unknown_registry_names_list_the_known_ones():
    with pytest.raises(ConfigError, match=r"unknown memory method .nope.; known: .*static_persona.*scars"):
        Tier1Config(method="nope")
    with pytest.raises(ConfigError, match=r"unknown policy backend .gpt9.; known: embedded, hf, openai"):
        Tier1Config(backend="gpt9")
    with pytest.raises(ConfigError, match="already registered"):
        METHODS.register("scars")(lambda spec: None)


def test_a_tier1_run_records_every_term_of_the_signal_with_nonzero_z_c_and_z_i(tmp_path):
    # 36 episodes: the base policy meets actions H forbids (e.g. throwing something away) only now and then — on
    # seed 1's games in 32 steps (seed 0's never offer one with mass since scars no longer blocks the fridge)
    result = run_tier1(Tier1Config(method="scars", episodes=36, seed=1, search_iterations=60), tmp_path)
    signal = result.summary["signal"]
    assert signal["n"] == result.summary["steps"]
    assert signal["z_V"]["nonzero_steps"] > 0 and signal["z_C"]["nonzero_steps"] > 0
    assert signal["z_I"]["nonzero_steps"] > 0 and signal["crossings"] > 0
    assert signal["z_R"]["max"] == 0.0  # the household has no reputation
    for column in ("z_V", "z_R", "z_C", "z_I", "d_t"):
        assert result.steps[column].notna().all()
    baseline = run_tier1(Tier1Config(method="static_persona", episodes=2, seed=0), tmp_path / "b")
    assert baseline.summary["signal"] is None  # no monitor: no reading, not a row of zeros


def test_calibrate_fits_weights_on_trajectories_and_its_output_drives_a_run(tmp_path):
    first = run_tier1(Tier1Config(method="scars", episodes=6, seed=1, search_iterations=40), tmp_path / "val")
    steps = tmp_path / "steps.csv"
    first.steps.to_csv(steps, index=False)
    out = tmp_path / "signal.json"
    result = CliRunner().invoke(main, ["calibrate", str(steps), "--out", str(out), "--grid", "4"])
    assert result.exit_code == 0, result.output
    record = json.loads(out.read_text())
    assert abs(sum(record["weights"]) - 1) < 1e-9 and 0.5 <= record["tau"] < 0.7311
    assert record["fit"]["n_steps"] == len(first.steps) and record["fit"]["f1"] == 1.0
    run = CliRunner().invoke(
        main,
        [
            "run",
            "tier1",
            "--method",
            "scars",
            "--episodes",
            "2",
            "--search-iterations",
            "40",
            "--signal-config",
            str(out),
            "--out",
            str(tmp_path / "run"),
        ],
    )
    assert run.exit_code == 0, run.output
    from scars.agents.registry import MethodSpec  # the config reaches the agent's monitor
    from scars.envs.household.adapter import HouseholdAdapter
    from scars.envs.household.env import HouseholdEnv
    from scars.experiments.calibrate import load_signal_config

    signal = load_signal_config(out)
    agent = METHODS.get("scars")(
        MethodSpec(HouseholdAdapter(HouseholdEnv()), SimulatedLM(), tmp_path / "a", 0, {"signal": signal})
    )
    assert (
        agent.monitor.config.weights == tuple(record["weights"]) and agent.monitor.config.tau == record["tau"]
    )
    agent.close()


def test_calibrate_bad_input_is_one_line_and_exit_2(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("a,b\n1,2\n")
    result = CliRunner().invoke(main, ["calibrate", str(bad), "--out", str(tmp_path / "o.json")])
    assert (
        result.exit_code == 2
        and "lacks the signal columns" in result.output
        and "Traceback" not in result.output
    )
    result = CliRunner().invoke(
        main, ["run", "tier1", "--signal-config", str(tmp_path / "none.json"), "--out", str(tmp_path / "r")]
    )
    assert result.exit_code == 2 and "is not a file" in result.output


def test_the_scars_agent_plays_a_commons_seat_and_punishment_raises_z_r(tmp_path):
    """The same agent, unchanged, in the commons arena: one seat among scripted peers who punish over-harvests."""
    from scars.agents.registry import MethodSpec
    from scars.envs.api import Feedback
    from scars.envs.commons import commons_v0
    from scars.envs.commons.adapter import CommonsAdapter

    env = commons_v0.CommonsParallelEnv(commons_v0.CommonsConfig(arena="A"))
    observations, infos = env.reset(seed=0)
    me = env.possible_agents[0]
    world = CommonsAdapter(env, me)
    agent = METHODS.get("scars")(
        MethodSpec(world, SimulatedLM(), tmp_path, 0, {"agent_id": me, "search_iterations": 40})
    )
    readings = []
    t = 0
    while env.agents and t < 30:
        decision = world.decision(observations[me], infos[me], t=t)
        # a greedy seat: harvest the most it can; punish nobody; others: harvest the share, punish the greedy
        logits = np.array(
            [
                float(a.arg("amount", 0) or 0)
                if a.name == "harvest"
                else (-5.0 if a.name == "punish" else 0.0)
                for a in decision.actions
            ]
        )
        governed = agent.govern(decision, logits)
        chosen = -1 if governed.fallback is not None else int(np.argmax(governed.probs))
        action = governed.fallback if chosen < 0 else decision.actions[chosen]
        actions = {me: world.command(decision, action)}
        for other in env.agents:
            if other == me:
                continue
            phase = infos[other]["phase"]
            if phase == "harvest":
                actions[other] = {"harvest": int(infos[other]["sustainable_share"])}
            elif phase == "punishment":
                vec = np.zeros(len(env.possible_agents), dtype=np.int8)
                vec[0] = int(infos[me]["own_request"] > infos[me]["sustainable_share"])
                actions[other] = {"punish": vec}
            else:
                actions[other] = {"message": 0, "limit": 0, "about": 0}
        observations, rewards, terminations, truncations, infos = env.step(actions)
        if me not in infos:
            break
        reading = agent.observe(
            Feedback(
                decision,
                action,
                chosen,
                tuple(logits),
                "",
                rewards[me],
                world.verdicts(infos[me]),
                world.punishments(infos[me]),
                False,
                "I harvest.",
            )
        )
        readings.append(reading)
        t += 1
    stats = agent.stats()
    agent.close()
    assert max(r.z.z_r for r in readings) > 0  # peers' punishments reach z_R through the TrustGate
    assert stats["accommodations_by_punishment"] >= 1
    assert stats["temp_masks_set"] >= 1


def test_nothing_under_agents_names_a_world_concept():
    """The agent layer reads persona, context keys, verifier ids and vocabulary from the world adapter only: no
    string constant in agents/ code (docstrings aside) names a context key, object, receptacle or tool of a world."""
    import ast
    import re
    from pathlib import Path

    from scars.envs.commons.adapter import CLASSES as COMMONS_CLASSES
    from scars.envs.household.generator import generate_game
    from scars.envs.household.world import OBJECT_CLASSES, World

    world = World(generate_game(0))
    world.reset()
    vocabulary = set(world.context()) | {v for members in OBJECT_CLASSES.values() for v in members}
    vocabulary |= {a["name"] for a in world.admissible_actions()} | {
        "sinkbasin",
        "fridge",
        "microwave",
        "household",
    }
    vocabulary |= {"pool_resource_level", "sustainable_share", "karma", "commons"} | set(COMMONS_CLASSES)
    vocabulary |= {m for members in COMMONS_CLASSES.values() for m in members}
    vocabulary -= {"step", "look", "help"}  # the DSL's own step counter; English verbs
    assert {"location", "held_type", "cup", "harvest"} <= vocabulary  # the check has teeth

    def world_words(source: str) -> list[str]:
        tree = ast.parse(source)
        docstrings = {  # every bare string statement: module, class, function and attribute docstrings
            id(node.value)
            for node in ast.walk(tree)
            if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
        }
        return [
            word
            for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
            for word in re.findall(r"[a-z_]+", node.value.lower())
            if word in vocabulary
        ]

    assert world_words('KEYS = ("location", "held_object")') == ["location", "held_object"]  # the check fires
    root = Path(__file__).resolve().parents[2] / "agents"
    found = {str(p): w for p in sorted(root.rglob("*.py")) if (w := world_words(p.read_text()))}
    assert found == {}


def test_the_information_protocol_is_counted_and_the_oracle_is_an_option(tmp_path):
    """Under the default protocol every method learns one verdict per executed action and asks the verifier
    nothing (the summary's counters prove it); with ``--oracle counterfactual`` the scars agent's what-if
    extraction asks it, and the summary counts those questions; ``--shield`` (any method) refuses flagged choices
    before they execute, so a shielded baseline executes no violation at all."""
    for method in ("reflexion", "scars"):
        summary = run_tier1(
            Tier1Config(method=method, episodes=12, seed=0, search_iterations=40), tmp_path / method
        ).summary
        assert summary["verifier_calls"] == 0, method
        assert (
            summary["verifier_calls_per_action"] == 1.0 and summary["verdicts_received"] == summary["steps"]
        )
    scars = run_tier1(
        Tier1Config(method="scars", episodes=12, seed=0, search_iterations=40, oracle="counterfactual"),
        tmp_path / "oracle",
    ).summary
    assert scars["method"] == "scars+oracle"
    assert scars["verifier_calls"] > scars["steps"] and scars["verifier_calls_per_action"] > 1
    state = run_tier1(
        Tier1Config(method="rag", episodes=4, seed=0, verdicts="state"), tmp_path / "state"
    ).summary
    assert state["verifier_calls"] == 0 and state["state_labels_received"] > state["steps"]
    shielded = run_tier1(
        Tier1Config(method="reflexion", episodes=12, seed=0, oracle="counterfactual", shield=True),
        tmp_path / "shield",
    ).summary
    assert shielded["method"] == "reflexion+oracle+shield"
    assert shielded["violations"] == 0 and shielded["shield_refusals"] > 0
    assert shielded["verifier_calls"] >= shielded["steps"]
    with pytest.raises(ConfigError, match="shield needs oracle"):
        Tier1Config(method="reflexion", shield=True)


def test_a_method_that_asks_for_a_verdict_the_protocol_does_not_allow_fails_the_run(tmp_path):
    """The protocol is enforced, not just documented: a method that asks the world's verifier about an action it
    has not executed (a what-if) stops the run with ProtocolError unless the counterfactual oracle is on."""
    from scars.agents.memory.base import MemoryMechanism
    from scars.envs.api import ProtocolError

    class Peeker(MemoryMechanism):
        def __init__(self, world):
            super().__init__(world.card)
            self.world = world

        def window(self, decision):
            for a in decision.actions:  # what would happen if I took each action here?
                self.world.check(decision.context, a)
            return super().window(decision)

    if "peeker_for_test" not in METHODS:
        METHODS.register("peeker_for_test")(lambda spec: Peeker(spec.world))
    with pytest.raises(ProtocolError, match="information protocol"):
        run_tier1(Tier1Config(method="peeker_for_test", episodes=1, seed=0), tmp_path / "peek")
    summary = run_tier1(
        Tier1Config(method="peeker_for_test", episodes=1, seed=0, oracle="counterfactual"),
        tmp_path / "oracle",
    ).summary
    assert summary["verifier_calls"] > summary["steps"]
