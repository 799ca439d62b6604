"""Composite disequilibrium (paper §3.2, SPEC §3): d_t = sigmoid(wᵀz), z = [z_V, z_R, z_C, z_I].

- ``verifier``: z_V from a hybrid verifier (deterministic handlers short-circuit; an optional semantic judge).
- ``trustgate``: z_R, karma drops gated by a NormVerifier and by source independence (disjoint roots).
- ``contradiction``: z_C, the share of recent control actions the core schema H would have masked.
- ``style``: z_I, Jensen–Shannon divergence between style distributions of recent outputs and of the imprint.
- ``composite``: the config, d_t and the per-step monitor; ``calibration``: grid search of w and τ.
"""

from scars.disequilibrium.calibration import CalibrationResult, LabelledStep, calibrate, simplex_grid
from scars.disequilibrium.composite import (
    SIGNAL_NAMES,
    DisequilibriumConfig,
    DisequilibriumMonitor,
    Reading,
    Signals,
    StepRecord,
    attainable_range,
    composite,
    sigmoid,
)
from scars.disequilibrium.contradiction import ContradictionWindow, contradicts_core, core_contradiction
from scars.disequilibrium.style import (
    STYLE_CATEGORIES,
    identity_drift,
    js_divergence,
    style_counts,
    style_distribution,
)
from scars.disequilibrium.trustgate import (
    NormVerifier,
    Punishment,
    TrustGate,
    TrustGateConfig,
    TrustGateResult,
)
from scars.disequilibrium.verifier import (
    ApiErrorHandler,
    ConsensusJudge,
    CrashHandler,
    HybridVerifier,
    JudgeVerdict,
    KeywordJudge,
    RuleViolationHandler,
    SemanticJudge,
    VerifiableStep,
    VerifierScore,
)

__all__ = [
    "SIGNAL_NAMES",
    "STYLE_CATEGORIES",
    "ApiErrorHandler",
    "CalibrationResult",
    "ConsensusJudge",
    "ContradictionWindow",
    "CrashHandler",
    "DisequilibriumConfig",
    "DisequilibriumMonitor",
    "HybridVerifier",
    "JudgeVerdict",
    "KeywordJudge",
    "LabelledStep",
    "NormVerifier",
    "Punishment",
    "Reading",
    "RuleViolationHandler",
    "SemanticJudge",
    "Signals",
    "StepRecord",
    "TrustGate",
    "TrustGateConfig",
    "TrustGateResult",
    "VerifiableStep",
    "VerifierScore",
    "attainable_range",
    "calibrate",
    "composite",
    "contradicts_core",
    "core_contradiction",
    "identity_drift",
    "js_divergence",
    "sigmoid",
    "simplex_grid",
    "style_counts",
    "style_distribution",
]
