"""Play scripted populations in the commons arena (SPEC §7 tier 2): one seed in, one ``EpisodeRecord`` out.

Seeding: ``SeedSequence(seed)`` spawns one child per run; each run's child spawns the environment's seed and the
agents' generator. Same seed, same episodes.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from scars.envs.commons import commons_v0
from scars.envs.commons.commons_v0 import EpisodeRecord
from scars.envs.commons.dynamics import CommonsConfigError
from scars.envs.commons.populations import Population, parse_population
from scars.envs.commons.scenarios import get_arena


def build_population(arena: str, population: str | None, target: int | None = None) -> Population:
    """The arena's default population when ``population`` is None; malicious agents share the arena's root."""
    spec = get_arena(arena)
    return parse_population(
        population or spec.default_population,
        target=target,
        coalition_root=spec.coalition_root or "coalition_0",
    )


def run_episode(
    *,
    scenario: str = "fishery",
    arena: str = "A",
    population: str | Population | None = None,
    seed: int | np.random.SeedSequence = 0,
    **params: Any,
) -> EpisodeRecord:
    """One episode of a scripted population; ``params`` go to ``commons_v0.parallel_env`` (months, capacity, …)."""
    pop = population if isinstance(population, Population) else build_population(arena, population)
    if params.setdefault("num_agents", pop.size) != pop.size:
        raise CommonsConfigError(
            f"num_agents={params['num_agents']!r} does not match population {pop.spec!r} of {pop.size} agents"
        )
    params.setdefault("agent_roots", pop.roots)
    ss = seed if isinstance(seed, np.random.SeedSequence) else np.random.SeedSequence(seed)
    env_ss, agent_ss = ss.spawn(2)
    env = commons_v0.parallel_env(scenario=scenario, arena=arena, **params)
    rng = np.random.default_rng(agent_ss)
    observations, infos = env.reset(seed=int(env_ss.generate_state(1)[0]))
    states = {a: b.initial_state() for a, b in zip(env.possible_agents, pop.behaviours, strict=True)}
    behaviour = dict(zip(env.possible_agents, pop.behaviours, strict=True))
    while env.agents:
        actions = {}
        for a in env.agents:
            actions[a], states[a] = behaviour[a].step(observations[a], infos[a], states[a], rng)
        observations, _, _, _, infos = env.step(actions)
    record = env.episode_record()
    env.close()
    return record


def run_episodes(*, runs: int = 1, seed: int = 0, **kwargs: Any) -> tuple[EpisodeRecord, ...]:
    """``runs`` independent episodes, seeded from ``SeedSequence(seed).spawn(runs)``."""
    if isinstance(runs, bool) or not isinstance(runs, int) or runs < 1:
        raise CommonsConfigError(f"runs={runs!r} must be a positive integer")
    return tuple(run_episode(seed=child, **kwargs) for child in np.random.SeedSequence(seed).spawn(runs))
