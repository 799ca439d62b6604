"""Quick start (docs/runtime.md): gate a tool, feed a failure, watch a scar admitted and enforced, verify the ledger."""

import tempfile
from pathlib import Path

from scars.agents.runtime import ScarBlocked, Verdict, open_gate

gate = open_gate(
    Path(tempfile.mkdtemp()) / "ledger.sqlite", core=['if role == "guest" then forbid_tool_call("refund")']
)


@gate.tool
def refund(order: str, amount: int) -> str:
    return f"refunded {amount} on {order}"


with gate.using({"role": "agent", "channel": "chat"}):
    for order, amount in [("A1", 20), ("A2", 35), ("A3", 5000)]:
        print(refund(order, amount))
    # the finance check flags the last refund: report it (signal, synthesis and merge run in the background)
    verdict = Verdict("refund_limit", "refund above the limit", "finance_check")
    outcome = gate.report_failure(None, ("refund", {"order": "A3", "amount": 5000}), verdict).result()
    print("d_t =", round(outcome.d, 3), "| admitted:", outcome.rule)
    try:
        refund("A3", 5000)  # the same refund again: refused before the tool runs
    except ScarBlocked as blocked:
        print("blocked:", blocked)
    print(refund("A4", 40))
    print(
        refund("A5", 5001)
    )  # one failure teaches its instance, not the limit (docs/runtime.md, "What is not")
with gate.using({"role": "guest", "channel": "chat"}):
    try:
        refund("A6", 10)  # the core schema H forbids guests any refund
    except ScarBlocked as blocked:
        print("guest:", blocked)
print("ledger verifies:", gate.verify().ok, "| active scars:", [s.control_text for s in gate.scars])
gate.close()
