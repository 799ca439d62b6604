"""Registries of memory methods and policy backends: adding one is one decorated factory (docs/getting_started.md has an example that runs).

A **method** factory takes a ``MethodSpec`` (the world adapter, the base policy, the run's folder and seed, and the
run's settings) and returns an ``agents.api.Agent``. A **backend** factory takes the run's settings and returns an
``agents.policies.base.Policy``. Both registries are read by name; an unknown name is a ``ConfigError`` that lists
the known ones. Built-in entries register when their module is imported (``agents.builtin`` imports them all).

    from scars.agents.registry import MethodSpec, register_method
    from scars.agents.memory.base import MemoryMechanism

    @register_method("my_memory")
    def make_my_memory(spec: MethodSpec):
        return MyMemory(spec.world.card)
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from scars.synthesis.errors import ConfigError

if TYPE_CHECKING:
    from scars.agents.api import Agent
    from scars.agents.policies.base import Policy
    from scars.envs.api import WorldAdapter

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class MethodSpec:
    """What a method factory is given.

    world:    the world adapter (card, verifier, norm verifier).
    policy:   the base policy π_0 (a real model may write the method's text: ``policy.writes_text``).
    run_dir:  the run's folder (where a ledger goes).
    seed:     the method's own seed (synthesis and anything else it randomises).
    settings: the run's settings by name (e.g. ``ablation``, ``tau``, ``executor``, ``embedder``).
    """

    world: WorldAdapter
    policy: Policy
    run_dir: Path
    seed: int
    settings: Mapping[str, Any] = field(default_factory=dict)


class Registry(Generic[F]):
    """Names → factories, filled by the ``register`` decorator; ``get`` names the known entries on a miss."""

    def __init__(self, what: str) -> None:
        self.what = what
        self._entries: dict[str, F] = {}

    def register(self, name: str) -> Callable[[F], F]:
        if not isinstance(name, str) or not name.strip():
            raise ConfigError(f"a {self.what} needs a non-empty name, got {name!r}")

        def decorator(factory: F) -> F:
            if name in self._entries and self._entries[name] is not factory:
                raise ConfigError(f"{self.what} {name!r} is already registered ({self._entries[name]!r})")
            self._entries[name] = factory
            return factory

        return decorator

    def get(self, name: str) -> F:
        try:
            return self._entries[name]
        except KeyError:
            raise ConfigError(f"unknown {self.what} {name!r}; known: {', '.join(self.names())}") from None

    def names(self) -> tuple[str, ...]:
        return tuple(self._entries)

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)


MethodFactory = Callable[[MethodSpec], "Agent"]
BackendFactory = Callable[[Mapping[str, Any]], "Policy"]

METHODS: Registry[MethodFactory] = Registry("memory method")
BACKENDS: Registry[BackendFactory] = Registry("policy backend")


def register_method(name: str) -> Callable[[MethodFactory], MethodFactory]:
    """Decorator: register a memory-method factory under ``name``."""
    return METHODS.register(name)


def register_backend(name: str) -> Callable[[BackendFactory], BackendFactory]:
    """Decorator: register a policy-backend factory under ``name``."""
    return BACKENDS.register(name)
