"""The commons' learning seats and what they carry between runs (paper §6.2; SPEC §7 tier 2): which seat holds a
learner or a scripted kind, the state each learning seat carries out of a run (its ledger or its memory), and the
carried state a transfer reads — verified before anything is written (fail closed)."""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scars.agents.memory.base import MEMORY_FILE
from scars.agents.runtime.ledger import Ledger, ledger_files
from scars.envs.commons.populations import Population
from scars.envs.commons.rollout import build_population
from scars.experiments.config import Tier2Config
from scars.synthesis.errors import ConfigError, LedgerError

LEARNER = "learner"
"""The kind of a seat that holds the run's learning method (the others hold scripted kinds)."""
STATE_FILE = "tier2_state.json"
"""The carried-state manifest a run writes into its folder (what ``transfer_from`` reads)."""


@dataclass(frozen=True)
class SeatState:
    """What one learning seat carries out of a run, and into a transfer (``Tier2Config.transfer_from``).

    seat:        the seat's name (``agent_0`` … ``agent_4``).
    method:      the method label (``scars``, ``scars:no_mdl``, ``rag`` …).
    ledger_path: the scars agent's audit ledger (its self-schema: every scar, failure and decision), or None.
    ledger_head: the ledger's head anchor ``COUNT:HASH`` at the end of the run (re-verify against it), or None.
    memory_path: a baseline's memory (``MemoryMechanism.memory_state`` as JSON), or None.
    memory:      that memory state itself (empty for scars).
    t_end:       the seat's decision count at the end of the run (a transfer continues from it, so temporary masks
                 and scopes keep their meaning).
    fresh:       the seat is a fresh outsider (GovSim's newcomer, new in every run): its state is its last run's and
                 a transfer does not carry it.
    """

    seat: str
    method: str
    ledger_path: str | None
    ledger_head: str | None
    memory_path: str | None
    memory: Mapping[str, Any]
    t_end: int
    fresh: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "seat": self.seat,
            "method": self.method,
            "ledger_path": self.ledger_path,
            "ledger_head": self.ledger_head,
            "memory_path": self.memory_path,
            "t_end": self.t_end,
            "fresh": self.fresh,
        }


def population(cfg: Tier2Config) -> Population:
    """The scripted population behind the seats: ``cfg.population``, else the arena's default — whose last seat, in
    the outsider variant, is the outsider, scripted as ``greedy``."""
    spec = cfg.population
    if not spec and cfg.outsider_month:
        kinds = build_population(cfg.arena, None, target=cfg.focal_seat).kinds
        spec = ",".join((*kinds[:-1], "greedy"))
    return build_population(cfg.arena, spec or None, target=cfg.focal_seat)


def seat_kinds(cfg: Tier2Config) -> tuple[tuple[str, ...], tuple[str, ...], int | None]:
    """(kind per seat — ``LEARNER`` or a scripted kind —, provenance root per seat, the coalition's target)."""
    pop = population(cfg)
    if cfg.setup == "homogeneous":
        kinds = (LEARNER,) * len(pop.kinds)
        return kinds, tuple(f"agent_{i}" for i in range(len(kinds))), None
    kinds = list(pop.kinds)
    if kinds[cfg.focal_seat] == "malicious":
        raise ConfigError(
            f"focal_seat = {cfg.focal_seat} holds a malicious seat in population {pop.spec!r}; the learner must "
            "take an honest seat"
        )
    kinds[cfg.focal_seat] = LEARNER
    roots = list(pop.roots)
    roots[cfg.focal_seat] = f"agent_{cfg.focal_seat}"
    return tuple(kinds), tuple(roots), pop.target


def fresh_outsider(cfg: Tier2Config, kinds) -> str | None:
    """The seat that arrives new in every run: the outsider (the last seat, ``commons_v0``'s convention), when the
    variant is on, the seat holds a learner and ``cfg.outsider_fresh``."""
    last = len(kinds) - 1
    if not cfg.outsider_month or not cfg.outsider_fresh or kinds[last] != LEARNER:
        return None
    return f"agent_{last}"


def load_carried(cfg: Tier2Config) -> dict[str, SeatState]:
    """The carried state ``cfg.transfer_from`` names, checked before anything is written (fail closed): the
    manifest must exist and name this method for every learning seat; a scars seat's ledger must exist and
    verify (against the head recorded at the end of its run); a baseline's memory file must parse."""
    if not cfg.transfer_from:
        return {}
    root = Path(cfg.transfer_from)
    manifest = root / STATE_FILE
    if not manifest.is_file():
        raise ConfigError(
            f"transfer_from = {str(root)!r} holds no {STATE_FILE} (not a `scars run tier2` folder)"
        )
    try:
        data = json.loads(manifest.read_text(encoding="utf-8"))
        states = {s["seat"]: s for s in data["seats"]}
    except (ValueError, KeyError, TypeError) as exc:
        raise ConfigError(f"{manifest}: not a tier-2 state manifest ({exc})") from None
    kinds, _, _ = seat_kinds(cfg)
    fresh = fresh_outsider(cfg, kinds)
    carried: dict[str, SeatState] = {}
    for i, kind in enumerate(kinds):
        seat = f"agent_{i}"
        if kind != LEARNER or seat == fresh:
            continue  # a scripted seat carries nothing; a fresh outsider arrives new here too
        state = states.get(seat)
        if state is not None and state.get("fresh"):
            raise ConfigError(
                f"transfer_from = {str(root)!r}: seat {seat} was a fresh outsider there (new every run) and carries "
                "no state; keep it fresh here too (outsider_fresh)"
            )
        if state is None or state.get("method") != cfg.method_label:
            found = None if state is None else state.get("method")
            raise ConfigError(
                f"transfer_from = {str(root)!r} carries no {cfg.method_label!r} state for seat {seat} (found {found!r})"
            )
        ledger = memory_path = None
        memory: dict[str, Any] = {}
        if state.get("ledger_path"):
            ledger = root / seat / "ledger.sqlite"
            if not ledger.is_file():
                raise ConfigError(f"transfer_from: seat {seat}'s ledger {str(ledger)!r} is missing")
            try:
                with Ledger(ledger, read_only=True) as audit:
                    report = audit.verify(anchor=state.get("ledger_head"))
            except (LedgerError, ConfigError) as exc:
                raise ConfigError(
                    f"transfer_from: seat {seat}'s ledger {str(ledger)!r} is unusable: {exc}"
                ) from None
            if not report.ok:
                raise ConfigError(
                    f"transfer_from: seat {seat}'s ledger {str(ledger)!r} fails verification: {report.reason}"
                )
        if state.get("memory_path"):
            memory_path = root / seat / MEMORY_FILE
            try:
                memory = json.loads(memory_path.read_text(encoding="utf-8"))
            except (OSError, ValueError) as exc:
                raise ConfigError(
                    f"transfer_from: seat {seat}'s memory {str(memory_path)!r} is unusable: {exc}"
                ) from None
        carried[seat] = SeatState(
            seat,
            cfg.method_label,
            None if ledger is None else str(ledger),
            state.get("ledger_head"),
            None if memory_path is None else str(memory_path),
            memory,
            int(state.get("t_end", 0)),
        )
    return carried


def install_ledger(source: Path, seat_dir: Path) -> None:
    """Copy a carried ledger (with its head file and key) into the new run's seat folder: the source stays as it
    was — the new run extends its own copy."""
    seat_dir.mkdir(parents=True, exist_ok=True)
    for f in ledger_files(source):
        if f.exists():
            shutil.copy2(f, seat_dir / f.name.replace(source.name, "ledger.sqlite"))


def fresh_seat_dir(seat_dir: Path) -> None:
    """A seat starts from an empty folder: an earlier run's ledger or memory there is set aside, never reused."""
    if not seat_dir.exists():
        return
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(seat_dir.stat().st_mtime))
    target, n = seat_dir.with_name(f"{seat_dir.name}.{stamp}"), 1
    while target.exists():  # two runs into one folder within a second
        target, n = seat_dir.with_name(f"{seat_dir.name}.{stamp}.{n}"), n + 1
    seat_dir.rename(target)


def check_transfer(cfg: Tier2Config, out: Path) -> dict[str, SeatState]:
    """The carried state ``cfg.transfer_from`` names, verified before anything is written (fail closed)."""
    if cfg.transfer_from and Path(cfg.transfer_from).resolve() == Path(out).resolve():
        raise ConfigError(
            f"transfer_from = {cfg.transfer_from!r} is the output folder; carry the state into another folder"
        )
    return load_carried(cfg)
