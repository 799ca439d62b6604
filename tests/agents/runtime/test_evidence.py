"""The contrast of a reported breach with what the gate saw (agents.runtime.evidence): counter-evidence, the
distinguishing and kept arguments, and the fragment whose safe pairs keep a rule on them."""

from __future__ import annotations

from scars.agents.runtime.evidence import contrast, contrast_fragment
from scars.synthesis.dsl import Action
from scars.synthesis.failure import Failure
from scars.synthesis.fragments import COUNTERFACTUAL_SENTINEL, RecordedStep


def send(recipient: str, amount: float, date: str = "2022-01-01") -> Action:
    return Action(
        "tool", "send_money", tuple(sorted({"recipient": recipient, "amount": amount, "date": date}.items()))
    )


def step(action: Action, violated: bool = False) -> RecordedStep:
    return RecordedStep({"user_task": "u"}, (action,), (0.0,), 0, violated)


def test_arguments_an_allowed_call_of_the_tool_had_are_not_distinguishing():
    breach = send("ATTACKER", 0.01)
    history = [step(send("bob", 98.7)), step(Action("tool", "read", (("date", "2022-01-01"),))), step(breach)]
    c = contrast(breach, history, [])
    assert c.distinguishing == {
        "recipient",
        "amount",
    }  # bob's transfer had the same date; the read is another tool
    assert c.kept == c.distinguishing and c.partner is None
    assert [a for _, a in c.allowed] == [
        send("bob", 98.7)
    ]  # the breach's own allowed call is no counter-evidence


def test_with_no_counter_evidence_every_argument_is_kept_and_a_second_breach_generalises_to_what_they_share():
    first, second = send("ATTACKER", 0.01), send("ATTACKER", 1000000, "2022-01-01")
    assert contrast(first, [step(first)], []).kept == {"recipient", "amount", "date"}
    c = contrast(second, [step(first), step(second)], [first])
    assert c.kept == {"recipient", "date"} and c.partner == first
    assert c.covers(second, first) and not c.covers(second, send("bob", 1000000))
    # an allowed call repeating a breach (its case already breached) says nothing against it
    assert contrast(second, [step(first), step(first)], [first]).allowed == ()


def test_the_fragment_presumes_the_breach_safe_with_each_kept_argument_changed_and_keeps_no_context():
    breach = send("ATTACKER", 10)
    c = contrast(breach, [step(send("bob", 10, "2022-04-01"))], [])
    fragment = contrast_fragment(Failure({"user_task": "u"}, (breach,), "leak"), c)
    assert fragment.q == {} and fragment.causal_args == {"recipient", "date"}
    changed = {(a.arg("recipient"), a.arg("date")) for _, a in fragment.safe_counterfactuals}
    assert changed == {
        ("bob", "2022-04-01"),
        (COUNTERFACTUAL_SENTINEL, "2022-01-01"),
        ("ATTACKER", COUNTERFACTUAL_SENTINEL),
    }
    numbers = contrast_fragment(Failure({}, (breach,), "leak"), contrast(breach, [], []))
    amounts = sorted(a.arg("amount") for _, a in numbers.safe_counterfactuals if a.arg("amount") != 10)
    assert amounts == [-1, 21]  # below and above: no range of amounts is presumed to violate
