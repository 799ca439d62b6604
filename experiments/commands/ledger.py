"""``scars ledger``: the audit-plane ledger of an agent (SPEC §1, §5; seed 000 §3).

    scars ledger admit PATH RULE [--scope JSON] [--evidence JSON] [--reason TEXT]
    scars ledger retire PATH ID --reason TEXT
    scars ledger revoke PATH ID --evidence JSON --reason TEXT
    scars ledger show PATH
    scars ledger verify PATH

Exit codes: 0 success; 1 the ledger refused (integrity failure, no resurrection, lifecycle); 2 bad input
(rule text that does not parse, bad JSON, bad scope) — always with the message, never a traceback.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from agents.runtime import Ledger, Provenance, Scar, Scope
from agents.runtime.store import SchemaStore
from synthesis.dsl import Action, parse_rule
from synthesis.dsl.semantics import fires
from synthesis.errors import ConfigError, DSLSyntaxError, LedgerError


def _fail(message: str, code: int) -> None:
    click.echo(f"error: {message}", err=True)
    raise SystemExit(code)


def _json_option(text: str | None, name: str) -> Any:
    if text is None:
        return None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        _fail(f"--{name} is not valid JSON ({exc}): {text!r}", 2)


def _time(us: int | None) -> str:
    if us is None:
        return "-"
    return dt.datetime.fromtimestamp(us / 1e6, tz=dt.UTC).strftime("%Y-%m-%d %H:%M:%S.%f")


@click.group("ledger")
def ledger() -> None:
    """The append-only, hash-chained audit ledger of scars (admit, retire, revoke, show, verify). Writes go
    through the schema store, which verifies the chain on open and fails closed."""


@ledger.command("admit")
@click.argument("path", type=click.Path(dir_okay=False, path_type=Path))
@click.argument("rule")
@click.option(
    "--scope", "scope_json", help='Validity scope as JSON, e.g. \'{"env_version": "v2", "confidence": 0.9}\'.'
)
@click.option("--evidence", "evidence_json", help="Evidence as a JSON object or a list of JSON objects.")
@click.option(
    "--reason", default="admitted from the command line", show_default=True, help="Why it is admitted."
)
def admit(path: Path, rule: str, scope_json: str | None, evidence_json: str | None, reason: str) -> None:
    """Admit the scar whose control plane is RULE (DSL text) into the ledger at PATH; prints its id."""
    try:
        parsed = parse_rule(rule)
    except DSLSyntaxError as exc:
        _fail(f"bad rule: {exc}", 2)
    scope_data = _json_option(scope_json, "scope") or {}
    evidence = _json_option(evidence_json, "evidence")
    evidence = [] if evidence is None else evidence if isinstance(evidence, list) else [evidence]
    try:
        if not isinstance(scope_data, dict):
            raise ConfigError(f"--scope must be a JSON object, got {scope_data!r}")
        scar = Scar(
            parsed,
            evidence=tuple(evidence),
            provenance=Provenance(verifier_id="human", synthesiser="cli"),
            scope=Scope.from_json(scope_data),
        )
    except ConfigError as exc:
        _fail(str(exc), 2)
    try:
        with SchemaStore(path) as store:
            event = store.admit(scar, reason=reason)
    except LedgerError as exc:
        _fail(str(exc), 1)
    click.echo(f"admitted {scar.id} (event {event.seq}): {scar.control_text}")


@ledger.command("retire")
@click.argument("path", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.argument("scar_id")
@click.option("--reason", required=True, help="Why the scope no longer holds (e.g. 'env_version v1 -> v2').")
def retire(path: Path, scar_id: str, reason: str) -> None:
    """Retire the active scar SCAR_ID (its evidence stays in the ledger)."""
    try:
        with SchemaStore(path) as store:
            event = store.retire(scar_id, reason=reason)
    except LedgerError as exc:
        _fail(str(exc), 1)
    click.echo(f"retired {scar_id} (event {event.seq}): {reason}")


@ledger.command("revoke")
@click.argument("path", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.argument("scar_id")
@click.option(
    "--evidence",
    "evidence_json",
    required=True,
    help='Counter-evidence: a verified success the scar blocks, as JSON {"q": {context}, "a": {action}, '
    '"verifier_id": …, "evidence_id": …} (or a list of them). Each must be an action the scar fires on.',
)
@click.option("--reason", required=True, help="Why the scar is refuted.")
def revoke(path: Path, scar_id: str, evidence_json: str, reason: str) -> None:
    """Revoke the active scar SCAR_ID by counter-evidence: verified-safe actions it would have blocked (§4.5)."""
    evidence = _json_option(evidence_json, "evidence")
    items = evidence if isinstance(evidence, list) else [evidence]
    try:
        with SchemaStore(path) as store:
            scar = next((s for s in store.scars if s.id == scar_id), None)
            if scar is None:
                raise ConfigError(
                    f"no active scar {scar_id!r}; active: {', '.join(s.id for s in store.scars) or 'none'}"
                )
            for item in items:
                if (
                    not isinstance(item, dict)
                    or not isinstance(item.get("q"), dict)
                    or not isinstance(item.get("a"), dict)
                ):
                    raise ConfigError(
                        f"counter-evidence must be a JSON object with 'q' and 'a' objects, got {item!r:.200}"
                    )
                try:
                    action = Action.from_dict(item["a"])
                except (KeyError, TypeError) as exc:
                    raise ConfigError(
                        f"counter-evidence 'a' is not an action ({exc}): {item['a']!r:.200}"
                    ) from exc
                if not fires(scar.rule, item["q"], action):
                    raise ConfigError(
                        f"scar {scar_id} does not fire on {item['a']!r:.200} in that context: not counter-evidence"
                    )
            event = store.revoke(scar_id, items, reason=reason)
    except ConfigError as exc:
        _fail(str(exc), 2)
    except LedgerError as exc:
        _fail(str(exc), 1)
    click.echo(f"revoked {scar_id} (event {event.seq}): {reason}")


@ledger.command("show")
@click.argument("path", type=click.Path(exists=True, dir_okay=False, path_type=Path))
def show(path: Path) -> None:
    """Print the events, the verification result and the active scars of the ledger at PATH."""
    console = Console()
    try:
        with Ledger(path) as led:
            events = led.events()
            report = led.verify()
            active = led.active_scars() if report.ok else ()
    except LedgerError as exc:
        _fail(str(exc), 1)
    table = Table(title=f"ledger {path}")
    for column in ("seq", "type", "subject", "tx time (UTC)", "valid from", "valid to", "hash"):
        table.add_column(column, justify="right" if column == "seq" else "left")
    for e in events:
        table.add_row(
            str(e.seq),
            e.type,
            e.subject or "-",
            _time(e.tx_time),
            str(e.valid_from),
            str(e.valid_to),
            e.hash[:12],
        )
    console.print(table)
    if report.ok:
        console.print(f"[green]{report.reason}[/green], head {report.head_hash[:16]}…")
        scars = Table(title=f"active scars ({len(active)})")
        for column in ("id", "rule", "scope", "evidence items"):
            scars.add_column(column)
        for s in active:
            scope = ", ".join(f"{k}={v}" for k, v in s.scope.to_json().items() if v is not None)
            scars.add_row(s.id, s.control_text, scope, str(len(s.evidence)))
        console.print(scars)
    else:
        console.print(
            f"[red]verification failed at event {report.first_bad_seq}: {report.reason}[/red] — "
            "active scars are not shown (fail closed)"
        )


@ledger.command("verify")
@click.argument("path", type=click.Path(exists=True, dir_okay=False, path_type=Path))
def verify(path: Path) -> None:
    """Verify the hash chain and head of the ledger at PATH: exit 0 when intact, 1 and the first bad event if not."""
    try:
        with Ledger(path) as led:
            report = led.verify()
            bad = (
                next((e for e in led.events() if e.seq == report.first_bad_seq), None)
                if not report.ok
                else None
            )
    except LedgerError as exc:
        _fail(str(exc), 1)
    if report.ok:
        click.echo(f"ok: {report.reason}, head {report.head_hash}")
        return
    detail = f" ({bad.type} {bad.subject or ''}, hash {bad.hash[:12]})" if bad is not None else ""
    _fail(f"first bad event {report.first_bad_seq}{detail}: {report.reason}", 1)
