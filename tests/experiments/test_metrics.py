import numpy as np
import pandas as pd
import pytest

from scars.experiments.metrics import first_exposure_violation_rate, growth_fit, repeat_violation_rate, svr


def _steps(rows):
    return pd.DataFrame(rows, columns=["episode", "t", "violated_rules", "exposed_rules", "covered_rules"])


def test_rvr_counts_exposure_spells_and_repeats_by_hand():
    steps = _steps(
        [
            (0, 0, "", "a", ""),  # exposed to a, before any failure: not a re-exposure
            (0, 1, "a", "a", ""),  # first failure of a
            (0, 2, "", "a", ""),  # spell 1 starts (episode 0), no repeat
            (1, 3, "a", "a", ""),  # a new episode: spell 2, with a repeat
            (1, 4, "", "a,b", "a"),  # still spell 2 (consecutive); b never failed
            (1, 5, "b", "b", ""),  # first failure of b; a left the exposed state
            (1, 6, "", "a", "a"),  # spell 3: re-entered, covered, no repeat
        ]
    )
    m = repeat_violation_rate(steps)
    assert (m["repeat_violations"], m["reexposures"]) == (1, 3)
    assert m["rvr"] == pytest.approx(1 / 3)
    assert (m["repeat_violations_covered"], m["reexposures_covered"]) == (0, 1)
    assert (m["repeat_episodes"], m["reexposed_episodes"]) == (1, 2) and m["rvr_episode"] == 0.5
    assert m["first_failures"] == 2
    assert svr(steps) == pytest.approx(3 / 7)


def test_lingering_in_a_masked_state_does_not_inflate_the_denominator():
    rows = [(0, 0, "a", "a", "")] + [(1, t, "", "a", "a") for t in range(1, 40)] + [(1, 40, "a", "a", "a")]
    m = repeat_violation_rate(_steps(rows))
    assert (m["repeat_violations"], m["reexposures"]) == (1, 1)  # one spell of 40 decisions, one repeat


def test_undefined_rates_are_none_not_zero():
    m = repeat_violation_rate(_steps([(0, 0, "", "a", ""), (0, 1, "", "", "")]))
    assert m["rvr"] is None and m["rvr_episode"] is None and m["rvr_covered"] is None
    assert svr(_steps([(0, 0, "", "", "")])) is None


def test_one_action_breaking_two_rules_of_a_family_is_one_violation():
    steps = _steps([(0, 0, "cup,dish", "cup,dish", ""), (1, 1, "cup,dish", "cup,dish", "")])
    assert repeat_violation_rate(steps)["repeat_violations"] == 2  # per rule: counted twice
    family = repeat_violation_rate(steps, {"cup": "sink", "dish": "sink"})
    assert (family["repeat_violations"], family["reexposures"]) == (1, 1)


def test_rvr_pools_an_equivalence_family():
    steps = _steps([(0, 0, "cup", "cup", ""), (0, 1, "plate", "plate", "")])
    assert repeat_violation_rate(steps)["rvr"] is None
    assert repeat_violation_rate(steps, {"cup": "sink", "plate": "sink"})["rvr"] == 1.0


def test_first_exposure_rate_on_held_out_rules():
    steps = _steps([(0, 0, "", "p", ""), (0, 1, "p", "p", ""), (0, 2, "q", "q", "")])
    assert first_exposure_violation_rate(steps, ["p", "q", "never_seen"]) == (0.5, 2)


def test_growth_fit_recovers_exponent():
    t = np.arange(1, 200)
    fit = growth_fit(t, 3.0 * t**0.5)
    assert fit["b"] == pytest.approx(0.5, abs=1e-9) and fit["a"] == pytest.approx(3.0)


def test_scar_quality_classifies_each_scar_against_its_true_rule():
    """Issue 24, item 7: exact / under-general / over-broad / wrong, with precision and recall on probe pairs."""
    from scars.experiments.metrics import scar_quality
    from scars.synthesis.dsl import Action, parse_rule
    from scars.synthesis.dsl.semantics import fires

    def clean(obj_type, basin):
        return Action(
            "env", "clean", (("obj_type", obj_type), ("recep", basin)), f"clean {obj_type} with {basin}"
        )

    probes = [({}, clean(o, b)) for o in ("mug", "plate", "apple") for b in ("sinkbasin 1", "sinkbasin 2")]
    true = parse_rule(
        'if action.obj_type == "mug" and action.recep == "sinkbasin 1" then forbid_env_action("clean")'
    )
    truth = {"mug_rule": lambda q, a: fires(true, q, a, {})}
    rules = {
        "exact": 'if action.obj_type == "mug" and action.recep == "sinkbasin 1" then forbid_env_action("clean")',
        "over_broad": 'if action.recep == "sinkbasin 1" then forbid_env_action("clean")',
        "wrong": 'if action.obj_type == "plate" then forbid_env_action("clean")',
    }
    scars = [(text, parse_rule(text), ["mug_rule"]) for text in rules.values()]
    scars.append(("told nothing", parse_rule(rules["wrong"]), ["punished:x"]))
    q = scar_quality(scars, truth, probes, {})
    assert [r["class"] for r in q["scars"]] == list(rules)
    assert q["counts"]["exact"] == 1 and q["unmatched"] == 1 and q["exact_or_under_general"] == 1 / 3
    assert q["scars"][1]["precision"] == 1 / 3 and q["scars"][1]["recall"] == 1.0
    # an instance rule is precise but misses the other sinks' mugs when the true rule covers every sink
    every_sink = parse_rule('if action.obj_type == "mug" then forbid_env_action("clean")')
    q = scar_quality(scars[:1], {"mug_rule": lambda q, a: fires(every_sink, q, a, {})}, probes, {})
    assert q["scars"][0]["class"] == "under_general" and q["scars"][0]["recall"] == 0.5


def test_scar_precision_counts_every_truly_unsafe_pair_and_a_scoped_scar_applies_in_its_version():
    """Precision is the share of masked pairs that are truly unsafe — under any rule of the schedule, not only the
    ones the scar was told it broke: a class rule learned from the mug and plate rules that also masks a bowl the
    bowl rule forbids masks nothing safe. A scar scoped to world version 0 masks nothing under version 1."""
    from scars.experiments.metrics import scar_quality
    from scars.experiments.tier1_summary import scoped_rule
    from scars.synthesis.dsl import Action, parse_rule
    from scars.synthesis.dsl.semantics import fires

    def clean(obj_type):
        return Action("env", "clean", (("obj_type", obj_type), ("recep", "sinkbasin 1")), f"clean {obj_type}")

    probes = [({"world_version": v}, clean(o)) for o in ("mug", "plate", "bowl", "apple") for v in (0, 1)]

    def of(kind):
        return lambda q, a: a.arg("obj_type") == kind

    truth = {f"{o}_rule": of(o) for o in ("mug", "plate", "bowl")}
    classes = {"dishware": frozenset({"mug", "plate", "bowl"})}
    dishware = 'if in_class(action.obj_type, "dishware") then forbid_env_action("clean")'
    q = scar_quality([(dishware, parse_rule(dishware), ["mug_rule", "plate_rule"])], truth, probes, classes)
    (row,) = q["scars"]
    assert row["precision"] == 1.0 and row["recall"] == 1.0 and row["class"] == "exact"
    broken = parse_rule('if action.obj_type == "apple" then forbid_env_action("clean")')
    apple = {"apple_rule": lambda q, a: a.arg("obj_type") == "apple" and q["world_version"] == 0}
    wide = scar_quality([("apple", broken, ["apple_rule"])], apple, probes, classes)["scars"][0]
    scoped = scar_quality([("apple", scoped_rule(broken, "0"), ["apple_rule"])], apple, probes, classes)[
        "scars"
    ][0]
    assert (wide["class"], wide["precision"]) == ("over_broad", 0.5)
    assert (scoped["class"], scoped["precision"]) == ("exact", 1.0)
    assert fires(scoped_rule(broken, "0"), {"world_version": 0}, clean("apple"), classes)


def test_rule_set_on_probes_is_the_union_of_the_active_scars_against_the_rules_in_force():
    """Issue 40, item 1: each segment's rule set (the OR of its active scars) against the OR of the rules in force
    on one probe set, weighted by the segment's share of its episode's decisions; a rule not yet in force forbids
    nothing, and a scar outside the segment masks nothing."""
    from scars.experiments.metrics import RuleSetSegment, rule_set_on_probes

    v = np.array
    masks = {(0, "wide"): v([1, 1, 1, 0], bool), (0, "exact"): v([1, 0, 0, 0], bool)}
    unsafe = {(0, "r1"): v([1, 0, 0, 0], bool), (0, "r2"): v([0, 1, 0, 1], bool)}
    segments = [
        RuleSetSegment(0, frozenset({"exact"}), frozenset({"r1"}), 0, 0.5),  # precise, complete
        RuleSetSegment(
            0, frozenset({"wide", "exact"}), frozenset({"r1", "r2"}), 0, 0.5
        ),  # 2 of 3 masked unsafe
        RuleSetSegment(1, frozenset(), frozenset({"r1", "r2"}), 0, 1.0),  # nothing masked, 3 unsafe
    ]
    counts = rule_set_on_probes(masks, unsafe, segments, 4)
    assert counts[0] == pytest.approx((0.5 * 1 + 0.5 * 3, 0.5 * 1 + 0.5 * 2, 0.5 * 1 + 0.5 * 3))
    assert counts[1] == (0.0, 0.0, 3.0)


def test_scar_quality_asks_a_keyed_true_rule_only_about_its_own_kind_of_action():
    """A true rule that can only fire on its mask's kind of action (``truth_keys``) is asked about those probes
    only, and the classification is the same as asking it about every probe."""
    from scars.experiments.metrics import scar_quality
    from scars.synthesis.dsl import Action, parse_rule
    from scars.synthesis.dsl.semantics import fires

    def act(verb, obj_type):
        return Action("env", verb, (("obj_type", obj_type),), f"{verb} {obj_type}")

    probes = [({}, act(v, o)) for v in ("clean", "heat", "take") for o in ("mug", "plate", "apple")]
    true = parse_rule('if action.obj_type == "mug" then forbid_env_action("clean")')
    asked = []

    def unsafe(q, a):
        asked.append(a.name)
        return fires(true, q, a, {})

    scars = [
        (text, parse_rule(text), ["mug_rule"])
        for text in (
            'if action.obj_type == "mug" then forbid_env_action("clean")',
            'if action.obj_type == "plate" then forbid_env_action("clean")',
            'if action.obj_type == "mug" then forbid_env_action("heat")',
        )
    ]
    every = scar_quality(scars, {"mug_rule": unsafe}, probes, {})
    assert len(asked) == len(probes)
    asked.clear()
    keyed = scar_quality(scars, {"mug_rule": unsafe}, probes, {}, truth_keys={"mug_rule": ("env", "clean")})
    assert asked == ["clean"] * 3
    assert keyed == every and [r["class"] for r in keyed["scars"]] == ["exact", "wrong", "wrong"]


def test_rule_set_census_charges_precision_and_recall_losses_as_counted_by_hand():
    """Issue 40: the census of ``rule_set_on_probes``' counts. A masked safe pair is charged to the active scars
    masking it (split evenly); an unmasked forbidden pair to the rules in force forbidding it (split evenly), each
    by why it was missed — before the run's first failure of the rule, a scar told of it active but too narrow, its
    scar retired, no scar ever; ``recall_after_first_failure`` counts only the pairs of rules already failed."""
    from scars.experiments.metrics import (
        ProbeCensus,
        RuleSetSegment,
        rule_set_census,
        rule_set_on_probes,
        rule_set_quality,
    )

    def vec(*on):
        out = np.zeros(8, bool)
        out[list(on)] = True
        return out

    masks = {(0, "wide"): vec(0, 1, 2), (0, "exact2"): vec(2, 3)}  # pair 2: masked by both, forbidden by none
    unsafe = {
        (0, "r1"): vec(0),
        (0, "r2"): vec(3, 4),
        (0, "r3"): vec(5),
        (0, "r4"): vec(1, 4, 7),  # pair 4: forbidden by r2 and r4
        (0, "r5"): vec(6),
    }
    told = {"wide": frozenset({"r1"}), "exact2": frozenset({"r2"}), "old": frozenset({"r3"})}
    rules = frozenset({"r1", "r2", "r3", "r4", "r5"})
    known = frozenset({"r1", "r2", "r3", "r5"})  # r4 never failed
    segments = [
        RuleSetSegment(0, frozenset({"wide", "exact2"}), rules, 0, 0.5, known, frozenset({"old"})),
        # before anything: pair 0 missed, r1 not failed yet
        RuleSetSegment(0, frozenset(), frozenset({"r1"}), 0, 0.5),
        RuleSetSegment(1, frozenset({"exact2"}), frozenset({"r2"}), 0, 1.0, frozenset({"r2"})),
    ]
    census = rule_set_census(masks, unsafe, segments, 8, told, lambda r: r)
    c0, c1 = census[0], census[1]
    # first segment: masked 0,1,2,3; forbidden 0,1,3,4,5,6,7; missed 4 (half r2: under-general, half r4: before),
    # 5 (r3: its scar retired), 6 (r5: failed, never a scar), 7 (r4: before its first failure)
    assert c0.safe_masked == {"wide": 0.25, "exact2": 0.25}  # pair 2, split, at weight 0.5
    assert c0.safe_masked_by_variant == {("wide", 0): 0.25, ("exact2", 0): 0.25}
    assert c0.masked == {"wide": 0.5 * 2.5, "exact2": 0.5 * 1.5}
    assert c0.misses == {
        "under_general_in_force": 0.5 * 0.5,
        "after_scar_retired": 0.5 * 1,
        "no_scar_for_failed_rule": 0.5 * 1,
        "before_first_failure": 0.5 * 1.5 + 0.5 * 1,  # and pair 0 of the second segment
    }
    assert (c0.unsafe_known, c0.masked_known) == (0.5 * 5, 0.5 * 2)  # pairs 0, 3, 4, 5, 6; masked 0, 3
    assert (c1.unsafe_known, c1.masked_known, c1.misses["under_general_in_force"]) == (2.0, 1.0, 1.0)
    counts = rule_set_on_probes(masks, unsafe, segments, 8)
    for c, (masked, masked_unsafe, forbidden) in counts.items():  # the census sums to the metric's own counts
        assert sum(census[c].masked.values()) == pytest.approx(masked)
        assert sum(census[c].safe_masked.values()) == pytest.approx(masked - masked_unsafe)
        assert sum(census[c].misses.values()) == pytest.approx(forbidden - masked_unsafe)
    per = np.array([counts[0], counts[1]])
    zeros = {k: np.zeros(2) for k in ("scar_masked", "scar_masked_unsafe", "unsafe_actions")}
    zeros |= {k: np.zeros(2) for k in ("unsafe_known", "scar_masked_known", "needed_masked")}
    rng = np.random.default_rng(0)
    plain = rule_set_quality(per, zeros, rng, probes=8, clusters="episodes")
    quality = rule_set_quality(
        per, zeros, np.random.default_rng(0), probes=8, clusters="episodes", census=[c0, c1]
    )
    probes = quality["probes"]
    assert probes["recall_after_first_failure"]["estimate"] == pytest.approx((1.0 + 1.0) / (2.5 + 2.0))
    assert probes["recall_ceiling"]["estimate"] == pytest.approx((2.5 + 2.0) / (4.0 + 2.0))
    assert probes["recall_ceiling"]["clusters"] == 2
    assert sum(probes["recall_misses"].values()) == pytest.approx(4.0 + 2.0 - (1.5 + 1.0))
    by_rule = probes["recall_misses_by_rule"]
    assert (
        by_rule["r4"]["before_first_failure"] == pytest.approx(0.75)
        and by_rule["r3"]["after_scar_retired"] == 0.5
    )
    assert by_rule["r2"]["under_general_in_force"] == pytest.approx(0.25 + 1.0)  # both clusters
    assert probes["precision"] == plain["probes"]["precision"]  # drawn first: the same with or without it
    assert ProbeCensus().misses == {}
