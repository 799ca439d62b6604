"""Benchmark of online enforcement (paper §3.1, SPEC §1; issue 2): cost per governed decision vs active scars.

A decision is ``ControlPlane.govern(q, actions, logits)`` over a household / commons context with about ten
admissible actions (environment actions with object type and receptacle, a few tool calls with arguments, one
text action). The scars are generated like a long run's self-schema: instance rules (one object type in one
receptacle), class rules (``in_class`` over dishware / produce / …), location- and step-gated rules, numeric
commons rules (``pool_resource_level < k``), ``forbid_tool_arg`` rules, the paper's data-export rule family and
some ``or`` guards — about 2 % of them (split between the harvest and punish tools) have no equality conjunct at all and are therefore unindexable.

Measured in one run, on the same decisions:
  - the indexed ControlPlane with 1 active scar and with N (default 1000) active scars;
  - the alternative it beats: a naive linear scan that evaluates every scar on every action
    (``semantics.fires``) and then applies the same −∞ mask and softmax.
Both are checked to mask exactly the same actions on every decision.

Two scenarios, both reported:
  - ``dense`` (the original workload): every scar is about the household the decisions happen in;
  - ``spread``: a persistent agent's self-schema, where the scars were learnt in ``--contexts`` (default 10)
    different tasks: each scar carries ``task == "t<k>"`` for a uniformly drawn task k, and the decisions happen
    in task t0 — so ~1/10 of the scars concern the current task and the rest concern other contexts.

Times are CPU time of this process (``time.process_time``), the best of ``--repeats`` interleaved passes: the
shared machine runs other jobs, and wall-clock time would mostly measure their load.

Usage:  python benchmarks/enforcement.py [--scars 1000] [--decisions 2000] [--seed 0]
Prints a few readable lines, then, last, one JSON line:
{"scars": 1000, "us_per_decision_1": …, "us_per_decision_1000": …, "ratio": …, "naive_…": …}
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np

from scars.agents.runtime import Scar
from scars.agents.runtime.control import ControlPlane  # noqa: E402
from scars.synthesis.dsl import FALLBACK_ACTIONS, Action, Rule, parse_rule  # noqa: E402
from scars.synthesis.dsl.semantics import fires  # noqa: E402

CLASSES = {
    "dishware": ("cup", "plate", "bowl", "mug", "pan", "pot", "glassbottle", "winebottle"),
    "produce": ("apple", "tomato", "potato", "lettuce", "egg", "bread"),
    "cutlery": ("knife", "butterknife", "fork", "spoon", "spatula", "ladle"),
    "electronics": ("laptop", "cellphone", "remotecontrol", "alarmclock", "desklamp", "cd"),
    "linen": ("towel", "handtowel", "cloth", "pillow", "dishsponge"),
}
OBJECTS = tuple(o for members in CLASSES.values() for o in members) + (
    "book",
    "creditcard",
    "keychain",
    "pen",
    "pencil",
    "vase",
    "statue",
    "candle",
    "soapbar",
    "box",
    "watch",
    "newspaper",
    "pillow",
    "plunger",
    "spraybottle",
    "toiletpaper",
    "tissuebox",
    "basketball",
    "baseballbat",
    "tennisracket",
    "teddybear",
    "wateringcan",
    "saltshaker",
    "peppershaker",
    "soapbottle",
    "kettle",
    "papertowelroll",
    "houseplant",
    "lightswitch",
    "showerglass",
    "mirror",
    "window",
    "blinds",
    "painting",
    "floorlamp",
    "scrubbrush",
    "cup_holder",
    "footstool",
    "desklamp_shade",
    "ladder",
    "umbrella",
    "boots",
    "hat",
    "scarf",
)  # fmt: skip  (about 75 object types, as in ALFWorld)
RECEP_TYPES = (
    "sinkbasin",
    "cabinet",
    "countertop",
    "fridge",
    "microwave",
    "stoveburner",
    "drawer",
    "shelf",
    "diningtable",
    "sidetable",
    "desk",
    "bed",
    "sofa",
    "garbagecan",
    "toilet",
    "bathtubbasin",
    "dresser",
    "coffeemachine",
    "toaster",
    "safe",
    "armchair",
    "ottoman",
    "laundryhamper",
    "tvstand",
    "coffeetable",
    "cart",
)  # fmt: skip  (ALFWorld's receptacle types)
RECEPS = tuple(f"{r} {i}" for r in RECEP_TYPES for i in range(1, 4))
VERBS = ("move", "take", "clean", "heat", "cool", "open", "close", "use", "slice", "toggle")
LOCATIONS = ("kitchen", "bathroom", "bedroom", "livingroom", "hallway", "office")
INTENTS = ("database_export", "backup", "report", "share", "analytics")
SCOPES = ("internal", "public", "confidential", "personal")
TOOLS = ("harvest", "punish", "send_data", "search", "calculator")


def q(text: str) -> str:
    return json.dumps(text)


def generate_rules(n: int, rng: np.random.Generator, contexts: int = 0) -> list[Rule]:
    """n distinct rules over the world vocabulary, in the family proportions described in the module doc.
    With ``contexts`` > 0, each rule is also gated on ``task == "t<k>"``, k uniform in [0, contexts)."""
    families = (
        (0.30, lambda: f"if action.obj_type == {q(pick(OBJECTS))} and action.recep == {q(pick(RECEPS))} "
                       f"then forbid_env_action({q(pick(VERBS))})"),
        (0.15, lambda: f"if in_class(action.obj_type, {q(pick(tuple(CLASSES)))}) and action.recep == "
                       f"{q(pick(RECEPS))} then forbid_env_action({q(pick(VERBS))})"),
        (0.12, lambda: f"if location == {q(pick(LOCATIONS))} and action.obj_type == {q(pick(OBJECTS))} "
                       f"then forbid_env_action({q(pick(VERBS))})"),
        (0.10, lambda: f"if step > {int(rng.integers(1, 50))} and action.recep == {q(pick(RECEPS))} "
                       f"then forbid_env_action({q(pick(VERBS))})"),
        (0.08, lambda: f"if intent_is({q(pick(INTENTS))}) and data_scope_is({q(pick(SCOPES))}) and "
                       f"tool_is(\"send_data\") then forbid_tool_call(\"send_data\")"),
        (0.08, lambda: f"if pool_resource_level < {int(rng.integers(10, 60))} and intent_is({q(pick(INTENTS))}) "
                       f"then forbid_tool_arg(\"harvest\", \"amount\", {int(rng.integers(1, 21))})"),
        (0.07, lambda: f"if action.target == \"agent_{int(rng.integers(0, 50))}\" and karma < "
                       f"{int(rng.integers(1, 10))} then forbid_tool_call(\"punish\")"),
        (0.08, lambda: f"if (action.obj_type == {q(pick(OBJECTS))} and location == {q(pick(LOCATIONS))}) or "
                       f"(action.obj_type == {q(pick(OBJECTS))} and action.recep == {q(pick(RECEPS))}) "
                       f"then forbid_env_action({q(pick(VERBS))})"),
        (0.01, lambda: f"if pool_resource_level < {int(rng.integers(5, 40))} and step >= "
                       f"{int(rng.integers(0, 12))} then forbid_tool_call(\"harvest\")"),
        (0.01, lambda: f"if karma < {int(rng.integers(1, 5))} and step >= {int(rng.integers(0, 12))} "
                       f"then forbid_tool_call(\"punish\")"),
    )  # fmt: skip

    def pick(options: tuple[str, ...]) -> str:
        return options[int(rng.integers(len(options)))]

    weights = np.array([w for w, _ in families])
    seen: dict[str, Rule] = {}
    while len(seen) < n:
        family = families[int(rng.choice(len(families), p=weights / weights.sum()))][1]
        text = family()
        if contexts:
            guard, mask = text[3:].split(" then ")
            text = f'if task == "t{int(rng.integers(contexts))}" and ({guard}) then {mask}'
        rule = parse_rule(text)
        seen.setdefault(str(rule), rule)
    return list(seen.values())


def generate_decisions(
    count: int, rng: np.random.Generator, fresh_from: int | None = None
) -> list[tuple[dict, list[Action], np.ndarray]]:
    """Contexts with ~10 admissible actions: 7 environment actions, 2 tool calls, 1 text action.

    With ``fresh_from`` (a serial number), every decision is one never seen before: ``step`` counts up from it
    (as in an episode), object instances are numbered by it and tool calls carry it as ``call_id``, so no
    (action, context) pair repeats — within the list or across lists with disjoint serial ranges."""

    def pick(options):
        return options[int(rng.integers(len(options)))]

    decisions = []
    for serial in range(count):
        uid = None if fresh_from is None else fresh_from + serial
        ctx = {
            "task": "t0",
            "location": pick(LOCATIONS),
            "step": int(rng.integers(0, 60)) if uid is None else uid,
            "intent": pick(INTENTS),
            "data_scope": pick(SCOPES),
            "pool_resource_level": int(rng.integers(0, 101)),
            "karma": int(rng.integers(0, 11)),
        }
        actions = [
            Action.env(pick(VERBS), obj=f"{o} {1 if uid is None else uid}", obj_type=o, recep=pick(RECEPS))
            for o in (pick(OBJECTS) for _ in range(7))
        ]
        call = {} if uid is None else {"call_id": uid}
        actions.append(Action.tool("harvest", amount=int(rng.integers(1, 21)), **call))
        actions.append(
            Action.tool(
                pick(("send_data", "punish", "search")), target=f"agent_{int(rng.integers(0, 50))}", **call
            )
        )
        actions.append(Action("text", "say", text="thinking"))
        decisions.append((ctx, actions, rng.normal(0.0, 2.0, size=len(actions))))
    return decisions


def naive_govern(rules: list[Rule], classes, ctx, actions, logits) -> np.ndarray:
    """The alternative: evaluate every rule on every action, then the same −∞ mask and softmax."""
    governed = np.asarray(logits, dtype=np.float64).copy()
    for i, a in enumerate(actions):
        if a.is_control and any(fires(r, ctx, a, classes) for r in rules):
            governed[i] = -np.inf
    finite = np.isfinite(governed)
    if not finite.any():
        return np.zeros(len(actions))
    shifted = np.exp(governed - governed[finite].max())
    return shifted / shifted.sum()


def time_per_decision(fns: dict, passes: list, repeats: int) -> dict[str, float]:
    """µs per decision of each function: the best of ``repeats`` passes, passes interleaved across functions so
    that load from other processes on the machine hits all of them alike (one warm-up pass first, on
    ``passes[0]``; pass k times ``passes[k]`` — the same list every time, or never-seen decisions)."""
    samples: dict[str, list[float]] = {name: [] for name in fns}
    for fn in fns.values():
        for ctx, actions, logits in passes[0][:50]:
            fn(ctx, actions, logits)
    for k in range(1, repeats + 1):
        decisions = passes[k]
        for name, fn in fns.items():
            chosen = (
                decisions if not name.startswith("naive_n") else decisions[: max(50, len(decisions) // 10)]
            )
            start = time.process_time()
            for ctx, actions, logits in chosen:
                fn(ctx, actions, logits)
            samples[name].append((time.process_time() - start) / len(chosen) * 1e6)
    return {name: min(values) for name, values in samples.items()}


def measure(rules: list[Rule], decisions, repeats: int, timed_passes: list | None = None) -> dict[str, float]:
    """One scenario: check the index against the scan on every decision, then time the four variants (on
    ``decisions`` again in every pass — contexts repeat — or on never-seen ``timed_passes``)."""
    scars = [Scar(r) for r in rules]
    large = ControlPlane(scars=scars, classes=CLASSES)
    small = ControlPlane(scars=scars[:1], classes=CLASSES)
    assert FALLBACK_ACTIONS[0] == large.fallback

    # the index never changes what is masked: compare with the naive scan on every decision
    canonical_rules = [s.rule for s in scars]
    masked_total = fired_total = 0
    for ctx, actions, logits in decisions:
        got = large.govern(ctx, actions, logits)
        naive = naive_govern(canonical_rules, large.classes, ctx, actions, logits)
        assert (got.probs == 0.0).tolist() == (naive == 0.0).tolist() or got.fallback is not None
        masked_total += int(got.masked.sum())
        fired_total += sum(len(ids) for _, ids in got.fired)

    times = time_per_decision(
        {
            "indexed_1": small.govern,
            "indexed_n": large.govern,
            "naive_1": lambda c, a, lg: naive_govern(canonical_rules[:1], large.classes, c, a, lg),
            "naive_n": lambda c, a, lg: naive_govern(canonical_rules, large.classes, c, a, lg),
        },
        timed_passes if timed_passes is not None else [decisions] * (repeats + 1),
        repeats,
    )
    return {
        "masked_per_decision": masked_total / len(decisions),
        "firings_per_decision": fired_total / len(decisions),
        **times,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scars", type=int, default=1000, help="active scars in the large schema")
    parser.add_argument("--decisions", type=int, default=2000, help="decisions per timing pass")
    parser.add_argument("--repeats", type=int, default=5, help="timing passes (the best is reported)")
    parser.add_argument(
        "--contexts", type=int, default=10, help="tasks the spread scenario's scars come from"
    )
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    rng = np.random.default_rng(args.seed)
    rules = generate_rules(args.scars, rng)
    decisions = generate_decisions(args.decisions, rng)
    spread_rules = generate_rules(args.scars, rng, contexts=args.contexts)
    n = len(rules)
    actions_per_decision = statistics.mean(len(a) for _, a, _ in decisions)
    print(f"{n} scars, {len(decisions)} decisions, {actions_per_decision:.1f} actions/decision; "
          "CPU µs per decision, best of the passes")  # fmt: skip
    result: dict[str, object] = {
        "scars": n,
        "decisions": len(decisions),
        "actions_per_decision": actions_per_decision,
    }
    # fresh: the dense scars, but every decision (checked, warm-up, each timed pass) is one never seen before
    fresh = [
        generate_decisions(len(decisions), rng, fresh_from=k * len(decisions))
        for k in range(args.repeats + 2)
    ]
    scenarios = (
        ("dense", rules, decisions, None),
        ("spread", spread_rules, decisions, None),
        ("fresh", rules, fresh[0], fresh[1:]),
    )
    for scenario, scenario_rules, checked, timed_passes in scenarios:
        m = measure(scenario_rules, checked, args.repeats, timed_passes)
        us_1, us_n, naive_1, naive_n = (m[k] for k in ("indexed_1", "indexed_n", "naive_1", "naive_n"))
        print(f"[{scenario}] {m['masked_per_decision']:.2f} masked actions and {m['firings_per_decision']:.2f} "
              "rule firings per decision")  # fmt: skip
        print(
            f"[{scenario}] indexed: {us_1:8.1f} µs with 1 scar, {us_n:8.1f} with {n} (ratio {us_n / us_1:.2f})"
        )
        print(f"[{scenario}] naive:   {naive_1:8.1f} µs with 1 scar, {naive_n:8.1f} with {n} "
              f"(ratio {naive_n / naive_1:.2f}); indexed is {naive_n / us_n:.0f}x faster at {n} scars")  # fmt: skip
        # the dense scenario (the original workload) keeps the unprefixed keys
        prefix = "" if scenario == "dense" else f"{scenario}_"
        result.update({
            f"{prefix}masked_per_decision": round(m["masked_per_decision"], 3),
            f"{prefix}firings_per_decision": round(m["firings_per_decision"], 3),
            f"{prefix}us_per_decision_1": round(us_1, 2),
            f"{prefix}us_per_decision_{n}": round(us_n, 2),
            f"{prefix}ratio": round(us_n / us_1, 3),
            f"{prefix}naive_us_per_decision_1": round(naive_1, 2),
            f"{prefix}naive_us_per_decision_{n}": round(naive_n, 2),
            f"{prefix}naive_ratio": round(naive_n / naive_1, 3),
            f"{prefix}speedup_vs_naive": round(naive_n / us_n, 1),
        })  # fmt: skip
    result.update({"contexts": args.contexts, "timer": "process_time", "seed": args.seed})
    print(json.dumps(result))


if __name__ == "__main__":
    main()
