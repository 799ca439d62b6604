"""Synthesis (paper §3.3, §4): the patch DSL, failure fragments, the MDL objective, MCTS search and its executors.

Pure functions over frozen results; imports only ``synthesis.*``, numpy and (lazily, in the Ray executor) ray.
The OR-Tools merge lives in ``synthesis.merge``.
"""

from scars.synthesis.executors import (
    InProcessExecutor,
    RayExecutor,
    SynthesisHandle,
    SynthesisRequest,
    SynthesisTimeout,
    tree_seeds,
)
from scars.synthesis.failure import Failure, FailureSource
from scars.synthesis.fragments import (
    FailureCase,
    FragmentError,
    RecordedStep,
    SuccessCase,
    SynthesisData,
    Verifier,
    build_dataset,
    extract_fragment,
)
from scars.synthesis.mcts import (
    Candidate,
    CandidateSpace,
    SearchConfig,
    SynthesisResult,
    candidate_space,
    exhaustive_search,
    merge_results,
    synthesize,
)
from scars.synthesis.objective import (
    LOG_CAP,
    ObjectiveEvaluator,
    ObjectiveWeights,
    ReplayReport,
    Score,
    drift_measures,
    policy_distribution,
    replay_pass,
    score_rule,
    tv_drift,
)

__all__ = [
    "LOG_CAP",
    "Candidate",
    "CandidateSpace",
    "FailureCase",
    "Failure",
    "FailureSource",
    "FragmentError",
    "InProcessExecutor",
    "ObjectiveEvaluator",
    "ObjectiveWeights",
    "RayExecutor",
    "RecordedStep",
    "ReplayReport",
    "Score",
    "SearchConfig",
    "SuccessCase",
    "SynthesisData",
    "SynthesisHandle",
    "SynthesisRequest",
    "SynthesisResult",
    "SynthesisTimeout",
    "Verifier",
    "build_dataset",
    "drift_measures",
    "candidate_space",
    "exhaustive_search",
    "extract_fragment",
    "merge_results",
    "policy_distribution",
    "replay_pass",
    "score_rule",
    "synthesize",
    "tree_seeds",
    "tv_drift",
]
