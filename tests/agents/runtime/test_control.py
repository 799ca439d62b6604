"""The control plane (SPEC §1, §4.2, §6 Prop. 1): hard/soft masks, fallback, core schema, temporary masks, index."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scars.agents.runtime import Scar, Scope
from scars.agents.runtime.control import ControlPlane, ControlPlaneError
from scars.synthesis.dsl import (
    Action,
    And,
    Compare,
    CompareFeatures,
    ForbidEnvAction,
    ForbidToolArg,
    ForbidToolCall,
    InClass,
    Named,
    Or,
    Rule,
    parse_rule,
)
from scars.synthesis.dsl.semantics import fires
from scars.synthesis.errors import ConfigError

CLASSES = {"dishware": {"cup", "plate", "bowl", "mug"}}
SINK_RULE = 'if in_class(action.obj_type, "dishware") and action.recep == "sinkbasin 1" then forbid_env_action("move")'


def household_actions() -> list[Action]:
    return [
        Action.env("move", obj="cup 1", obj_type="cup", recep="sinkbasin 1"),
        Action.env("move", obj="plate 1", obj_type="plate", recep="sinkbasin 1"),
        Action.env("move", obj="cup 1", obj_type="cup", recep="cabinet 1"),
        Action.env("clean", obj="cup 1", obj_type="cup", recep="sinkbasin 1"),
        Action.env("move", obj="apple 1", obj_type="apple", recep="sinkbasin 1"),
        Action("text", "think", text="I should not put dishware in the sink"),
    ]


def test_prop1_hard_mask_gives_exactly_zero_probability_on_every_covered_action():
    """Prop. 1 (SPEC §6): after admitting a scar covering (q, F), Σ_{a∈F} π(a|q) = 0 exactly."""
    rng = np.random.default_rng(7)
    plane = ControlPlane(classes=CLASSES)
    plane.add(Scar(parse_rule(SINK_RULE)))
    actions = household_actions()
    failed = {0, 1}  # F: both dishware items moved to the sink
    for _ in range(200):
        logits = rng.normal(0.0, 5.0, size=len(actions))
        logits[0] = 50.0  # the base policy strongly prefers the failure
        governed = plane.govern({"step": 12}, actions, logits)
        assert all(governed.probs[i] == 0.0 for i in failed)
        assert governed.masked.tolist() == [True, True, False, False, False, False]
        assert governed.probs.sum() == pytest.approx(1.0)
        assert governed.fallback is None


def test_prop1_soft_mode_leaks_a_measurable_positive_probability():
    """The Soft Bias Only ablation: φ = soft_bias instead of −∞, so the boundary leaks (measured here)."""
    actions = household_actions()
    logits = np.zeros(len(actions))
    hard = ControlPlane(classes=CLASSES, scars=[Scar(parse_rule(SINK_RULE))])
    soft = ControlPlane(classes=CLASSES, scars=[Scar(parse_rule(SINK_RULE))], mode="soft", soft_bias=-5.0)
    leak = soft.govern({}, actions, logits).probs[[0, 1]].sum()
    # uniform base over 6 actions, two of them penalised by e^-5: leak = 2e^-5 / (2e^-5 + 4)
    assert leak == pytest.approx(2 * np.exp(-5) / (2 * np.exp(-5) + 4), rel=1e-12)
    assert 0.003 < leak < 0.004
    assert hard.govern({}, actions, logits).probs[[0, 1]].sum() == 0.0
    # the soft logit is base + soft_bias per firing rule
    assert soft.govern({}, actions, logits).logits[0] == -5.0


def test_soft_bias_adds_up_over_firing_rules():
    rules = [
        Scar(parse_rule('if action.obj_type == "cup" then forbid_env_action("move")')),
        Scar(parse_rule('if action.recep == "sinkbasin 1" then forbid_env_action("move")')),
    ]
    plane = ControlPlane(scars=rules, mode="soft", soft_bias=-2.0)
    governed = plane.govern({}, household_actions()[:1], [1.0])
    assert governed.logits[0] == pytest.approx(1.0 - 4.0)
    assert set(governed.fired[0][1]) == {r.id for r in rules}


def test_every_control_action_masked_takes_the_fallback_with_probability_one():
    plane = ControlPlane(
        scars=[Scar(parse_rule('if step >= 0 then forbid_env_action("move")'))], fallback="ask_human"
    )
    actions = [Action.env("move", obj="a"), Action.env("move", obj="b"), Action("text", "say")]
    governed = plane.govern({"step": 3}, actions, [1.0, 2.0, 3.0])
    assert governed.fallback == Action("fallback", "ask_human")
    assert governed.probs.tolist() == [0.0, 0.0, 0.0]
    assert not np.isnan(governed.probs).any()
    # no candidates at all: still a⊥, never a division by zero
    assert plane.govern({}, [], []).fallback == Action("fallback", "ask_human")


def test_text_actions_are_never_hard_masked_and_no_fallback_without_control_actions():
    plane = ControlPlane(scars=[Scar(parse_rule('if action.kind == "text" then forbid_env_action("say")'))])
    text = [Action("text", "say", text="hello"), Action("text", "say", text="bye")]
    governed = plane.govern({}, text, [0.0, 0.0])
    assert governed.fallback is None
    assert governed.masked.tolist() == [False, False]
    assert governed.probs.tolist() == [0.5, 0.5]


def test_core_schema_always_applies_and_is_read_only():
    core = [
        parse_rule('if data_scope_is("internal") and tool_is("send_data") then forbid_tool_call("send_data")')
    ]
    plane = ControlPlane(core=core)
    actions = [Action.tool("send_data", dest="x"), Action.tool("lookup")]
    governed = plane.govern({"data_scope": "internal"}, actions, [3.0, 0.0])
    assert governed.probs[0] == 0.0
    assert governed.fired[0][1][0].startswith("H:")
    assert plane.active_ids == ()
    with pytest.raises(ControlPlaneError, match="core schema"):
        plane.remove(plane.core_ids[0])


def test_forbid_tool_arg_masks_only_the_matching_argument():
    plane = ControlPlane(
        scars=[Scar(parse_rule('if tool_is("harvest") then forbid_tool_arg("harvest", "amount", 20)'))]
    )
    actions = [Action.tool("harvest", amount=20), Action.tool("harvest", amount=10), Action.tool("harvest")]
    assert plane.masked({}, actions) == [True, False, False]


def test_or_guards_fire_on_either_disjunct_once():
    rule = parse_rule(
        'if (action.obj_type == "cup" and location == "kitchen") or action.obj_type == "knife" '
        'then forbid_env_action("take")'
    )
    scar = Scar(rule)
    plane = ControlPlane(scars=[scar])
    cup, knife, apple = (Action.env("take", obj_type=t) for t in ("cup", "knife", "apple"))
    assert plane.masked({"location": "kitchen"}, [cup, knife, apple]) == [True, True, False]
    assert plane.masked({"location": "garden"}, [cup, knife, apple]) == [False, True, False]
    assert plane.govern({"location": "kitchen"}, [cup], [0.0]).fired == ((0, (scar.id,)),)


def test_add_remove_and_active_ids():
    a = Scar(parse_rule('if action.obj_type == "cup" then forbid_env_action("move")'))
    b = Scar(parse_rule('if action.obj_type == "plate" then forbid_env_action("move")'))
    plane = ControlPlane(scars=[a])
    assert plane.add(b) is True
    assert plane.add(b) is False  # same control plane: only the audit plane is refreshed
    assert plane.active_ids == (a.id, b.id)
    move_cup = Action.env("move", obj_type="cup")
    assert plane.masked({}, [move_cup]) == [True]
    assert plane.remove(a.id) == a
    assert plane.masked({}, [move_cup]) == [False]
    with pytest.raises(ControlPlaneError, match=a.id):
        plane.remove(a.id)


def test_temporary_mask_applies_until_its_step_and_lifts():
    rule = parse_rule('if pool_resource_level < 30 then forbid_tool_call("harvest")')
    plane = ControlPlane()
    mask_id = plane.set_temporary_mask(rule, until_step=10)
    harvest = [Action.tool("harvest", amount=5), Action.tool("wait")]
    q = {"pool_resource_level": 20}
    assert plane.masked(q, harvest, step=9) == [True, False]
    assert plane.masked(q, harvest, step=10) == [False, False]  # expired lazily at until_step
    assert plane.govern(q, harvest, [0.0, 0.0], step=3).probs[0] == 0.0
    assert plane.lift_temporary_mask(mask_id) == rule
    assert plane.masked(q, harvest, step=3) == [False, False]
    with pytest.raises(ControlPlaneError, match="no temporary mask"):
        plane.lift_temporary_mask(mask_id)


def test_expire_unloads_temporary_masks_and_step_scoped_scars():
    rule = parse_rule('if pool_resource_level < 30 then forbid_tool_call("harvest")')
    scar = Scar(
        parse_rule('if tool_is("punish") then forbid_tool_call("punish")'), scope=Scope(expires_at_step=20)
    )
    plane = ControlPlane(scars=[scar])
    mask_id = plane.set_temporary_mask(rule, until_step=10)
    assert plane.expire(5).temp_mask_ids == ()
    expired = plane.expire(10)
    assert expired.temp_mask_ids == (mask_id,) and expired.scar_ids == ()
    assert plane.masked({}, [Action.tool("punish")], step=19) == [True]
    assert plane.masked({}, [Action.tool("punish")], step=20) == [False]
    assert plane.expire(25).scar_ids == (scar.id,)
    assert plane.active_ids == ()


def test_bad_arguments_raise_typed_errors_naming_the_value():
    with pytest.raises(ConfigError, match="'lenient'"):
        ControlPlane(mode="lenient")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="soft_bias"):
        ControlPlane(soft_bias=0.0)
    with pytest.raises(ConfigError, match="fallback"):
        ControlPlane(fallback="panic")
    plane = ControlPlane()
    with pytest.raises(ControlPlaneError, match="shape"):
        plane.govern({}, [Action.tool("a")], [0.0, 1.0])
    with pytest.raises(ControlPlaneError, match="finite"):
        plane.govern({}, [Action.tool("a")], [float("nan")])


def test_governed_probabilities_are_the_softmax_of_unmasked_logits():
    plane = ControlPlane(scars=[Scar(parse_rule('if action.obj == "b" then forbid_env_action("go")'))])
    actions = [Action.env("go", obj=o) for o in "abc"]
    governed = plane.govern({}, actions, [1.0, 5.0, 2.0])
    expected = np.exp([1.0, 2.0]) / np.exp([1.0, 2.0]).sum()
    assert governed.probs[[0, 2]] == pytest.approx(expected)
    assert governed.logits[1] == -np.inf


# ------------------------------------------------------------------- the index never changes what is masked
FEATURES = ("location", "intent", "step", "action.obj_type", "action.recep", "action.amount")
VALUES = ("cup", "plate", "kitchen", "sinkbasin 1", 1, 2, 20, True)

predicates = st.one_of(
    st.builds(
        Compare, st.sampled_from(FEATURES), st.sampled_from(["==", "!=", "<", ">="]), st.sampled_from(VALUES)
    ),
    st.builds(
        Named,
        st.sampled_from(["intent_is", "tool_is", "action_is"]),
        st.sampled_from(("move", "harvest", "cup")),
    ),
    st.builds(InClass, st.sampled_from(FEATURES), st.sampled_from(["dishware", "unknown_class"])),
    st.builds(
        CompareFeatures,
        st.sampled_from(FEATURES),
        st.sampled_from(["==", "!=", "<", ">="]),
        st.sampled_from(FEATURES),
    ),
)
guards = st.recursive(
    predicates,
    lambda inner: st.one_of(
        st.builds(lambda ops: And(tuple(ops)), st.lists(inner, min_size=2, max_size=3)),
        st.builds(lambda ops: Or(tuple(ops)), st.lists(inner, min_size=2, max_size=3)),
    ),
    max_leaves=5,
)
masks = st.one_of(
    st.builds(ForbidEnvAction, st.sampled_from(["move", "clean"])),
    st.builds(ForbidToolCall, st.sampled_from(["harvest", "punish"])),
    st.builds(ForbidToolArg, st.just("harvest"), st.just("amount"), st.sampled_from([1, 2, 20])),
)
rules = st.builds(Rule, guards, masks)
actions = st.one_of(
    st.builds(
        lambda verb, t, r: Action.env(verb, obj_type=t, recep=r),
        st.sampled_from(["move", "clean"]),
        st.sampled_from(["cup", "plate", "apple", 1]),
        st.sampled_from(["sinkbasin 1", "cabinet 1"]),
    ),
    st.builds(
        lambda tool, amount: Action.tool(tool, amount=amount),
        st.sampled_from(["harvest", "punish"]),
        st.sampled_from([1, 2, 20, True, 1.0]),
    ),
    st.just(Action("text", "say")),
)
contexts = st.fixed_dictionaries(
    {},
    optional={
        "location": st.sampled_from(["kitchen", "garden", 1]),
        "intent": st.sampled_from(["cup", "move"]),
        "step": st.sampled_from([1, 2, 20, True, 2.0]),
    },
)


@settings(max_examples=400, deadline=None)
@given(st.lists(rules, min_size=1, max_size=12), st.lists(actions, min_size=1, max_size=8), contexts)
def test_indexed_enforcement_equals_a_linear_scan(rule_list, action_list, q):
    plane = ControlPlane(scars=[Scar(r) for r in rule_list], classes=CLASSES)
    canonical_rules = [Scar(r).rule for r in rule_list]
    expected = [
        a.is_control and any(fires(r, q, a, plane.classes) for r in canonical_rules) for a in action_list
    ]
    assert plane.masked(q, action_list) == expected


# The index proves equality keys without re-checking them, folds action.kind/name/tool/verb per bucket and
# bisects numeric thresholds: a wider vocabulary (every operator, bool/int/float look-alikes, NaN, the bucket
# features, a forbid_tool_arg on an argument called "name") checks each of those shortcuts against the scan,
# rule by rule, with steps, scopes, temporary masks and removals.
WIDE_FEATURES = FEATURES + ("karma", "action.kind", "action.name", "action.tool", "action.verb")
WIDE_VALUES = VALUES + (0, 1.0, 2.5, False, -1, "harvest", "move", "env", "tool")  # the DSL has no NaN
wide_predicates = st.one_of(
    st.builds(
        Compare,
        st.sampled_from(WIDE_FEATURES),
        st.sampled_from(["==", "!=", "<", "<=", ">", ">="]),
        st.sampled_from(WIDE_VALUES),
    ),
    st.builds(
        Named,
        st.sampled_from(["intent_is", "tool_is", "action_is", "data_scope_is"]),
        st.sampled_from(("move", "harvest", "cup", 1)),
    ),
    st.builds(InClass, st.sampled_from(WIDE_FEATURES), st.sampled_from(["dishware", "unknown_class"])),
    st.builds(  # relations: both sides read (or fixed by the bucket), NaN, bool and string look-alikes
        CompareFeatures,
        st.sampled_from(WIDE_FEATURES),
        st.sampled_from(["==", "!=", "<", "<=", ">", ">="]),
        st.sampled_from(WIDE_FEATURES),
    ),
)
wide_guards = st.recursive(
    wide_predicates,
    lambda inner: st.one_of(
        st.builds(lambda ops: And(tuple(ops)), st.lists(inner, min_size=2, max_size=3)),
        st.builds(lambda ops: Or(tuple(ops)), st.lists(inner, min_size=2, max_size=3)),
    ),
    max_leaves=6,
)
wide_masks = st.one_of(
    masks,
    st.builds(ForbidToolArg, st.just("harvest"), st.just("name"), st.sampled_from(["x", 1, True])),
    st.builds(ForbidToolArg, st.just("punish"), st.just("amount"), st.sampled_from([1, 1.0, False])),
)
wide_actions = st.one_of(
    actions,
    st.builds(
        lambda tool, amount, name: Action.tool(tool, amount=amount, name=name),
        st.sampled_from(["harvest", "punish"]),
        st.sampled_from([0, 1, 2.5, False, True, float("nan"), "1"]),
        st.sampled_from(["x", 1, True, 1.0]),
    ),
    st.builds(
        lambda verb, t, r: Action.env(verb, obj_type=t, recep=r),
        st.sampled_from(["move", "clean"]),
        st.sampled_from(["cup", "mug", True, 1.0, 0]),
        st.sampled_from(["sinkbasin 1", 2.5, float("nan")]),
    ),
)
wide_contexts = st.fixed_dictionaries(
    {},
    optional={
        "location": st.sampled_from(["kitchen", "garden", 1, True]),
        "intent": st.sampled_from(["cup", "move", 1]),
        "step": st.sampled_from([0, 1, 2, 2.5, 20, True, False, float("nan"), -1]),
        "karma": st.sampled_from([0, 1, 1.0, 2.5, False, "1"]),
        "data_scope": st.sampled_from(["move", 1]),
    },
)


@settings(max_examples=400, deadline=None)
@given(
    st.lists(st.tuples(wide_guards, wide_masks, st.sampled_from([None, 1, 3])), min_size=1, max_size=14),
    st.lists(wide_actions, min_size=1, max_size=8),
    wide_contexts,
    st.sampled_from([None, 0, 2, 5]),
    st.integers(0, 3),
)
def test_index_shortcuts_fire_exactly_the_rules_a_scan_fires(specs, action_list, q, step, removed):
    rules_and_scopes = [(Rule(g, m), expires) for g, m, expires in specs]
    plane = ControlPlane(classes=CLASSES)
    live: dict[str, Rule] = {}
    stops: dict[str, int | None] = {}
    for n, (rule, expires) in enumerate(rules_and_scopes):
        if n % 3 == 2:  # every third rule as a temporary mask (its until_step plays the scope's role)
            mask_id = plane.set_temporary_mask(rule, until_step=expires if expires is not None else 10**9)
            live[mask_id], stops[mask_id] = rule, expires
        else:
            scar = Scar(rule, scope=Scope(expires_at_step=expires))
            if plane.add(scar):
                live[scar.id], stops[scar.id] = scar.rule, expires
    for rule_id in list(live)[:removed]:  # removals must leave no trace in the index
        if rule_id.startswith("tmp:"):
            plane.lift_temporary_mask(rule_id)
        else:
            plane.remove(rule_id)
        del live[rule_id]
    for a in action_list:
        expected = {
            rule_id
            for rule_id, rule in live.items()
            if a.is_control
            and (step is None or stops[rule_id] is None or step < stops[rule_id])
            and fires(rule, q, a, plane.classes)
        }
        assert set(plane.fired_rules(q, a, step=step)) == expected


# The plane remembers a decision over a tuple of actions per (the tuple, the values of the context keys its rules
# read), until the rules change, and nothing while a rule reads the step. Repeated decisions on a small pool of
# actions and contexts, interleaved with additions, removals, temporary masks and expiry, would expose a stale or
# over-shared memo entry.
# rules that often fire on the pools (so that a stale "fires" or "does not fire" is met), and others
memo_guards = st.one_of(
    st.builds(
        Compare,
        st.sampled_from(["action.obj_type", "action.amount", "location", "step"]),
        st.sampled_from(["==", "!=", ">="]),
        st.sampled_from(["cup", 1, "kitchen", 2]),
    ),
    guards,
    wide_guards,
)
memo_ops = st.one_of(
    st.tuples(st.just("decide"), st.integers(0, 3), st.integers(0, 1), st.sampled_from([None, 0, 2, 5])),
    st.tuples(st.just("decide"), st.integers(0, 3), st.integers(0, 1), st.sampled_from([None, 0, 2, 5])),
    st.tuples(st.just("add"), memo_guards, wide_masks, st.sampled_from([None, 1, 3])),
    st.tuples(st.just("temp"), memo_guards, wide_masks, st.sampled_from([1, 3, 10**9])),
    st.tuples(st.just("remove"), st.integers(0, 20)),
    st.tuples(st.just("expire"), st.sampled_from([0, 2, 4])),
)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.one_of(actions, wide_actions), min_size=4, max_size=4),
    st.lists(st.one_of(contexts, wide_contexts), min_size=2, max_size=2),
    st.lists(memo_ops, min_size=10, max_size=50),
)
def test_memoised_decisions_stay_exact_across_schema_changes_and_steps(action_pool, context_pool, ops):
    action_pool = tuple(action_pool)  # one tuple, decided again and again: the plane remembers its decisions
    plane = ControlPlane(classes=CLASSES)
    live: dict[str, Rule] = {}
    stops: dict[str, int | None] = {}
    for op in ops:
        if op[0] == "decide":
            _, i, j, step = op
            q = context_pool[j]
            expected = [
                {
                    rule_id
                    for rule_id, rule in live.items()
                    if a.is_control
                    and (step is None or stops[rule_id] is None or step < stops[rule_id])
                    and fires(rule, q, a, plane.classes)
                }
                for a in action_pool
            ]
            assert set(plane.fired_rules(q, action_pool[i], step=step)) == expected[i]
            # the same tuple (remembered decisions), and a new tuple of the same actions (remembered per action)
            for actions in (action_pool, tuple(action_pool)):
                governed = plane.govern(q, actions, np.zeros(len(action_pool)), step=step)
                assert governed.masked.tolist() == [bool(ids) for ids in expected]
                assert {k: set(ids) for k, ids in governed.fired} == {
                    k: ids for k, ids in enumerate(expected) if ids
                }
        elif op[0] == "add":
            scar = Scar(Rule(op[1], op[2]), scope=Scope(expires_at_step=op[3]))
            if plane.add(scar):
                live[scar.id], stops[scar.id] = scar.rule, op[3]
        elif op[0] == "temp":
            mask_id = plane.set_temporary_mask(Rule(op[1], op[2]), until_step=op[3])
            live[mask_id], stops[mask_id] = Rule(op[1], op[2]), op[3]
        elif op[0] == "remove" and live:
            rule_id = list(live)[op[1] % len(live)]
            if rule_id.startswith("tmp:"):
                plane.lift_temporary_mask(rule_id)
            else:
                plane.remove(rule_id)
            del live[rule_id], stops[rule_id]
        elif op[0] == "expire":
            expired = plane.expire(op[1])
            for rule_id in expired.temp_mask_ids + expired.scar_ids:
                assert stops[rule_id] is not None and stops[rule_id] <= op[1]
                del live[rule_id], stops[rule_id]
            assert all(stop is None or stop > op[1] for stop in stops.values())


def test_memo_never_shares_a_result_between_look_alike_values_of_other_types():
    # True == 1 == np.int64(1) and they hash alike, but only the int is a number for the DSL
    plane = ControlPlane(scars=[Scar(parse_rule('if karma < 2 then forbid_tool_call("punish")'))])
    punish = Action.tool("punish", target="agent_1")
    for karma, fires_on_it in ((1, True), (True, False), (np.int64(1), False), (1.0, True), (False, False)):
        for _ in range(2):  # the second decision may be answered from the memo
            assert plane.masked({"karma": karma}, [punish]) == [fires_on_it]
    plane = ControlPlane(scars=[Scar(parse_rule('if action.amount > 0 then forbid_tool_call("harvest")'))])
    for amount, fires_on_it in ((1, True), (True, False), (np.int64(1), False), (1, True)):
        assert plane.masked({}, [Action.tool("harvest", amount=amount)]) == [fires_on_it]


def test_a_decision_over_the_same_actions_and_read_values_is_remembered_until_the_rules_change():
    """A learner's view hands out one tuple per admissible set, met again and again: the plane answers a decision
    it made before without running its rules, as long as the context keys its rules read hold the same values (of
    the same types) and no rule changed."""
    plane = ControlPlane(
        scars=[Scar(parse_rule('if location == "kitchen" then forbid_env_action("move")'))], classes=CLASSES
    )
    actions = (
        Action.env("move", obj_type="cup"),
        Action.env("move", obj_type="plate"),
        Action("text", "say"),
    )
    runs: list[int] = []

    def count_runs() -> None:
        fire = plane._deciders["env", "move"]
        plane._deciders["env", "move"] = lambda q, args, step: runs.append(1) or fire(q, args, step)

    def decide(q: dict, step: int = 0) -> tuple[list[bool], int]:
        runs.clear()
        governed = plane.govern(q, actions, np.zeros(3), step)
        return governed.masked.tolist(), len(runs)

    plane.govern({"location": "kitchen"}, actions, np.zeros(3))  # compiled and remembered
    count_runs()
    assert decide({"location": "kitchen", "step": 1}) == ([True, True, False], 0)  # step: read by no rule
    runs.clear()  # another tuple of the same actions (another admissible set): each action is remembered
    assert plane.govern({"location": "kitchen"}, actions[1::-1], np.zeros(2)).masked.tolist() == [True, True]
    assert runs == []
    assert decide({"location": "garden", "step": 2}) == ([False, False, False], 2)
    assert decide({"location": "garden", "step": 3}) == ([False, False, False], 0)
    assert decide({"step": 3}) == ([False, False, False], 2)  # a missing key is a value of its own
    assert plane.govern({"location": "kitchen"}, list(actions), np.zeros(3)).masked.tolist() == [
        True,
        True,
        False,
    ]
    plane.add(Scar(parse_rule('if action.obj_type == "plate" then forbid_env_action("move")')))
    plane.govern({"location": "garden"}, actions, np.zeros(3))
    count_runs()
    assert decide({"location": "garden"}) == ([False, True, False], 0)
    mask_id = plane.set_temporary_mask(
        parse_rule('if location == "hall" then forbid_env_action("move")'), until_step=5
    )
    plane.govern({"location": "hall"}, actions, np.zeros(3), 1)
    count_runs()
    assert decide({"location": "hall"}, 4) == ([True, True, False], 2)  # a rule reads the step: nothing kept
    assert decide({"location": "hall"}, 5) == ([False, True, False], 2)
    plane.lift_temporary_mask(mask_id)
    plane.govern({"location": "hall"}, actions, np.zeros(3), 5)
    count_runs()
    assert decide({"location": "hall"}, 6) == ([False, True, False], 0)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(rules, min_size=0, max_size=8),
    st.lists(actions, min_size=1, max_size=8),
    contexts,
    st.one_of(
        st.sampled_from([0.0, -0.0, 1.5, -7.0, 1e308, -1e308]).map(lambda c: ("same", c)),
        st.lists(st.sampled_from([0.0, -0.0, 2.0, -3.5, float("-inf")]), min_size=8, max_size=8).map(
            lambda xs: ("mixed", xs)
        ),
    ),
    st.sampled_from(["hard", "soft"]),
)
def test_governed_logits_and_probabilities_are_the_softmax_over_what_the_scan_leaves(
    rule_list, action_list, q, logits, mode
):
    """``govern`` (with its shortcut for equal logits, a shield's zeros) gives, bit for bit, the masked softmax
    computed action by action: -inf (hard) or + soft_bias per firing rule (soft), exp(x - max) / their sum."""
    plane = ControlPlane(scars=[Scar(r) for r in rule_list], classes=CLASSES, mode=mode)
    canonical_rules = list({Scar(r).id: Scar(r).rule for r in rule_list}.values())  # one scar per rule
    kind, values = logits
    base = [values] * len(action_list) if kind == "same" else values[: len(action_list)]
    decided = tuple(action_list)
    for _ in range(2):  # the second decision over the same tuple is remembered
        governed = plane.govern(q, decided, np.array(base))
        expected, masked = list(base), []
        for i, a in enumerate(action_list):
            firing = [r for r in canonical_rules if a.is_control and fires(r, q, a, plane.classes)]
            masked.append(bool(firing))
            if firing:
                expected[i] = -math.inf if mode == "hard" else expected[i] + plane.soft_bias * len(firing)
        assert governed.masked.tolist() == masked
        assert governed.logits.tolist() == expected
        control = [i for i, a in enumerate(action_list) if a.is_control]
        top = max(expected)
        if (
            mode == "hard" and control and all(expected[i] == -math.inf for i in control)
        ) or top == -math.inf:
            assert governed.fallback is not None and not governed.probs.any()
        else:
            shifted = [math.exp(x - top) for x in expected]
            assert governed.fallback is None
            assert governed.probs.tolist() == [x / sum(shifted) for x in shifted]


def test_a_readmission_does_not_change_the_expiry_the_plane_enforces():
    """Found by the property test above: the index and ``expire`` must read the same expiry (the first one; a
    re-admission of an active id refreshes the audit plane only)."""
    rule = parse_rule('if action.obj_type == "cup" then forbid_env_action("move")')
    cup = Action.env("move", obj_type="cup", recep="sinkbasin 1")
    for first, second, expired in ((1, None, True), (None, 1, False)):
        plane = ControlPlane()
        assert plane.add(Scar(rule, scope=Scope(expires_at_step=first)))
        assert not plane.add(Scar(rule, ({"more": "evidence"},), scope=Scope(expires_at_step=second)))
        assert plane.masked({}, [cup], step=5) == [not expired]
        assert (Scar(rule).id in plane.expire(2).scar_ids) is expired
