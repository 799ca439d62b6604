"""A sweep's specification: a tier, a grid (config field → values) and fixed fields, from a TOML file or the
``scars sweep`` flags, type-checked before anything starts; its expansion into trials (``experiments.sweep`` runs
them on Ray Tune; ``experiments.sweep_tables`` aggregates them)."""

from __future__ import annotations

import itertools
import math
import re
import tomllib
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from scars.experiments.tiers import get_tier
from scars.synthesis.errors import ConfigError

LABEL_FIELDS: tuple[str, ...] = ("method", "ablation", "seed")
"""Fields the tier's label already shows (or, for the seed, that runs are aggregated over)."""


class SweepError(ConfigError):
    """A sweep cannot go on as asked (bad spec, or an output folder that holds another sweep)."""


@dataclass(frozen=True)
class SweepSpec:
    """A grid of runs of one tier, and how Tune runs them."""

    tier: str = "tier1"
    grid: Mapping[str, tuple] = field(default_factory=dict)
    """Config field → the values to sweep (cross product, in the order given)."""
    fixed: Mapping[str, Any] = field(default_factory=dict)
    """Config field → one value for every run."""
    name: str = "sweep"
    """Sweep name: the W&B group of its runs, the Tune experiment's name and the title of aggregate.md."""
    max_failures: int = 0
    """Tune's FailureConfig: how often a failed trial is retried (a run is deterministic: 0 by default)."""
    max_concurrent: int = 0
    """Trials running at once (0: as many as the cluster's CPUs allow)."""
    cpus_per_trial: float = 1.0
    gpus_per_trial: float | None = None
    """GPUs per trial; None: one per trial of an HF backend when the cluster has GPUs, else 0."""
    address: str = ""
    """Ray cluster address (``ray start --head`` prints it); empty: a local Ray instance."""
    connect_timeout_s: float = 30.0
    """How long joining the cluster at ``address`` may take before the sweep gives up with one error line."""
    wandb: bool = False
    wandb_project: str = "scars-testbed"
    wandb_entity: str = ""
    bootstrap_samples: int = 2000
    bootstrap_seed: int = 0
    search_alg: str = "grid"
    """How Tune picks the trials: "grid" every grid point once (the default; Tune's ``BasicVariantGenerator`` with
    the points as ``points_to_evaluate``), "basic" ``num_samples`` random draws from the grid's values (Tune's
    ``BasicVariantGenerator``), "optuna" ``num_samples`` trials proposed by Optuna's TPE sampler (``OptunaSearch``,
    extra ``optuna``) to optimise ``metric``."""
    scheduler: str = "none"
    """Tune's trial scheduler: "none" (FIFO) or "asha" (``ASHAScheduler`` on ``metric``, reported after every
    episode: stops the trials that trail early; a stopped run's row has status ``stopped``)."""
    num_samples: int = 8
    """Trials drawn by the "basic" and "optuna" search algorithms (the grid runs every point once)."""
    metric: str = "success_rate"
    """The reported metric Optuna and ASHA optimise (every report of a tier-1 trial carries it)."""
    mode: str = "max"
    """"max" or "min": the direction of ``metric``."""
    search_seed: int = 0
    """The seed of the random and Optuna search (the same seed draws the same trials)."""

    def __post_init__(self) -> None:
        _check_spec_types(self)
        grid = {k: tuple(v) if isinstance(v, list | tuple) else (v,) for k, v in dict(self.grid).items()}
        object.__setattr__(self, "grid", grid)
        object.__setattr__(self, "fixed", dict(self.fixed))
        tier = get_tier(self.tier)
        from scars.experiments.provenance import check_fields

        check_fields(grid, tier.config, "sweep grid")
        check_fields(self.fixed, tier.config, "sweep fixed fields")
        for key, values in grid.items():
            if not values:
                raise SweepError(f"grid field {key!r} has no values")
            if len(set(map(repr, values))) != len(values):
                raise SweepError(f"grid field {key!r} lists a value twice: {list(values)!r}")
        both = set(grid) & set(self.fixed)
        if both:
            raise SweepError(f"field(s) {sorted(both)} are both swept and fixed")
        if not self.name or not re.fullmatch(r"[A-Za-z0-9_.\-]+", self.name):
            raise SweepError(f"name = {self.name!r} must be non-empty letters, digits, '_', '.' or '-'")
        if self.max_failures < 0 or self.max_concurrent < 0:
            raise SweepError("max_failures and max_concurrent must be >= 0")
        if self.cpus_per_trial <= 0 or (self.gpus_per_trial is not None and self.gpus_per_trial < 0):
            raise SweepError("cpus_per_trial must be > 0 and gpus_per_trial >= 0")
        if self.bootstrap_samples < 100:
            raise SweepError(f"bootstrap_samples = {self.bootstrap_samples!r} must be >= 100")
        if self.bootstrap_seed < 0:
            raise SweepError(f"bootstrap_seed = {self.bootstrap_seed!r} must be >= 0")
        for name, allowed in SEARCH_CHOICES.items():
            if getattr(self, name) not in allowed:
                raise SweepError(f"{name} = {getattr(self, name)!r} is not one of {allowed}")
        if self.num_samples < 1:
            raise SweepError(f"num_samples = {self.num_samples!r} must be >= 1")
        if not expand(self):
            raise SweepError("the grid has no run left (every point is skipped by the tier)")

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["grid"] = {k: list(v) for k, v in self.grid.items()}
        return data

    @property
    def identity(self) -> dict[str, Any]:
        """What makes two sweeps the same sweep (a resume must ask for the same runs)."""
        identity = {
            "tier": self.tier,
            "grid": self.to_dict()["grid"],
            "fixed": dict(self.fixed),
            "name": self.name,
        }
        if self.search_alg != "grid" or self.scheduler != "none":  # a grid sweep's identity is what it was
            identity |= {k: getattr(self, k) for k in ("search_alg", "scheduler", "metric", "mode")}
            if self.search_alg != "grid":
                identity |= {"num_samples": self.num_samples, "search_seed": self.search_seed}
        return identity


SEARCH_CHOICES: dict[str, tuple[str, ...]] = {
    "search_alg": ("grid", "basic", "optuna"),
    "scheduler": ("none", "asha"),
    "mode": ("max", "min"),
}


_SPEC_TYPES: dict[str, tuple[tuple[type, ...], str]] = {
    "tier": ((str,), "a string"),
    "name": ((str,), "a string"),
    "max_failures": ((int,), "an integer"),
    "max_concurrent": ((int,), "an integer"),
    "cpus_per_trial": ((int, float), "a number"),
    "gpus_per_trial": ((int, float, type(None)), "a number"),
    "address": ((str,), "a string (HOST:PORT)"),
    "connect_timeout_s": ((int, float), "a number of seconds"),
    "wandb": ((bool,), "true or false"),
    "wandb_project": ((str,), "a string"),
    "wandb_entity": ((str,), "a string"),
    "bootstrap_samples": ((int,), "an integer"),
    "bootstrap_seed": ((int,), "an integer"),
    "search_alg": ((str,), "a string"),
    "scheduler": ((str,), "a string"),
    "num_samples": ((int,), "an integer"),
    "metric": ((str,), "a string"),
    "mode": ((str,), "a string"),
    "search_seed": ((int,), "an integer"),
}


def _check_spec_types(spec: SweepSpec) -> None:
    """Every field of the spec itself has its declared type, before anything starts: one error naming the field,
    the value and the type (a TOML file or a caller may hand anything). Config fields in ``grid``/``fixed`` are
    the tier config's to check (``expand`` builds every point's config before Ray starts)."""
    for name, (types, what) in _SPEC_TYPES.items():
        value = getattr(spec, name)
        if (isinstance(value, bool) and bool not in types) or not isinstance(value, types):
            raise SweepError(
                f"sweep spec field {name} = {value!r:.80} is {type(value).__name__}; it must be {what}"
            )
    for name in ("grid", "fixed"):
        value = getattr(spec, name)
        if not isinstance(value, Mapping):
            raise SweepError(
                f"sweep spec field {name} = {value!r:.80} is {type(value).__name__}; it must be a table of config "
                f"fields ([{name}] in a TOML file)"
            )
        for key in value:
            if not isinstance(key, str):
                raise SweepError(
                    f"sweep spec {name} key {key!r:.80} is {type(key).__name__}; it must be a field name"
                )
    if not math.isfinite(float(spec.connect_timeout_s)) or spec.connect_timeout_s <= 0:
        raise SweepError(
            f"sweep spec field connect_timeout_s = {spec.connect_timeout_s!r} must be > 0 seconds"
        )


@dataclass(frozen=True)
class Trial:
    """One grid point: the run's config, its name (its folder) and its label (its group in the tables)."""

    fields: Mapping[str, Any]
    config: Any
    run_name: str
    label: str


def _slug(value: Any) -> str:
    return re.sub(r"[^A-Za-z0-9_.=\-]+", "_", str(value))


def expand(spec: SweepSpec) -> tuple[Trial, ...]:
    """One trial per grid point the tier runs, ordered as the grid lists its values (the tables' order). A point
    whose config the tier refuses is an error naming the point."""
    tier = get_tier(spec.tier)
    keys = list(spec.grid)
    trials: list[Trial] = []
    seen: set[str] = set()
    for values in itertools.product(*(spec.grid[k] for k in keys)):
        fields = {**spec.fixed, **dict(zip(keys, values, strict=True))}
        if tier.skip(fields):
            continue
        try:
            trial = trial_of(spec, fields)
        except (ConfigError, TypeError, ValueError, OverflowError) as exc:  # a wrong type: before Ray starts
            raise SweepError(f"grid point {dict(zip(keys, values, strict=True))}: {exc}") from None
        if trial.run_name in seen:
            continue
        seen.add(trial.run_name)
        trials.append(trial)
    return tuple(trials)


def trial_of(spec: SweepSpec, fields: Mapping[str, Any]) -> Trial:
    """The trial of one point (config field → value): its config, label (the tier's label plus every varied field
    the label does not show) and run name. A point the tier's config refuses raises its error."""
    tier = get_tier(spec.tier)
    fields = {k: fields[k] for k in tier.fields if k in fields}
    cfg = tier.config(**fields)
    varied = [k for k in spec.grid if k not in LABEL_FIELDS and len(spec.grid[k]) > 1]
    extra = " ".join(f"{k}={fields[k]}" for k in varied if k in fields)
    label = tier.label(cfg) + (f" {extra}" if extra else "")
    seed = fields.get(tier.seed_field, getattr(cfg, tier.seed_field, 0))
    run_name = _slug(f"{tier.name}-{label.replace(':', '-').replace(' ', '-')}-s{seed}")
    return Trial(fields, cfg, run_name, label)


def load_spec(path: Path, **overrides: Any) -> SweepSpec:
    """A spec from a TOML file::

        tier = "tier1"
        name = "ablations"
        [grid]
        method = ["scars", "rag"]
        ablation = ["none", "no_mdl"]
        seed = [0, 1, 2]
        [fixed]
        episodes = 12
        [tune]            # optional: max_failures, max_concurrent, cpus_per_trial, gpus_per_trial, address,
        max_failures = 1  # search_alg, scheduler, num_samples, metric, mode, search_seed

    ``overrides`` (from flags) replace top-level keys."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise SweepError(f"sweep spec {str(path)!r} is not a readable TOML file ({exc})") from None
    allowed_top = {"tier", "name", "grid", "fixed", "tune", "wandb", "bootstrap"}
    unknown = set(data) - allowed_top
    if unknown:
        raise SweepError(
            f"sweep spec {str(path)!r}: unknown key(s) {sorted(unknown)}; allowed: {sorted(allowed_top)}"
        )
    kwargs: dict[str, Any] = {k: data[k] for k in ("tier", "name", "grid", "fixed") if k in data}
    for section, prefix in (("tune", ""), ("wandb", "wandb_"), ("bootstrap", "bootstrap_")):
        table = data.get(section, {})
        if not isinstance(table, dict):
            raise SweepError(
                f"sweep spec {str(path)!r}: {section} = {table!r:.80} is {type(table).__name__}; it must be a "
                f"table ([{section}])"
            )
        for key, value in table.items():
            name = key if section == "tune" or key == "enabled" else f"{prefix}{key}"
            name = "wandb" if (section, key) == ("wandb", "enabled") else name
            if name not in SweepSpec.__dataclass_fields__ or name in ("tier", "name", "grid", "fixed"):
                raise SweepError(f"sweep spec {str(path)!r}: unknown key {key!r} in [{section}]")
            kwargs[name] = value
    kwargs.update({k: v for k, v in overrides.items() if v is not None})
    return SweepSpec(**kwargs)


def parse_values(tier_name: str, text: str, *, many: bool) -> tuple[str, tuple]:
    """``FIELD=V1,V2`` (``many``) or ``FIELD=VALUE``: the field must be one of the tier's config fields; values
    take the field's type (int fields accept inclusive ranges: ``seed=0-4``; bools: true/false)."""
    tier = get_tier(tier_name)
    name, sep, raw = text.partition("=")
    name = name.strip().replace("-", "_")
    if not sep or not name:
        raise SweepError(f"{text!r} is not FIELD=VALUE{'[,VALUE…]' if many else ''}")
    from scars.experiments.provenance import check_fields

    check_fields({name: None}, tier.config, f"tier {tier.name}")
    default = tier.config.__dataclass_fields__[name].default
    if isinstance(default, tuple):  # a tuple field (tier 3's seeds): one value, integers and ranges
        if many:
            raise SweepError(f"{name} is a list field: give it once with --set {name}=0-4 (or 0,1,2)")
        items: list[int] = []
        for part in (p.strip() for p in raw.split(",") if p.strip()):
            match = re.fullmatch(r"(\d+)(?:\s*-\s*(\d+))?", part)
            if not match:
                raise SweepError(f"{name}={raw!r} is not a list of integers or ranges like 0-4")
            items.extend(range(int(match.group(1)), int(match.group(2) or match.group(1)) + 1))
        return name, (tuple(items),)
    parts = [p.strip() for p in raw.split(",")] if many else [raw.strip()]
    values: list[Any] = []
    for part in parts:
        if isinstance(default, bool):
            if part.lower() not in ("true", "false", "1", "0", "yes", "no"):
                raise SweepError(f"{name}={part!r} is not a boolean (true or false)")
            values.append(part.lower() in ("true", "1", "yes"))
        elif isinstance(default, int):
            match = re.fullmatch(r"(\d+)(?:\s*-\s*(\d+))?", part)
            if not match:
                raise SweepError(f"{name}={part!r} is not an integer or an inclusive range like 0-4")
            lo, hi = int(match.group(1)), int(match.group(2) or match.group(1))
            if hi < lo or hi - lo >= 10_000:
                raise SweepError(f"{name}={part!r}: a range must run upwards and hold at most 10,000 values")
            values.extend(range(lo, hi + 1) if many else [lo])
        elif isinstance(default, float):
            try:
                number = float(part)
            except ValueError:
                raise SweepError(f"{name}={part!r} is not a number") from None
            if number != number or number in (float("inf"), float("-inf")):
                raise SweepError(f"{name}={part!r} is not a finite number")
            values.append(number)
        else:
            values.append(part)
    return name, tuple(values)
