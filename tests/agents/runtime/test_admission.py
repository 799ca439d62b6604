"""No resurrection, by the failure record's one shape (issue 28, item 1): a retired or revoked scar comes back only
on a recorded failure of an action it masks, read through ``Failure`` — in every shape the code writes."""

from __future__ import annotations

import itertools

from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scars.agents.runtime import Scar
from scars.agents.runtime.errors import ResurrectionRefused
from scars.agents.runtime.ledger import Ledger, verdict_evidence
from scars.agents.runtime.store import SchemaStore
from scars.experiments.cli import main
from scars.synthesis.dsl import Action, parse_rule
from scars.synthesis.failure import Failure, FailureSource

HARVEST = 'if pool_resource_level < 20 then forbid_tool_call("harvest")'
MOVE = 'if step > 3 then forbid_env_action("move")'
LIMIT = 'if step > 3 then forbid_tool_arg("harvest", "amount", 10)'


def failure(*actions: Action, step: int = 5) -> Failure:
    return Failure(
        {"pool_resource_level": 10, "step": step}, actions, "over_harvest", FailureSource("t", 0, step, "v")
    )


def test_a_failure_of_an_action_the_scar_does_not_mask_does_not_readmit_it(tmp_path):
    """The case that broke: the rule read ``payload["action"]``, which no real failure record has."""
    with SchemaStore(tmp_path / "l.db") as store:
        scar = Scar(parse_rule(HARVEST), evidence=({"f": 1},))
        store.admit(scar, reason="r")
        store.retire(scar.id, reason="scope expired")
        unrelated = store.record_failure(failure(Action.env("move", obj="cup 1")), d_t=0.7, z=[1, 0, 0, 0])
        candidate = Scar(scar.rule, evidence=(verdict_evidence(unrelated),))
        allowed, reason = store.may_admit(candidate)
        assert not allowed and "'move', which this scar does not mask" in reason, reason
        try:
            store.admit(candidate, reason="r")
            raise AssertionError("re-admitted on an unrelated failure")
        except ResurrectionRefused:
            pass
        masked = store.record_failure(failure(Action.tool("harvest", amount=30)), d_t=0.7)
        assert store.may_admit(Scar(scar.rule, evidence=(verdict_evidence(masked),)))[0]


def test_the_cli_refuses_a_verdict_of_an_unmasked_action(tmp_path):
    path = tmp_path / "c.db"
    runner = CliRunner()
    assert runner.invoke(main, ["ledger", "admit", str(path), HARVEST]).exit_code == 0
    with SchemaStore(path) as store:
        sid = store.scars[0].id
        store.retire(sid, reason="scope")
        unrelated = store.record_failure(failure(Action.env("move", obj="cup 1")))
    result = runner.invoke(main, ["ledger", "admit", str(path), HARVEST, "--verdict", str(unrelated.seq)])
    assert result.exit_code == 1 and "does not mask" in result.output, result.output
    assert "Traceback" not in result.output


def test_a_payload_that_is_not_a_failure_record_backs_nothing(tmp_path):
    """The old raw shapes (an ``action`` key, free fields) are no failure: fail closed."""
    with Ledger(tmp_path / "r.db") as led:
        scar = Scar(parse_rule(HARVEST), evidence=({"f": 1},))
        led.admit(scar)
        led.retire(scar.id, "scope")
        for payload in (
            {"action": {"kind": "tool", "name": "harvest", "args": {}}},
            {"q": {}, "F": ["harvest 10"], "theta": "x"},
            {"q": {}, "F": [], "theta": "x"},
            {
                "q": {},
                "F": [{"kind": "tool", "name": "harvest", "args": {}}],
                "theta": "x",
                "source": {"step": "x"},
            },
        ):
            verdict = led.observe_failure(payload)
            allowed, reason = led.may_admit(Scar(scar.rule, evidence=(verdict_evidence(verdict),)))
            assert not allowed and "is not a failure record" in reason, (payload, reason)


ACTIONS = st.sampled_from(
    [
        Action.tool("harvest", amount=10),
        Action.tool("harvest", amount=30),
        Action.tool("harvest"),
        Action.tool("punish", target="farm_1"),
        Action.env("move", obj="cup 1", recep="sinkbasin 1"),
        Action.env("open", recep="drawer 1"),
    ]
)


def masks(rule_text: str, a: Action) -> bool:
    """An oracle written from the DSL's definitions, independent of ``mask_covers``."""
    if rule_text == HARVEST:
        return a.kind == "tool" and a.name == "harvest"
    if rule_text == MOVE:
        return a.kind == "env" and a.name == "move"
    return a.kind == "tool" and a.name == "harvest" and dict(a.args).get("amount") == 10


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    rule_text=st.sampled_from([HARVEST, MOVE, LIMIT]),
    failures=st.lists(st.lists(ACTIONS, min_size=1, max_size=3), min_size=1, max_size=5),
    shapes=st.lists(st.sampled_from(["store", "failure", "json"]), min_size=5, max_size=5),
    revoke=st.booleans(),
)
def test_only_a_failure_of_a_masked_action_readmits(tmp_path_factory, rule_text, failures, shapes, revoke):
    """Failures of masked and unmasked actions, written in every shape the code writes (``record_failure`` with
    the signal's extras, ``observe_failure(Failure)``, ``observe_failure(failure.to_json())``): a re-admission is
    allowed exactly when the cited failure has a failed action the rule masks, and only the first such one does."""
    path = tmp_path_factory.mktemp("adm") / "l.db"
    steps = itertools.count(4)
    with SchemaStore(path) as store:
        scar = Scar(parse_rule(rule_text), evidence=({"origin": 1},))
        store.admit(scar, reason="r")
        if revoke:
            store.revoke(
                scar.id, [{"q": {"step": 9}, "a": {"kind": "tool", "name": "x", "args": {}}}], reason="r"
            )
        else:
            store.retire(scar.id, reason="scope")
        readmitted = 0
        for actions, shape in zip(failures, shapes, strict=False):
            f = failure(*actions, step=next(steps))
            if shape == "store":
                event = store.record_failure(f, d_t=0.6, z=[1.0, 0.0, 0.0, 0.0])
            elif shape == "failure":
                event = store.ledger.observe_failure(f)
            else:
                event = store.ledger.observe_failure(f.to_json())
            candidate = Scar(scar.rule, evidence=(verdict_evidence(event),))
            allowed, reason = store.may_admit(candidate)
            assert allowed == any(masks(rule_text, a) for a in actions), (actions, shape, reason)
            if allowed:
                store.admit(candidate, reason="verdict")
                readmitted += 1
                store.retire(scar.id, reason="scope again")
                # the verdict served once: citing it again (with other detail) is refused
                again = Scar(scar.rule, evidence=(verdict_evidence(event, note="again"),))
                assert not store.may_admit(again)[0]
        assert store.scars == ()
        assert readmitted == sum(any(masks(rule_text, a) for a in acts) for acts in failures[: len(shapes)])
