"""Synthesis (paper §3.3, §4): the patch DSL, failure fragments, the MDL objective, MCTS search and its executors.

Pure functions over frozen results; imports only ``synthesis.*``, numpy and (lazily, in the Ray executor) ray.
The OR-Tools merge lives in ``synthesis.merge``.
"""

from scars.synthesis.lazy import lazy_exports

_EXPORTS = {
    "scars.synthesis.executors": (
        "InProcessExecutor",
        "RayExecutor",
        "SynthesisHandle",
        "SynthesisRequest",
        "SynthesisTimeout",
        "tree_seeds",
    ),
    "scars.synthesis.failure": (
        "Failure",
        "FailureSource",
    ),
    "scars.synthesis.fragments": (
        "FailureCase",
        "FragmentError",
        "RecordedStep",
        "SuccessCase",
        "SynthesisData",
        "Verifier",
        "build_dataset",
        "extract_fragment",
    ),
    "scars.synthesis.mcts": (
        "Candidate",
        "CandidateSpace",
        "SearchConfig",
        "SynthesisResult",
        "candidate_space",
        "exhaustive_search",
        "merge_results",
        "synthesize",
    ),
    "scars.synthesis.objective": (
        "LOG_CAP",
        "ObjectiveEvaluator",
        "ObjectiveWeights",
        "ReplayReport",
        "Score",
        "drift_measures",
        "policy_distribution",
        "replay_pass",
        "score_rule",
        "tv_drift",
    ),
}
"""Each module's public names; a name's module is imported when the name is first read (``synthesis.lazy``)."""
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

__all__ = sorted(name for names in _EXPORTS.values() for name in names)
