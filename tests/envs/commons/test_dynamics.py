"""GovSim's fishery dynamics: regrowth, sustainable catch, stochastic and proportional allocation, collapse."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from scars.envs.commons.dynamics import (
    DynamicsConfig,
    allocate,
    harvest_month,
    regrow,
    sustainable_catch,
    sustainable_share,
)

GOVSIM = DynamicsConfig()


def test_govsim_defaults():
    assert (GOVSIM.capacity, GOVSIM.start_stock, GOVSIM.collapse_threshold) == (100, 100, 5)
    assert (GOVSIM.num_agents, GOVSIM.num_months, GOVSIM.allocation) == (5, 12, "stochastic")


def test_regrow_doubles_and_caps_at_capacity():
    assert [regrow(x, GOVSIM) for x in (0, 13, 50, 51, 100)] == [0, 26, 100, 100, 100]


@pytest.mark.parametrize(
    ("stock", "f"),
    [
        (100, 50),  # g(50) = 100 ≥ 100, g(49) = 98 < 100
        (60, 30),
        (25, 12),  # keep ⌈25/2⌉ = 13: g(13) = 26 ≥ 25, while keeping 12 gives 24 < 25
        (1, 0),
        (0, 0),
    ],
)
def test_sustainable_catch_is_the_largest_catch_that_regrows_the_stock(stock, f):
    assert sustainable_catch(stock, GOVSIM) == f


def test_sustainable_share_is_ten_per_agent_at_full_stock():
    assert sustainable_share(100, GOVSIM) == 10.0


@given(stock=st.integers(0, 100), growth=st.floats(1.0, 4.0), capacity_extra=st.integers(0, 50))
def test_sustainable_catch_matches_its_definition_by_brute_force(stock, growth, capacity_extra):
    cfg = DynamicsConfig(capacity=100 + capacity_extra, growth_factor=growth)
    brute = max(x for x in range(stock + 1) if regrow(stock - x, cfg) >= stock)
    assert sustainable_catch(stock, cfg) == brute


def test_requests_that_fit_are_granted_without_touching_the_rng():
    rng = np.random.default_rng(0)
    before = rng.bit_generator.state
    assert allocate([10, 0, 30], 100, "stochastic", rng) == (10, 0, 30)
    assert rng.bit_generator.state == before


@given(
    requests=st.lists(st.integers(0, 60), min_size=1, max_size=6),
    stock=st.integers(0, 100),
    seed=st.integers(0, 2**16),
    method=st.sampled_from(["stochastic", "proportional"]),
)
def test_allocation_never_exceeds_a_request_and_empties_an_oversubscribed_pool(requests, stock, seed, method):
    got = allocate(requests, stock, method, np.random.default_rng(seed))
    assert all(0 <= g <= r for g, r in zip(got, requests, strict=True))
    assert sum(got) == min(stock, sum(requests))


def test_stochastic_allocation_is_unit_by_unit_to_a_random_agent_still_wanting():
    # Three agents each want 100 of a pool of 30: every unit is a fair coin among them, so the shares are
    # multinomial(30, 1/3) — mean 10 each — and every agent gets at least one unit in practice.
    rng = np.random.default_rng(1)
    shares = np.array([allocate([100, 100, 100], 30, "stochastic", rng) for _ in range(2000)])
    assert np.allclose(shares.mean(axis=0), 10, atol=0.3)
    # An agent that wants 2 gets exactly 2 once the others still want more than what is left.
    assert all(allocate([2, 100], 50, "stochastic", np.random.default_rng(s))[0] == 2 for s in range(50))


def test_proportional_allocation_follows_govsim():
    rng = np.random.default_rng(0)
    assert allocate([30, 30, 60], 100, "proportional", rng) == (25, 25, 50)  # exact shares, no leftover
    got = allocate([50, 50, 50], 100, "proportional", np.random.default_rng(3))
    assert sorted(got) == [33, 33, 34]  # floor(100/3) each, the leftover unit to one rounded-down agent


def test_harvest_month_collapses_when_less_than_c_is_left():
    out = harvest_month(100, [20, 20, 20, 20, 16], GOVSIM, np.random.default_rng(0))
    assert (out.stock_after, out.collapsed, out.next_stock, out.sustainable_catch) == (4, True, 8, 50)
    out = harvest_month(100, [19, 19, 19, 19, 19], GOVSIM, np.random.default_rng(0))
    assert (out.stock_after, out.collapsed, out.next_stock) == (5, False, 10)  # exactly C is not a collapse


def test_same_seed_same_allocation():
    a = allocate([40, 40, 40, 40, 40], 100, "stochastic", np.random.default_rng(5))
    b = allocate([40, 40, 40, 40, 40], 100, "stochastic", np.random.default_rng(5))
    assert a == b
