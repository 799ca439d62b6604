"""GovSim's common-pool resource dynamics (Piatti et al. 2024; SPEC §7 tier 2, §9), as pure functions.

One month of the fishery, in integer resource units (GovSim counts whole tons):

1. every agent requests an amount at the same time (simultaneous requests);
2. if the requests fit in the stock h(t), each agent gets its request; otherwise the stock is allocated either
   *stochastically* — one unit at a time to a uniformly random agent that still wants more (GovSim's default) —
   or *proportionally* — floor(h·r_i/Σr) each, the few leftover units going one by one, without replacement, to
   agents that were rounded down, with probability proportional to what they still want (GovSim's option);
3. the resource collapses when the stock left after the harvest is below C (5 in GovSim);
4. the remaining stock regrows: g(x) = min(h(1), ⌊growth·x⌋) (GovSim: doubles, capped at the initial stock, 100).

The sustainable group catch is f(t) = the largest x with g(h(t) − x) ≥ h(t): 50 at full stock, 10 per agent.
Everything here is a pure function of its arguments and an explicitly passed ``np.random.Generator``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from scars.synthesis.errors import ConfigError

AllocationMethod = Literal["stochastic", "proportional"]
ALLOCATION_METHODS: tuple[str, ...] = ("stochastic", "proportional")


class CommonsConfigError(ConfigError):
    """A parameter of the commons arena is out of range or of the wrong kind."""


def _check_int(name: str, value: object, low: int, high: int | None = None) -> None:
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise CommonsConfigError(f"{name} must be an integer, got {value!r} ({type(value).__name__})")
    if value < low or (high is not None and value > high):
        allowed = f"[{low}, {high}]" if high is not None else f">= {low}"
        raise CommonsConfigError(f"{name}={value!r} is out of range; allowed: {allowed}")


def _check_number(name: str, value: object, low: float, high: float | None = None) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float | np.integer | np.floating):
        raise CommonsConfigError(f"{name} must be a number, got {value!r} ({type(value).__name__})")
    if not math.isfinite(float(value)) or value < low or (high is not None and value > high):
        allowed = f"[{low}, {high}]" if high is not None else f">= {low} and finite"
        raise CommonsConfigError(f"{name}={value!r} is out of range; allowed: {allowed}")


@dataclass(frozen=True)
class DynamicsConfig:
    """The resource's physics. Defaults are GovSim's fishery (SPEC §9)."""

    capacity: int = 100
    """Carrying capacity of the pool (GovSim: 100 tons); the stock never regrows above it."""
    initial_stock: int | None = None
    """Stock at the start of month 1; ``None`` means a full pool (= capacity), as in GovSim."""
    growth_factor: float = 2.0
    """g(x) = min(h(1), ⌊growth_factor·x⌋); GovSim doubles the remaining stock, capped at the initial stock."""
    collapse_threshold: int = 5
    """C: the resource collapses when the stock after harvest is below C (GovSim: 5)."""
    num_agents: int = 5
    """|I|, the number of harvesters (GovSim: 5)."""
    num_months: int = 12
    """T, the horizon in months (GovSim: 12)."""
    allocation: AllocationMethod = "stochastic"
    """How an over-subscribed stock is shared: ``stochastic`` (GovSim default) or ``proportional``."""
    max_request: int | None = None
    """Largest amount one agent may request in a month; ``None`` means the capacity."""

    def __post_init__(self) -> None:
        _check_int("capacity", self.capacity, 1, 1_000_000)
        if self.initial_stock is not None:
            _check_int("initial_stock", self.initial_stock, 0, self.capacity)
        _check_number("growth_factor", self.growth_factor, 1.0, 1_000.0)
        _check_int("collapse_threshold", self.collapse_threshold, 0, self.capacity)
        _check_int("num_agents", self.num_agents, 1, 64)
        _check_int("num_months", self.num_months, 1, 10_000)
        if self.allocation not in ALLOCATION_METHODS:
            raise CommonsConfigError(
                f"allocation={self.allocation!r} is unknown; allowed: {', '.join(ALLOCATION_METHODS)}"
            )
        if self.max_request is not None:
            _check_int("max_request", self.max_request, 0, self.capacity)

    @property
    def start_stock(self) -> int:
        return self.capacity if self.initial_stock is None else self.initial_stock

    @property
    def request_limit(self) -> int:
        return self.capacity if self.max_request is None else self.max_request


def regrow(stock: int, cfg: DynamicsConfig) -> int:
    """g(x) = min(h(1), ⌊growth·x⌋): what the remaining stock becomes by the next month. As in GovSim's code the cap
    is the initial stock h(1) (the capacity unless ``initial_stock`` says otherwise)."""
    return min(cfg.start_stock, math.floor(cfg.growth_factor * stock))


def sustainable_catch(stock: int, cfg: DynamicsConfig) -> int:
    """f(t) = max{x ∈ [0, h] : g(h − x) ≥ h} (GovSim §2; SPEC §9): 50 at a full pool of 100 that doubles.

    g(y) ≥ h ⇔ ⌊growth·y⌋ ≥ h (h never exceeds h(1)), so the smallest stock to keep is
    y* = ⌈h/growth⌉; the nudges below correct floating-point rounding of that quotient.
    """
    if stock <= 0:
        return 0
    if stock > cfg.start_stock:  # g never exceeds h(1): no catch keeps such a stock (a what-if question)
        return 0
    keep = math.ceil(stock / cfg.growth_factor)
    while keep > 0 and regrow(keep - 1, cfg) >= stock:
        keep -= 1
    while regrow(keep, cfg) < stock:
        keep += 1
    return stock - keep


def sustainable_share(stock: int, cfg: DynamicsConfig, group_size: int | None = None) -> float:
    """f(t)/|I(t)|: one agent's sustainable share at this stock (10.0 at a full GovSim pool of five).

    ``group_size``: the number of agents harvesting this month, |I(t)| (GovSim's outsider variant grows the group
    mid-run; a what-if question may ask about any group); ``None``: every seat, ``cfg.num_agents``."""
    n = cfg.num_agents if group_size is None else group_size
    if isinstance(n, bool) or not isinstance(n, int | np.integer) or n < 1:
        raise CommonsConfigError(f"group_size={group_size!r} is out of range; allowed: an integer >= 1")
    return sustainable_catch(stock, cfg) / n


def allocate(
    requests: Sequence[int], stock: int, method: AllocationMethod, rng: np.random.Generator
) -> tuple[int, ...]:
    """Share ``stock`` among simultaneous ``requests`` (GovSim's ``stochastic`` or ``proportional`` rule).

    The rng is drawn from only when the requests exceed the stock.
    """
    wants = [int(r) for r in requests]
    if any(r < 0 for r in wants):
        raise CommonsConfigError(f"requests must be non-negative integers, got {list(requests)!r}")
    total = sum(wants)
    if total <= stock:
        return tuple(wants)
    if method == "stochastic":
        return _allocate_stochastic(wants, stock, rng)
    if method == "proportional":
        return _allocate_proportional(wants, stock, rng)
    raise CommonsConfigError(f"allocation={method!r} is unknown; allowed: {', '.join(ALLOCATION_METHODS)}")


def _allocate_stochastic(wants: list[int], stock: int, rng: np.random.Generator) -> tuple[int, ...]:
    # GovSim hands out one unit at a time to a uniformly random agent still wanting more, until the pool is
    # empty. Only agents with positive remaining want are candidates, so the loop runs exactly `stock` times.
    got = [0] * len(wants)
    remaining = list(wants)
    wanting = [i for i, w in enumerate(remaining) if w > 0]
    draws = rng.random(stock)
    for u in draws:
        i = wanting[int(u * len(wanting))]
        got[i] += 1
        remaining[i] -= 1
        if remaining[i] == 0:
            wanting.remove(i)
    return tuple(got)


def _allocate_proportional(wants: list[int], stock: int, rng: np.random.Generator) -> tuple[int, ...]:
    total = sum(wants)
    got = [stock * w // total for w in wants]
    leftover = stock - sum(got)
    # GovSim's proportional rule: the leftover units go one at a time to an agent that was rounded down and still
    # wants more, drawn *with replacement* with probability proportional to what it still wants (the weights are
    # updated after every unit, so one agent may receive several). The fractional parts sum to `leftover`, each
    # below 1, so the rounded-down agents always want at least the leftover.
    rounded_down = [i for i, w in enumerate(wants) if (stock * w) % total != 0]
    for u in rng.random(leftover):
        still_want = np.array([wants[i] - got[i] for i in rounded_down], dtype=float)
        cumulative = np.cumsum(still_want / still_want.sum())
        k = min(int(np.searchsorted(cumulative, u, side="right")), len(rounded_down) - 1)
        got[rounded_down[k]] += 1
    return tuple(got)


@dataclass(frozen=True)
class HarvestOutcome:
    """What one month's harvest did to the pool."""

    stock_before: int
    """h(t), the stock when the month starts."""
    sustainable_catch: int
    """f(t) at that stock."""
    requests: tuple[int, ...]
    catches: tuple[int, ...]
    """r_i^t, what each agent actually got."""
    stock_after: int
    collapsed: bool
    """The stock after harvest fell below the collapse threshold C."""
    next_stock: int
    """g(stock_after): what the pool regrows to (the episode ends on collapse, as in GovSim)."""
    present: tuple[bool, ...]
    """Which seats were in the group this month (a seat not yet in it requested and caught nothing)."""

    @property
    def group_size(self) -> int:
        """|I(t)|, the number of agents in the group this month."""
        return sum(self.present)

    @property
    def sustainable_share(self) -> float:
        """f(t)/|I(t)|: the month's per-agent sustainable share."""
        return self.sustainable_catch / self.group_size


def harvest_month(
    stock: int,
    requests: Sequence[int],
    cfg: DynamicsConfig,
    rng: np.random.Generator,
    present: Sequence[bool] | None = None,
) -> HarvestOutcome:
    """Run one month's harvest and regrowth (GovSim's harvest phase and end-of-month doubling).

    ``requests`` holds one entry per seat; ``present`` says which seats are in the group this month (``None``:
    all). A seat not in the group must request 0."""
    limit = cfg.request_limit
    clipped = tuple(min(max(int(r), 0), limit) for r in requests)
    if len(clipped) != cfg.num_agents:
        raise CommonsConfigError(
            f"expected {cfg.num_agents} requests, got {len(clipped)}: {list(requests)!r}"
        )
    group = (True,) * cfg.num_agents if present is None else tuple(bool(p) for p in present)
    if len(group) != cfg.num_agents or not any(group):
        raise CommonsConfigError(
            f"present={present!r} must mark {cfg.num_agents} seats, at least one present"
        )
    absent_asking = [i for i, (p, r) in enumerate(zip(group, clipped, strict=True)) if not p and r > 0]
    if absent_asking:
        raise CommonsConfigError(
            f"seats {absent_asking} are not in the group this month but requested {clipped!r}"
        )
    catches = allocate(clipped, stock, cfg.allocation, rng)
    after = stock - sum(catches)
    collapsed = after < cfg.collapse_threshold
    return HarvestOutcome(
        stock_before=stock,
        sustainable_catch=sustainable_catch(stock, cfg),
        requests=clipped,
        catches=catches,
        stock_after=after,
        collapsed=collapsed,
        next_stock=regrow(after, cfg),
        present=group,
    )
