"""Composite disequilibrium d_t = sigmoid(wᵀ z_t) and the monitor that computes it per step (paper §3.2, SPEC §3).

    d_t = σ(gain · wᵀ z_t + bias),   z_t = [z_V, z_R, z_C, z_I] ∈ [0, 1]⁴,   w = [α, β, γ, δ], w_j ∈ [0, 1], Σ w = 1

gain = 1, bias = 0 (the defaults) is exactly the paper's formula. Note (SPEC §3): since wᵀz ∈ [0, 1], the paper's
d_t only ranges over [σ(0), σ(1)] = [0.5, 0.731], so the threshold τ must lie in that range; a τ outside it is
rejected with a ``ConfigError`` that says so. ``gain``/``bias`` are an explicitly named option that stretches the
range to [σ(bias), σ(gain + bias)] — τ is validated against that range instead.

Crossing τ (d_t > τ) switches the agent from assimilation to accommodation. The default τ = 0.55 with equal weights
crosses when wᵀz > 0.2007: any single signal at full strength (e.g. one verified failure, z_V = 1) crosses; a mild
identity drift alone (z_I = 0.3 → wᵀz = 0.075) does not. ``disequilibrium.calibration`` fits w and τ on labelled
validation trajectories instead.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from scars.disequilibrium.contradiction import DEFAULT_CONTRADICTION_WINDOW, ContradictionWindow
from scars.disequilibrium.style import (
    STYLE_SMOOTHING,
    smoothed,
    smoothed_js,
    style_counts,
    style_distribution,
)
from scars.disequilibrium.trustgate import TrustGate, TrustGateResult
from scars.disequilibrium.verifier import HybridVerifier, VerifiableStep, VerifierScore
from scars.envs.api import Punishment
from scars.synthesis.dsl.ast import Action, Rule
from scars.synthesis.dsl.semantics import Classes
from scars.synthesis.errors import ConfigError

SIGNAL_NAMES: tuple[str, str, str, str] = ("z_V", "z_R", "z_C", "z_I")
WEIGHT_NAMES: tuple[str, str, str, str] = ("alpha", "beta", "gamma", "delta")
_WEIGHT_SUM_TOLERANCE = 1e-9


def sigmoid(x: float | np.ndarray) -> float | np.ndarray:
    """σ(x) = 1 / (1 + e^{−x}), numerically stable for large |x|."""
    if isinstance(x, np.ndarray):
        out = np.empty_like(x, dtype=float)
        pos = x >= 0
        out[pos] = 1.0 / (1.0 + np.exp(-x[pos]))
        ex = np.exp(x[~pos])
        out[~pos] = ex / (1.0 + ex)
        return out
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    ex = math.exp(x)
    return ex / (1.0 + ex)


def validate_weights(weights: Sequence[float]) -> tuple[float, float, float, float]:
    """w = [α, β, γ, δ]: four entries, each in [0, 1], summing to 1 (SPEC §3)."""
    w = tuple(float(x) for x in weights)
    if len(w) != 4:
        raise ConfigError(f"weights must be [alpha, beta, gamma, delta] (4 values), got {len(w)}: {w}")
    for name, value in zip(WEIGHT_NAMES, w, strict=True):
        if not (0.0 <= value <= 1.0):
            raise ConfigError(f"weight {name}={value!r} is outside [0, 1]")
    total = sum(w)
    if abs(total - 1.0) > _WEIGHT_SUM_TOLERANCE:
        raise ConfigError(f"weights must sum to 1 (SPEC §3: Σw = 1), got {w} summing to {total!r}")
    return w  # type: ignore[return-value]


def attainable_range(gain: float, bias: float) -> tuple[float, float]:
    """[min, max] of d_t over z ∈ [0, 1]⁴ with Σw = 1: [σ(bias), σ(gain + bias)] for gain > 0."""
    return float(sigmoid(bias)), float(sigmoid(gain + bias))


@dataclass(frozen=True, slots=True)
class Signals:
    """z_t = [z_V, z_R, z_C, z_I], each in [0, 1]."""

    z_v: float = 0.0
    z_r: float = 0.0
    z_c: float = 0.0
    z_i: float = 0.0

    def __post_init__(self) -> None:
        if (
            0.0 <= self.z_v <= 1.0
            and 0.0 <= self.z_r <= 1.0
            and 0.0 <= self.z_c <= 1.0
            and 0.0 <= self.z_i <= 1.0
        ):
            return  # every step's signals (one comparison chain; NaN fails it)
        for name, value in zip(SIGNAL_NAMES, self.as_tuple(), strict=True):
            if not (0.0 <= value <= 1.0):
                raise ConfigError(f"signal {name}={value!r} is outside [0, 1]")

    def as_tuple(self) -> tuple[float, float, float, float]:
        return (self.z_v, self.z_r, self.z_c, self.z_i)

    def as_array(self) -> np.ndarray:
        return np.array(self.as_tuple(), dtype=float)


@dataclass(frozen=True, slots=True)
class DisequilibriumConfig:
    """Weights, threshold and windows of the composite signal.

    weights: [α, β, γ, δ] for [z_V, z_R, z_C, z_I]; each in [0, 1], Σ = 1.
    tau: the accommodation threshold. With the paper's formula (gain=1, bias=0) it must lie in [0.5, 0.731);
        generally in [σ(bias), σ(gain + bias)).
    gain, bias: optional stretch d_t = σ(gain·wᵀz + bias); gain=1, bias=0 is the paper's formula.
    contradiction_window: z_C is computed over this many most recent control actions.
    style_window: z_I compares this many most recent non-empty outputs with the imprint.
    imprint_size: when no imprint is given, the first this-many non-empty outputs become y_0.
    trust_window: z_R counts punishments received in this many most recent steps (1 = this step's only).
    """

    weights: tuple[float, float, float, float] = (0.25, 0.25, 0.25, 0.25)
    tau: float = 0.55
    gain: float = 1.0
    bias: float = 0.0
    contradiction_window: int = DEFAULT_CONTRADICTION_WINDOW
    style_window: int = 5
    imprint_size: int = 5
    trust_window: int = 1
    style_smoothing: float = STYLE_SMOOTHING

    def __post_init__(self) -> None:
        object.__setattr__(self, "weights", validate_weights(self.weights))
        if not (math.isfinite(self.gain) and self.gain > 0):
            raise ConfigError(f"gain must be a finite number > 0 (d_t must grow with wᵀz), got {self.gain!r}")
        if not math.isfinite(self.bias):
            raise ConfigError(f"bias must be finite, got {self.bias!r}")
        lo, hi = attainable_range(self.gain, self.bias)
        if not (lo <= self.tau < hi):
            formula = (
                "the paper's d_t = sigmoid(w·z) with Σw = 1 (SPEC §3)"
                if (self.gain, self.bias) == (1.0, 0.0)
                else f"d_t = sigmoid({self.gain}·w·z + {self.bias})"
            )
            raise ConfigError(
                f"tau={self.tau!r} is outside [{lo:.4f}, {hi:.4f}): with {formula}, d_t only ranges over "
                f"[{lo:.4f}, {hi:.4f}], so this tau would "
                + ("always be crossed" if self.tau < lo else "never be crossed")
                + "; choose tau in that range or set gain/bias to stretch it"
            )
        for name in ("contradiction_window", "style_window", "imprint_size", "trust_window"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be ≥ 1, got {getattr(self, name)}")
        if not 0 < self.style_smoothing <= 1:
            raise ConfigError(f"style_smoothing ε must be in (0, 1], got {self.style_smoothing!r}")

    @property
    def d_range(self) -> tuple[float, float]:
        return attainable_range(self.gain, self.bias)


def composite(z: Signals | Sequence[float], config: DisequilibriumConfig) -> float:
    """d_t = σ(gain · wᵀz + bias)."""
    vec = z.as_array() if isinstance(z, Signals) else Signals(*z).as_array()
    return float(sigmoid(config.gain * float(np.dot(config.weights, vec)) + config.bias))


@dataclass(frozen=True, slots=True)
class StepRecord:
    """One step as the monitor consumes it (built by the agent loop from the environment's step output).

    context: the context q; action: the action taken (``None`` if none); output: the agent's text output;
    events / exception: what the environment and tool layer raised (read by the hybrid verifier);
    punishments: provenance records of punishments the agent received at this step (read by the TrustGate).
    proposal: the base policy's π_0 over the admissible actions, before any mask (read by z_C); empty: z_C reads
        the executed action instead.
    """

    step: int
    context: Mapping[str, Any] = field(default_factory=dict)
    action: Action | None = None
    output: str = ""
    events: tuple[Mapping[str, Any], ...] = ()
    exception: BaseException | str | None = None
    punishments: tuple[Punishment, ...] = ()
    proposal: tuple[tuple[Action, float], ...] = ()
    core_forbidden: tuple[bool, ...] | None = None
    """Which proposed actions the core schema H forbids, when the controller already evaluated H (else z_C does)."""


@dataclass(frozen=True, slots=True)
class Reading:
    """The monitor's output for one step. ``crossed``: d_t > τ; ``onset``: crossed now but not at the previous step."""

    step: int
    z: Signals
    d: float
    tau: float
    crossed: bool
    onset: bool
    verdict: VerifierScore
    trust: TrustGateResult | None

    def as_row(self) -> dict[str, Any]:
        return {
            "step": self.step,
            **dict(zip(SIGNAL_NAMES, self.z.as_tuple(), strict=True)),
            "d": self.d,
            "crossed": self.crossed,
            "verdict_source": self.verdict.source,
            "verdict_handler": self.verdict.handler,
        }


class DisequilibriumMonitor:
    """Consumes step records of one agent and returns d_t, z_t and whether τ is crossed (paper §3.2).

    z_R is 0 when no ``trust_gate`` is given (a world without social feedback). z_I is 0 until the imprint y_0
    exists (given up front, or the first ``imprint_size`` non-empty outputs).
    """

    def __init__(
        self,
        config: DisequilibriumConfig = DisequilibriumConfig(),
        *,
        agent_id: str | None = None,
        verifier: HybridVerifier | None = None,
        trust_gate: TrustGate | None = None,
        core: Sequence[Rule] = (),
        classes: Classes | None = None,
        imprint: Iterable[str] = (),
    ) -> None:
        self.config = config
        self.agent_id = agent_id
        self.verifier = verifier if verifier is not None else HybridVerifier()
        self.trust_gate = trust_gate
        self._contradiction = ContradictionWindow(core, classes, config.contradiction_window)
        self._imprint: list[str] = [t for t in imprint if t]
        self._imprint_fixed = bool(self._imprint)
        self._recent_outputs: deque[str] = deque(maxlen=config.style_window)
        self._punishments: deque[tuple[Punishment, ...]] = deque(maxlen=config.trust_window)
        self._previous_crossed = False
        self._imprint_cache: tuple[int, np.ndarray] | None = None
        self._counts_cache: dict[str, np.ndarray] = {}
        self._drift_cache: dict[tuple[str, ...], float] = {}

    @property
    def imprint(self) -> tuple[str, ...]:
        return tuple(self._imprint)

    def observe(self, record: StepRecord) -> Reading:
        verdict = self.verifier.verify(
            VerifiableStep(record.events, record.exception, record.output, record.context)
        )
        if record.proposal:
            z_c = self._contradiction.push_proposal(record.context, record.proposal, record.core_forbidden)
        else:
            z_c = self._contradiction.push(record.context, record.action)
        trust = None
        self._punishments.append(record.punishments)
        if self.trust_gate is not None:
            window = [p for batch in self._punishments for p in batch]
            trust = self.trust_gate.evaluate(window, target=self.agent_id)
        z_i = self._identity_drift(record.output)
        z = Signals(verdict.z_v, trust.z_r if trust else 0.0, z_c, z_i)
        d = composite(z, self.config)
        crossed = d > self.config.tau
        reading = Reading(
            record.step,
            z,
            d,
            self.config.tau,
            crossed,
            crossed and not self._previous_crossed,
            verdict,
            trust,
        )
        self._previous_crossed = crossed
        return reading

    def _identity_drift(self, output: str) -> float:
        if not output:
            return self._current_drift()
        if not self._imprint_fixed and len(self._imprint) < self.config.imprint_size:
            self._imprint.append(output)
            return 0.0  # still writing y_0: no drift from oneself
        self._recent_outputs.append(output)
        return self._current_drift()

    def _current_drift(self) -> float:
        if not self._recent_outputs or not self._imprint:
            return 0.0
        if self._imprint_cache is None or self._imprint_cache[0] != len(self._imprint):
            # y_0 stops changing once written: its distribution is computed once
            imprint = style_distribution(self._imprint, self.config.style_smoothing)
            self._imprint_cache = (len(self._imprint), imprint)
            self._drift_cache.clear()
        key = tuple(self._recent_outputs)
        drift = self._drift_cache.get(key)
        if drift is None:  # the same window of sentences gives the same drift: computed once
            if len(self._drift_cache) > 4096:
                self._drift_cache.clear()
            counts = sum(self._style_counts(text) for text in self._recent_outputs)
            drift = smoothed_js(smoothed(counts, self.config.style_smoothing), self._imprint_cache[1])
            self._drift_cache[key] = drift
        return drift

    def _style_counts(self, text: str) -> np.ndarray:
        """Style counts of one output, remembered (an agent repeats its sentences)."""
        counts = self._counts_cache.get(text)
        if counts is None:
            if len(self._counts_cache) > 4096:
                self._counts_cache.clear()
            counts = self._counts_cache[text] = style_counts(text)
        return counts
