"""``scars ledger``: the audit-plane ledger of an agent (SPEC §1, §5; seed 000 §3).

    scars ledger admit PATH RULE [--scope JSON] [--evidence JSON] [--verdict SEQ]… [--reason TEXT] [--key-file F]
    scars ledger retire PATH ID --reason TEXT [--key-file F]
    scars ledger revoke PATH ID --evidence JSON --reason TEXT [--key-file F]
    scars ledger show PATH [--anchor HEAD] [--key-file F]
    scars ledger verify PATH [--anchor HEAD] [--key-file F]

``admit``, ``retire`` and ``revoke`` write through the schema store (``agents.runtime.store``), which verifies the
chain when it opens and refuses a ledger that does not verify. ``show`` and ``verify`` open the ledger read-only: they never create, migrate or write anything, and reject a
file that is not a scars ledger. Exit codes: 0 success; 1 the ledger refused or failed verification (integrity,
no resurrection, lifecycle); 2 bad input (rule text that does not parse, bad JSON, bad scope, a file that is not a
ledger, a missing key file, a malformed anchor) — always one line on stderr, never a traceback.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any, NoReturn

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from scars.agents.runtime import Provenance, Scar, Scope
from scars.agents.runtime.ledger import KEY_FILE_ENV, VERDICT_EVENTS, Ledger, parse_anchor, verdict_evidence
from scars.agents.runtime.store import SchemaIntegrityError, SchemaStore
from scars.synthesis.dsl import Action, parse_rule
from scars.synthesis.dsl.semantics import fires
from scars.synthesis.errors import ConfigError, DSLSyntaxError, LedgerError, LedgerIntegrityError, ScarsError

_KEY_HELP = (
    f"HMAC key of the ledger (default: ${KEY_FILE_ENV}, else PATH.key). With it the MACs are checked and a rewrite "
    "with recomputed hashes is detected; without it they cannot be."
)


def _fail(message: str, code: int) -> NoReturn:
    click.echo(f"error: {' '.join(str(message).split())}", err=True)
    raise SystemExit(code)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number (use a finite number)")


def _json_option(text: str | None, name: str) -> Any:
    if text is None:
        return None
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except (
        ValueError,
        RecursionError,
    ) as exc:  # JSONDecodeError, NaN, a number with too many digits, nesting
        _fail(f"--{name} is not valid JSON ({str(exc) or type(exc).__name__}): {text!r:.120}", 2)


def _open(path: Path, key_file: Path | None, *, read_only: bool, anchor: str | None = None) -> Ledger:
    """Open the ledger or exit: 1 when it fails an integrity check on opening, 2 when PATH/KEY is bad input."""
    try:
        return Ledger(path, key_file=key_file, read_only=read_only, anchor=anchor)
    except LedgerIntegrityError as exc:
        _fail(str(exc), 1)
    except (LedgerError, ConfigError) as exc:
        _fail(str(exc), 2)


def _anchor_option(text: str | None) -> str | None:
    """``--anchor`` is COUNT:HASH, or a JSON file (e.g. a run's summary.json) holding one ``ledger_head``."""
    if text is None:
        return None
    try:
        return "{}:{}".format(*parse_anchor(text))
    except ConfigError as exc:
        if ":" in text and not Path(text).exists():
            _fail(str(exc), 2)
    path = Path(text)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as exc:
        _fail(f"--anchor {text!r:.120} is neither COUNT:HASH nor a readable JSON file ({exc})", 2)
    found: set[str] = set()

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "ledger_head" and isinstance(value, str):
                    found.add(value)
                else:
                    walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(data)
    if len(found) != 1:
        _fail(
            f"--anchor file {path} holds {len(found)} distinct ledger_head values; pass COUNT:HASH instead", 2
        )
    try:
        return "{}:{}".format(*parse_anchor(found.pop()))
    except ConfigError as exc:
        _fail(f"--anchor file {path}: {exc}", 2)


def _store(path: Path, key_file: Path | None) -> SchemaStore:
    """Open the self-schema for a write or exit: 1 when the ledger fails verification, 2 when PATH/KEY is bad."""
    try:
        return SchemaStore(path, key_file=key_file)
    except (SchemaIntegrityError, LedgerIntegrityError) as exc:
        _fail(str(exc), 1)
    except (LedgerError, ConfigError) as exc:
        _fail(str(exc), 2)


def _time(us: Any) -> str:
    if us is None:
        return "-"
    try:
        return dt.datetime.fromtimestamp(us / 1e6, tz=dt.UTC).strftime("%Y-%m-%d %H:%M:%S.%f")
    except (TypeError, ValueError, OverflowError, OSError):
        return f"{us!r:.30} (not a time)"


def _cell(value: Any, width: int = 40) -> str:
    text = "-" if value is None else str(value)
    return escape(text if len(text) <= width else text[: width - 1] + "…")


@click.group("ledger")
def ledger() -> None:
    """The append-only, hash-chained audit ledger of scars (admit, retire, revoke, show, verify).

    A ledger is PATH plus PATH.head (the head commitment, replaced atomically on every append), PATH.key (the HMAC
    key, created with the ledger; keep it elsewhere with --key-file / $SCARS_LEDGER_KEY_FILE) and PATH.lock.
    """


@ledger.command("admit")
@click.argument("path", type=click.Path(dir_okay=False, path_type=Path))
@click.argument("rule")
@click.option(
    "--scope", "scope_json", help='Validity scope as JSON, e.g. \'{"env_version": "v2", "confidence": 0.9}\'.'
)
@click.option("--evidence", "evidence_json", help="Evidence as a JSON object or a list of JSON objects.")
@click.option(
    "--verdict",
    "verdicts",
    type=click.IntRange(min=1),
    multiple=True,
    help="Sequence number of a failure_observed event of this ledger to cite as verifier-backed evidence "
    "(repeatable). The only evidence that can re-admit a retired or revoked scar.",
)
@click.option(
    "--reason", default="admitted from the command line", show_default=True, help="Why it is admitted."
)
@click.option("--key-file", type=click.Path(dir_okay=False, path_type=Path), default=None, help=_KEY_HELP)
def admit(
    path: Path,
    rule: str,
    scope_json: str | None,
    evidence_json: str | None,
    verdicts: tuple[int, ...],
    reason: str,
    key_file: Path | None,
) -> None:
    """Admit the scar whose control plane is RULE (DSL text) into the ledger at PATH; prints its id.

    \b
    No resurrection: a scar id (the hash of the rule's canonical form, so `x < 20.0`
    and `x < 20` are one scar) that was retired or revoked is re-admitted only with
    fresh verifier-backed evidence: --verdict SEQ naming a failure_observed event
    that the agent's verifier recorded in this ledger AFTER the retirement, not
    cited before for this id, not part of the counter-evidence that revoked it,
    and a failure (q, F) with an action in F that the rule's mask covers; an
    event whose payload is not a failure (q, F) backs nothing. Free JSON given
    with --evidence is recorded as evidence but never unlocks a re-admission.
    An active scar admitted again must bring evidence never recorded for it (it
    then only grows its audit plane).
    """
    try:
        parsed = parse_rule(rule)
    except DSLSyntaxError as exc:
        _fail(f"bad rule: {exc}", 2)
    scope_data = _json_option(scope_json, "scope") or {}
    evidence = _json_option(evidence_json, "evidence")
    evidence = [] if evidence is None else evidence if isinstance(evidence, list) else [evidence]
    try:  # checked before the ledger is opened (or created): bad input leaves nothing behind
        if not isinstance(scope_data, dict):
            raise ConfigError(f"--scope must be a JSON object, got {scope_data!r:.120}")
        scar = Scar(
            parsed,
            evidence=tuple(evidence),
            provenance=Provenance(verifier_id="human", synthesiser="cli"),
            scope=Scope.from_json(scope_data),
        )
    except ConfigError as exc:
        _fail(str(exc), 2)
    with _store(path, key_file) as store:
        led = store.ledger
        cited = []
        for seq in verdicts:
            event = next((e for e in led.events() if e.seq == seq), None) if seq <= led.head()[0] else None
            if event is None or event.type not in VERDICT_EVENTS:
                kind = "no such event" if event is None else f"a {event.type} event"
                _fail(
                    f"--verdict {seq}: {kind}; a verdict is a {' or '.join(VERDICT_EVENTS)} event of {path}",
                    2,
                )
            cited.append(verdict_evidence(event))
        if cited:
            scar = Scar(
                scar.rule, evidence=(*scar.evidence, *cited), provenance=scar.provenance, scope=scar.scope
            )
        try:
            event = store.admit(scar, reason=reason)
        except LedgerError as exc:
            _fail(str(exc), 1)
        except ConfigError as exc:
            _fail(str(exc), 2)
    click.echo(f"admitted {scar.id} (event {event.seq}): {scar.control_text}")


@ledger.command("retire")
@click.argument("path", type=click.Path(dir_okay=False, path_type=Path))
@click.argument("scar_id")
@click.option("--reason", required=True, help="Why the scope no longer holds (e.g. 'env_version v1 -> v2').")
@click.option("--key-file", type=click.Path(dir_okay=False, path_type=Path), default=None, help=_KEY_HELP)
def retire(path: Path, scar_id: str, reason: str, key_file: Path | None) -> None:
    """Retire the active scar SCAR_ID (its evidence stays in the ledger; it comes back only on a new verdict)."""
    if not path.exists():
        _fail(f"no ledger at {path}", 2)
    with _store(path, key_file) as store:
        try:
            event = store.retire(scar_id, reason=reason)
        except LedgerError as exc:
            _fail(str(exc), 1)
        except ConfigError as exc:
            _fail(str(exc), 2)
    click.echo(f"retired {scar_id} (event {event.seq}): {reason}")


@ledger.command("revoke")
@click.argument("path", type=click.Path(dir_okay=False, path_type=Path))
@click.argument("scar_id")
@click.option(
    "--evidence",
    "evidence_json",
    required=True,
    help='Counter-evidence: a verified success the scar blocks, as JSON {"q": {context}, "a": {action}, '
    '"verifier_id": …, "evidence_id": …} (or a list of them). Each must be an action the scar fires on.',
)
@click.option("--reason", required=True, help="Why the scar is refuted.")
@click.option("--key-file", type=click.Path(dir_okay=False, path_type=Path), default=None, help=_KEY_HELP)
def revoke(path: Path, scar_id: str, evidence_json: str, reason: str, key_file: Path | None) -> None:
    """Revoke the active scar SCAR_ID by counter-evidence: verified-safe actions it would have blocked (§4.5).
    A revoked scar never returns on its own counter-evidence."""
    if not path.exists():
        _fail(f"no ledger at {path}", 2)
    evidence = _json_option(evidence_json, "evidence")
    items = evidence if isinstance(evidence, list) else [evidence]
    with _store(path, key_file) as store:
        try:
            scar = next((s for s in store.scars if s.id == scar_id), None)
            if scar is None:
                active = ", ".join(s.id for s in store.scars) or "none"
                raise ConfigError(f"no active scar {scar_id!r}; active: {active}")
            for item in items:
                if (
                    not isinstance(item, dict)
                    or not isinstance(item.get("q"), dict)
                    or not isinstance(item.get("a"), dict)
                ):
                    raise ConfigError(
                        f"counter-evidence must be a JSON object with 'q' and 'a' objects, got {item!r:.120}"
                    )
                try:
                    action = Action.from_dict(item["a"])
                except (KeyError, TypeError, AttributeError) as exc:
                    raise ConfigError(
                        f"counter-evidence 'a' is not an action ({exc!r}): {item['a']!r:.120}"
                    ) from exc
                if not fires(scar.rule, item["q"], action):
                    raise ConfigError(
                        f"scar {scar_id} does not fire on {item['a']!r:.120} there: not counter-evidence"
                    )
            event = store.revoke(scar_id, items, reason=reason)
        except ConfigError as exc:
            _fail(str(exc), 2)
        except LedgerError as exc:
            _fail(str(exc), 1)
    click.echo(f"revoked {scar_id} (event {event.seq}): {reason}")


@ledger.command("show")
@click.argument("path", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--anchor", default=None, help="COUNT:HASH (or a summary.json holding ledger_head) to check against."
)
@click.option("--key-file", type=click.Path(dir_okay=False, path_type=Path), default=None, help=_KEY_HELP)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(("table", "json", "csv")),
    default="table",
    show_default=True,
    help="table: for people (never truncated when piped); json: events, verification and active scars; csv: the "
    "events, one row each.",
)
def show(path: Path, anchor: str | None, key_file: Path | None, fmt: str) -> None:
    """Print the events, the verification result and the active scars of the ledger at PATH (read-only). Exit 1
    when the ledger does not verify (its active scars are then not shown: fail closed)."""
    with _open(path, key_file, read_only=True, anchor=_anchor_option(anchor)) as led:
        try:
            rows = led.rows()
        except ScarsError as exc:
            _fail(str(exc), 1)
        report = led.verify()
        active: tuple[Scar, ...] = ()
        projection_error = ""
        if report.ok:
            try:
                active = led.active_scars()
            except LedgerError as exc:
                projection_error = str(exc)
    ok = report.ok and not projection_error
    if fmt == "json":
        click.echo(
            json.dumps(
                {
                    "path": str(path),
                    "events": [
                        {k: (_time(v) if k == "tx_time" and isinstance(v, int) else v) for k, v in r.items()}
                        for r in rows
                    ],
                    "verification": {
                        "ok": report.ok,
                        "reason": report.reason,
                        "first_bad_seq": report.first_bad_seq,
                        "anchor": report.anchor if report.ok else None,
                    },
                    "projection_error": projection_error or None,
                    "active_scars": [
                        {
                            "id": s.id,
                            "rule": s.control_text,
                            "scope": {k: v for k, v in s.scope.to_json().items() if v is not None},
                            "evidence_items": len(s.evidence),
                        }
                        for s in active
                    ],
                },
                indent=2,
                default=str,
            )
        )
        if not ok:
            raise SystemExit(1)
        return
    if fmt == "csv":
        import csv
        import sys

        columns = ("seq", "type", "subject", "tx_time", "valid_from", "valid_to", "hash")
        writer = csv.writer(sys.stdout)
        writer.writerow(columns)
        for r in rows:
            writer.writerow(
                [_time(r[c]) if c == "tx_time" and isinstance(r[c], int) else r.get(c) for c in columns]
            )
        sys.stdout.flush()
        if not ok:
            click.echo(f"error: {report.reason if not report.ok else projection_error}", err=True)
            raise SystemExit(1)
        return
    # a pipe or a file gets the full width: nothing is cut to 80 columns
    console = Console() if Console().is_terminal else Console(width=100_000)
    table = Table(title=f"ledger {escape(str(path))}")
    for column in ("seq", "type", "subject", "tx time (UTC)", "valid from", "valid to", "hash"):
        table.add_column(column, justify="right" if column == "seq" else "left")
    for row in rows:
        table.add_row(
            _cell(row["seq"]),
            _cell(row["type"]),
            _cell(row["subject"]),
            _time(row["tx_time"]) if isinstance(row["tx_time"], int) else _cell(row["tx_time"]),
            _cell(row["valid_from"]),
            _cell(row["valid_to"]),
            _cell(row["hash"], 12),
        )
    console.print(table)
    if not report.ok:
        console.print(
            f"[red]verification failed at event {report.first_bad_seq}: {escape(report.reason)}[/red] — "
            "active scars are not shown (fail closed)"
        )
        raise SystemExit(1)
    console.print(f"[green]{escape(report.reason)}[/green], head {report.anchor}")
    if projection_error:
        console.print(f"[red]{escape(projection_error)}[/red]")
        raise SystemExit(1)
    scars = Table(title=f"active scars ({len(active)})")
    for column in ("id", "rule", "scope", "evidence items"):
        scars.add_column(column, overflow="fold")
    for s in active:
        scope = ", ".join(f"{k}={v}" for k, v in s.scope.to_json().items() if v is not None)
        scars.add_row(s.id, escape(s.control_text), escape(scope), str(len(s.evidence)))
    console.print(scars)


@ledger.command("verify")
@click.argument("path", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--anchor",
    default=None,
    help="COUNT:HASH recorded earlier (a run's summary.json ledger_head, or that summary.json itself): the "
    "ledger must still extend it. Detects a rewrite or roll-back of every file, which nothing else can.",
)
@click.option("--key-file", type=click.Path(dir_okay=False, path_type=Path), default=None, help=_KEY_HELP)
def verify(path: Path, anchor: str | None, key_file: Path | None) -> None:
    """Verify the ledger at PATH read-only: the hash chain, the head row and head file, the MACs (with the key)
    and the anchor. Exit 0 when intact (prints the head as COUNT:HASH), 1 and the first bad event if not."""
    with _open(path, key_file, read_only=True, anchor=_anchor_option(anchor)) as led:
        report = led.verify()
        bad = None
        if not report.ok and report.first_bad_seq is not None:
            bad = next((r for r in led.rows() if r["seq"] == report.first_bad_seq), None)
    if report.ok:
        click.echo(f"ok: {report.reason}, head {report.anchor}")
        return
    detail = ""
    if bad is not None:
        detail = f" ({_cell(bad['type'], 24)} {_cell(bad['subject'], 24)}, hash {_cell(bad['hash'], 12)})"
    if report.first_bad_seq is None:  # the database itself is gone, replaced or unreadable: no event to name
        _fail(report.reason, 1)
    _fail(f"first bad event {report.first_bad_seq}{detail}: {report.reason}", 1)
