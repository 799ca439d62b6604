"""The registry of experiment tiers: what a sweep, ``scars paper`` and ``scars report`` need to know of a tier.

A tier is a frozen config dataclass and a function that runs one config into its own folder and returns the run's
summary (a JSON-able dict with the tier's metrics). ``scars sweep --tier NAME`` may vary any field of the tier's
config; ``scars paper`` runs every registered tier's protocol. A tier registers itself with :func:`register_tier`
(tier 1 below; other tiers in their own modules, listed in ``TIER_MODULES`` so they load on first use)::

    register_tier(Tier(name="tier2", config=Tier2Config, run=run_tier2_folder, label=…, tags=…, protocol=…))
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from scars.synthesis.errors import ConfigError


class RunFolder(Protocol):
    """Run one config into ``out`` and return its summary. The folder gets ``config.json`` (``asdict(config)``),
    ``provenance.json`` and the run's tables, and ``summary.json`` last: a sweep takes a folder with both JSON files
    and the same config for a finished run (``experiments.sweep``: no finished run is run twice)."""

    def __call__(
        self,
        config: Any,
        out: Path,
        *,
        tracking: Any = None,
        progress: Callable[[int, int], None] | None = None,
    ) -> dict[str, Any]: ...


class ReportingRunFolder(Protocol):
    """A :class:`RunFolder` that also reports the run's metrics so far after every progress unit (``report``: a
    flat mapping of names to numbers), so a Tune scheduler (ASHA) can stop it early."""

    def __call__(
        self,
        config: Any,
        out: Path,
        *,
        tracking: Any = None,
        progress: Callable[[int, int], None] | None = None,
        report: Callable[[Mapping[str, float]], None] | None = None,
    ) -> dict[str, Any]: ...


@dataclass(frozen=True)
class Tier:
    name: str
    config: type
    """A frozen dataclass; its ``__post_init__`` validates a run's fields."""
    run: RunFolder
    label: Callable[[Any], str]
    """The method's name in tables (``scars``, ``scars:no_mdl``, ``rag``)."""
    tags: Callable[[Any], tuple[str, ...]]
    """W&B tags of a run (ablation, seed, backend)."""
    protocol: Callable[[str], tuple[dict[str, tuple], dict[str, Any]]]
    """The paper's protocol at a scale ("smoke" or "full"): (grid: field → values, fixed fields)."""
    skip: Callable[[Mapping[str, Any]], bool] = lambda fields: False
    """Grid points the tier does not run (e.g. a scars ablation crossed with a baseline method)."""
    seed_field: str = "seed"
    progress_total: Callable[[Any], int] = lambda cfg: 1
    """The length of a run in progress units (episodes, months)."""
    reporting_run: ReportingRunFolder | None = None
    """``run`` that also reports metrics after every progress unit (tier 1: every episode), or None: the tier's
    runs report at the end only (a sweep then cannot use an early-stopping scheduler on it)."""

    @property
    def fields(self) -> tuple[str, ...]:
        return tuple(f.name for f in dataclasses.fields(self.config))

    def make(self, fields: Mapping[str, Any]) -> Any:
        """A validated config from field values (unknown fields: one error listing the allowed ones)."""
        from scars.experiments.provenance import check_fields

        check_fields(fields, self.config, f"tier {self.name}")
        return self.config(**fields)


TIERS: dict[str, Tier] = {}
TIER_MODULES: tuple[str, ...] = ("scars.experiments.tier2", "scars.experiments.tier3")
"""Modules that register further tiers when imported (tiers 2 and 3 add theirs here)."""


def register_tier(tier: Tier) -> Tier:
    TIERS[tier.name] = tier
    return tier


def get_tier(name: str) -> Tier:
    load_tiers()
    if name not in TIERS:
        raise ConfigError(f"tier {name!r} is not one of {tuple(TIERS)}")
    return TIERS[name]


def load_tiers() -> dict[str, Tier]:
    for module in TIER_MODULES:
        importlib.import_module(module)
    return TIERS


# ---- tier 1: the household world with dynamic safety rules -------------------------------------------------------


def _run_tier1(config, out: Path, *, tracking=None, progress=None, report=None) -> dict[str, Any]:
    from scars.experiments.runner import run_tier1_folder

    result, _ = run_tier1_folder(config, out, tracking=tracking, progress=progress, report=report)
    return result.summary


def _tier1_label(config) -> str:
    from scars.experiments.tier1 import method_label

    return method_label(config)


def _tier1_tags(config) -> tuple[str, ...]:
    from scars.experiments.runner import tier1_tags

    return tier1_tags(config)


def _tier1_protocol(scale: str) -> tuple[dict[str, tuple], dict[str, Any]]:
    """The paper's tier-1 protocol: every method of the comparison, the six ablations of §6.4 and the two controls
    (``hard_blocklist``, ``storm_only``; scars only) × seeds. smoke: 2 seeds × 4 episodes and a small search
    budget (a few minutes on two cores); full: 5 seeds × 36 episodes at the default budget."""
    from scars.experiments.config import ABLATIONS, METHODS

    if scale == "smoke":
        return (
            {"method": METHODS, "ablation": ABLATIONS, "seed": (0, 1)},
            {"episodes": 4, "search_iterations": 60},
        )
    if scale == "full":
        return ({"method": METHODS, "ablation": ABLATIONS, "seed": (0, 1, 2, 3, 4)}, {"episodes": 36})
    raise ConfigError(f"scale {scale!r} is not one of ('smoke', 'full')")


def ablation_on_a_baseline(fields: Mapping[str, Any]) -> bool:
    """Ablations apply to scars only: a baseline crossed with an ablation is not run (it runs with 'none'); a memory
    guard guards a text baseline's memory only: scars crossed with one is not run either (docs/poisoning.md)."""
    scars = fields.get("method", "scars") == "scars"
    return (not scars and fields.get("ablation", "none") != "none") or (
        scars and fields.get("memory_guard", "none") != "none"
    )


def _register_tier1() -> None:
    from scars.experiments.config import Tier1Config

    register_tier(
        Tier(
            name="tier1",
            config=Tier1Config,
            run=_run_tier1,
            label=_tier1_label,
            tags=_tier1_tags,
            protocol=_tier1_protocol,
            skip=ablation_on_a_baseline,
            progress_total=lambda cfg: cfg.episodes,
            reporting_run=_run_tier1,
        )
    )


_register_tier1()

__all__ = [
    "TIERS",
    "TIER_MODULES",
    "ReportingRunFolder",
    "RunFolder",
    "Tier",
    "ablation_on_a_baseline",
    "get_tier",
    "load_tiers",
    "register_tier",
]
