"""The Progent-style static policy on AgentDojo (issue 42, item 3): the rule files load into the gate, and on calls
constructed here (not taken from any injection task) they forbid what the policy says and permit the rest."""

from __future__ import annotations

import pytest

from tests.support.extras import require_extra

require_extra("agentdojo", "agentdojo")

from agentdojo.task_suite.load_suites import get_suite  # noqa: E402

from scars.experiments.agentdojo_bench import BENCHMARK_VERSION  # noqa: E402
from scars.experiments.agentdojo_progent import (  # noqa: E402
    POLICY_SUITES,
    element_views,
    open_policy_gate,
    policy_file,
    policy_rules,
)
from scars.synthesis.errors import ConfigError  # noqa: E402


@pytest.fixture
def policy(tmp_path):
    """suite name -> the policy gate of that suite (closed after the test)."""
    gates = {}

    def open_(name):
        if name not in gates:
            gates[name] = open_policy_gate(get_suite(BENCHMARK_VERSION, name), tmp_path / f"{name}.sqlite")
        return gates[name]

    yield open_
    for g in gates.values():
        g.gate.close()


def _allowed(gate, user_task, function, **kwargs):
    return gate.decide(function, kwargs, gate.context(user_task)).allowed


def test_every_suite_has_a_policy_that_parses_and_names_only_the_suites_tools():
    for name in POLICY_SUITES:
        tools = {f.name for f in get_suite(BENCHMARK_VERSION, name).tools}
        rules = policy_rules(name)
        assert rules, name
        assert {r.mask.tool_id for r in rules} <= tools, name
    with pytest.raises(ConfigError, match="no Progent-style policy for the suite 'shopping'"):
        policy_file("shopping")


def test_banking_money_goes_only_to_known_payees_and_the_password_changes_only_when_asked(policy):
    bank = policy("banking")
    pay = {"amount": 10.0, "subject": "x", "date": "2022-04-01"}
    assert _allowed(bank, "user_task_4", "send_money", recipient="GB29NWBK60161331926819", **pay)
    assert not _allowed(bank, "user_task_4", "send_money", recipient="XX00NEWPAYEE0000000000", **pay)
    assert not _allowed(
        bank, "user_task_6", "schedule_transaction", recipient="XX00NEWPAYEE0000000000", recurring=True, **pay
    )
    # a standing order's amount may change; its recipient only to a known payee
    assert _allowed(bank, "user_task_2", "update_scheduled_transaction", id=7, amount=1200.0)
    assert not _allowed(
        bank, "user_task_2", "update_scheduled_transaction", id=7, recipient="XX00NEWPAYEE0000000000"
    )
    assert _allowed(bank, "user_task_14", "update_password", password="new-one")
    assert not _allowed(bank, "user_task_3", "update_password", password="new-one")
    assert _allowed(bank, "user_task_13", "update_user_info", street="Elm 1")
    assert not _allowed(bank, "user_task_0", "update_user_info", street="Elm 1")
    assert _allowed(bank, "user_task_0", "read_file", file_path="bill-december-2023.txt")


def test_a_list_argument_is_allowed_only_when_every_element_is(policy):
    work = policy("workspace")
    mail = {"subject": "s", "body": "b"}
    known, other = "david.smith@bluesparrowtech.com", "someone@elsewhere.example"
    assert _allowed(work, "user_task_13", "send_email", recipients=[known], **mail)
    assert _allowed(
        work, "user_task_13", "send_email", recipients=[known, "katie.brown@bluesparrowtech.com"], **mail
    )
    assert not _allowed(work, "user_task_13", "send_email", recipients=[known, other], **mail)
    assert not _allowed(work, "user_task_13", "send_email", recipients=[known], bcc=[other], **mail)
    assert not _allowed(
        work, "user_task_13", "send_email", recipients=[known], cc=[known, known, other], **mail
    )
    assert _allowed(work, "user_task_13", "send_email", recipients=[known], cc=None, bcc=[], **mail)
    event = {
        "title": "t",
        "start_time": "2024-05-19 12:00",
        "end_time": "2024-05-19 13:00",
        "description": "d",
    }
    assert _allowed(work, "user_task_12", "create_calendar_event", **event)
    assert not _allowed(work, "user_task_12", "create_calendar_event", participants=[other], **event)
    assert not _allowed(work, "user_task_32", "share_file", file_id="26", email=other, permission="r")
    assert _allowed(work, "user_task_35", "delete_file", file_id="11")
    assert not _allowed(work, "user_task_29", "delete_file", file_id="11")
    assert not _allowed(work, "user_task_24", "delete_email", email_id="0")


def test_slack_and_travel_forbid_what_no_prompt_asks_for(policy):
    slack, travel = policy("slack"), policy("travel")
    assert not _allowed(slack, "user_task_7", "remove_user_from_slack", user="Charlie")
    assert _allowed(slack, "user_task_2", "invite_user_to_slack", user="Dora", user_email="dora@gmail.com")
    assert not _allowed(
        slack, "user_task_2", "invite_user_to_slack", user="Dora", user_email="d@elsewhere.example"
    )
    assert not _allowed(
        slack, "user_task_0", "invite_user_to_slack", user="Dora", user_email="dora@gmail.com"
    )
    assert _allowed(slack, "user_task_0", "get_webpage", url="www.informations.com")
    assert not _allowed(slack, "user_task_0", "get_webpage", url="www.elsewhere.example/?q=secret")
    assert _allowed(slack, "user_task_12", "send_channel_message", channel="External_0", body="hi")
    assert _allowed(
        travel, "user_task_0", "reserve_hotel", hotel="Le Marais Boutique", start_day="a", end_day="b"
    )
    assert not _allowed(
        travel, "user_task_3", "reserve_hotel", hotel="Le Marais Boutique", start_day="a", end_day="b"
    )
    assert not _allowed(travel, "user_task_0", "reserve_restaurant", restaurant="r", start_time="t")
    assert not _allowed(travel, "user_task_3", "get_user_information")
    mail = {"subject": "s", "body": "b"}
    assert _allowed(travel, "user_task_3", "send_email", recipients=["janeLong@google.com"], **mail)
    assert not _allowed(travel, "user_task_3", "send_email", recipients=["lily.white@gmail.com"], **mail)


def test_element_views_cut_each_list_to_one_element_per_view():
    views = element_views(
        {"to": ["a", "b", "c"], "cc": ["x"], "bcc": [], "body": "t"}, frozenset({"to", "cc", "bcc"})
    )
    assert [v["to"] for v in views] == [["a"], ["b"], ["c"]]
    assert [v["cc"] for v in views] == [["x"]] * 3
    assert all(v["bcc"] is None and v["body"] == "t" for v in views)
    assert element_views({"to": ["a"], "body": "t"}, frozenset({"to"})) == [{"to": ["a"], "body": "t"}]
