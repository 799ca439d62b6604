"""Benchmark of scars-runtime (issue 18): the overhead of a gated tool call with 1 and with N (default 1000) active
scars, against the bare call of the same function.

The tool is a plain Python function ``transfer(account: str, amount: int, currency: str)`` gated with
``Gate.tool`` (fallback ``None``): each call binds its arguments, maps them and the context to a DSL decision, asks
the control plane which rules fire and queues the decision for the batched decision log. The N scars are admitted
through the ledger (``Gate.admit``) like an operator or the accommodation loop would: rules over 20 tools (one in
twenty masks ``transfer``) with guards on the context (``tenant``, ``tier``), on arguments (equality on ``account``
or ``currency``, thresholds on ``amount``) and ``forbid_tool_arg`` masks — so the call meets the ~N/20 rules filed
under its tool, and about 5 % of the calls are blocked. The context is a four-key session state set with
``Gate.using``.

Times are CPU time per call, the best of ``--repeats`` interleaved passes of ``--calls`` calls each: bare, gated at 1
scar, gated at N scars, gated at N scars without the decision log. Two clocks: the calling thread's CPU
(``time.thread_time``: the decision path) and the whole process's (``time.process_time``: the path plus the decision
log's writer thread, whose batched writes happen meanwhile). CPU time, not wall-clock: the shared machine runs other
jobs, and wall-clock time would mostly measure their load.

Usage:  python benchmarks/runtime.py [--scars 1000] [--calls 20000] [--repeats 5] [--seed 0]
Prints a few readable lines, then, last, one JSON line.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from scars.agents.runtime import open_gate  # noqa: E402

TOOLS = ["transfer", *(f"tool_{i}" for i in range(19))]
CURRENCIES = ["EUR", "USD", "GBP", "CHF", "JPY"]


def rules(n: int, rng: np.random.Generator) -> list[str]:
    out: list[str] = []
    i = -1
    seen: set[str] = set()

    def add(text: str) -> None:
        if text not in seen:  # one scar per rule: a duplicate would be a re-admission without new evidence
            seen.add(text)
            out.append(text)

    while len(out) < n:
        i += 1
        tool = TOOLS[i % len(TOOLS)]
        tenant = f"t{rng.integers(0, 50)}"
        kind = i // len(TOOLS) % 4
        if kind == 0:
            add(f'if tenant == "{tenant}" and action.account == "acc{i}" then forbid_tool_call("{tool}")')
        elif kind == 1:
            add(f'if tier == "basic" and action.amount > {1000 + i} then forbid_tool_call("{tool}")')
        elif kind == 2:
            cur = CURRENCIES[i % len(CURRENCIES)]
            add(f'if tenant == "{tenant}" then forbid_tool_arg("{tool}", "currency", "{cur}")')
        else:
            add(f'if region == "r{i % 7}" and action.account == "acc{i}" then forbid_tool_call("{tool}")')
    return out


def transfer(account: str, amount: int, currency: str = "EUR") -> int:
    return amount


def timed(fn, calls: list[tuple[str, int, str]], flush) -> tuple[float, float]:
    """(µs of the calling thread's CPU per call, µs of the whole process's CPU per call): the first is the call path;
    the second adds what the decision log's writer thread spent writing the pass's decisions (flushed at the end)."""
    thread, process = time.thread_time(), time.process_time()
    for account, amount, currency in calls:
        fn(account, amount, currency)
    thread = time.thread_time() - thread
    flush()
    n = len(calls)
    return thread / n * 1e6, (time.process_time() - process) / n * 1e6


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--scars", type=int, default=1000, help="active scars of the large set (default 1000)"
    )
    parser.add_argument("--calls", type=int, default=20000, help="calls per timed pass (default 20000)")
    parser.add_argument("--repeats", type=int, default=5, help="interleaved passes; the best is reported")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.scars < 1 or args.calls < 1 or args.repeats < 1:
        print("runtime.py: --scars, --calls and --repeats must be >= 1", file=sys.stderr)
        return 2
    rng = np.random.default_rng(args.seed)
    texts = rules(args.scars, rng)
    calls = [
        (
            f"acc{rng.integers(0, args.scars * 2)}",
            int(rng.integers(1, 1100)),
            CURRENCIES[rng.integers(0, 5)],
        )
        for _ in range(args.calls)
    ]
    context = {"tenant": "t3", "tier": "basic", "region": "r2", "user": "u1"}
    shm = Path("/dev/shm")  # the ledgers on tmpfs: admitting N scars is N fsync'd transactions
    work = Path(tempfile.mkdtemp(dir=shm if shm.is_dir() else None))
    t0 = time.perf_counter()
    for label, n in (("one", 1), ("many", args.scars)):
        with open_gate(work / f"{label}.sqlite") as gate:
            for text in texts[:n]:
                gate.admit_rule(text, reason="benchmark")
    for suffix in ("", ".key", ".head"):  # the same scar set, for the gate without a decision log
        shutil.copy(work / f"many.sqlite{suffix}", work / f"nolog.sqlite{suffix}")
    admit_s = time.perf_counter() - t0
    gates = {
        "one": open_gate(work / "one.sqlite"),
        "many": open_gate(work / "many.sqlite"),
        "nolog": open_gate(work / "nolog.sqlite", decision_log=False),
    }
    assert len(gates["many"].scars) == args.scars and len(gates["one"].scars) == 1
    fns = {"bare": transfer}
    for label, gate in gates.items():
        fns[label] = gate.tool(fallback=None)(transfer)
    with gates["many"].using(context):
        blocked = sum(fns["many"](*c) is None for c in calls[:2000])
    best = {label: (float("inf"), float("inf")) for label in fns}
    for _ in range(args.repeats):
        for label, fn in fns.items():
            gate = gates.get(label)
            with gates["one"].using(context), gates["many"].using(context), gates["nolog"].using(context):
                thread, process = timed(fn, calls, gate.flush if gate is not None else lambda: None)
                best[label] = (min(best[label][0], thread), min(best[label][1], process))
    for gate in gates.values():
        gate.flush()
    logged = len(gates["many"].log.rows())
    for gate in gates.values():
        gate.close()
    shutil.rmtree(work, ignore_errors=True)
    (bare, _), (one, one_p), (many, many_p), (nolog, _) = (best[k] for k in ("bare", "one", "many", "nolog"))
    result = {
        "scars": args.scars,
        "calls": args.calls,
        "repeats": args.repeats,
        "bare_us": round(bare, 3),
        "gated_us_1": round(one, 3),
        f"gated_us_{args.scars}": round(many, 3),
        f"gated_us_{args.scars}_no_log": round(nolog, 3),
        "gated_process_us_1": round(one_p, 3),
        f"gated_process_us_{args.scars}": round(many_p, 3),
        "overhead_us_1": round(one - bare, 3),
        f"overhead_us_{args.scars}": round(many - bare, 3),
        "ratio": round(many / one, 3),
        "blocked_share": round(blocked / 2000, 4),
        "decisions_logged": logged,
        "admit_seconds": round(admit_s, 1),
    }
    out = sys.stderr
    print(f"bare call:          {bare:.2f} µs", file=out)
    print(f"gated, 1 scar:      {one:.2f} µs on the call path, {one_p:.2f} µs with the log writer", file=out)
    print(
        f"gated, {args.scars} scars: {many:.2f} µs on the call path, {many_p:.2f} µs with the log writer",
        file=out,
    )
    print(f"gated, {args.scars} scars, no decision log: {nolog:.2f} µs", file=out)
    print(f"ratio {args.scars}/1 = {result['ratio']}; blocked {blocked} of 2000 calls", file=out)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
