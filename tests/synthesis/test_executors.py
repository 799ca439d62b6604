"""Asynchronous synthesis: in-process and root-parallel on Ray, same seed, same result (paper §4.2)."""

from __future__ import annotations

import numpy as np
import pytest

from scars.synthesis.errors import ConfigError
from scars.synthesis.executors import (
    InProcessExecutor,
    RayExecutor,
    SynthesisRequest,
    SynthesisTimeout,
    run_tree,
    tree_seeds,
)
from scars.synthesis.fragments import build_dataset, extract_fragment
from scars.synthesis.mcts import SearchConfig, merge_results
from support.synthesis_worlds import CLASSES, commons, household, wide_world


def prepare(steps, verifier):
    fragment = extract_fragment(next(s for s in steps if s.violated), verifier, CLASSES)
    return build_dataset(steps, verifier, fragment), fragment


def test_tree_seeds_are_reproducible_and_independent():
    a, b = tree_seeds(3, 2), tree_seeds(3, 2)
    assert [s.generate_state(2).tolist() for s in a] == [s.generate_state(2).tolist() for s in b]
    assert a[0].generate_state(2).tolist() != a[1].generate_state(2).tolist()
    assert tree_seeds(np.random.SeedSequence(3), 2)[1].generate_state(1) == a[1].generate_state(1)


def test_in_process_executor_is_asynchronous_and_merges_its_trees():
    data, fragment = prepare(*household(("cup", "plate"), ("cup", "plate")))
    config = SearchConfig(num_simulations=40)
    executor = InProcessExecutor(num_trees=2)
    try:
        handle = executor.submit(data, fragment, classes=CLASSES, config=config, seed=11)
        result = handle.result(timeout=60)
        assert handle.done()
    finally:
        executor.shutdown()
    request = SynthesisRequest(data, fragment, classes=CLASSES, config=config)
    expected = merge_results([run_tree(request, s) for s in tree_seeds(11, 2)], config.top_k)
    assert result.signature() == expected.signature()
    assert result.admitted and result.replay.passed


def test_ray_executor_matches_the_in_process_executor(ray_session):
    data, fragment = prepare(*commons())
    config = SearchConfig(num_simulations=80)
    ray_result = RayExecutor(num_workers=2).run(data, fragment, classes=CLASSES, config=config, seed=5)
    executor = InProcessExecutor(num_trees=2)
    try:
        local = executor.run(data, fragment, classes=CLASSES, config=config, seed=5)
    finally:
        executor.shutdown()
    assert ray_result.signature() == local.signature()
    assert ray_result.admitted and ray_result.text.startswith("if pool_resource_level <")


def test_ray_handle_does_not_block_the_caller(ray_session):
    data, fragment = prepare(*wide_world())
    big = SearchConfig(num_simulations=3000, max_predicates=4)
    handle = RayExecutor(num_workers=1).submit(data, fragment, classes=CLASSES, config=big, seed=0)
    # submit returned at once; the search needs far longer than this wait.
    with pytest.raises(SynthesisTimeout, match="not finished"):
        handle.result(timeout=0.01)
    assert not handle.done()
    result = handle.result(timeout=120)
    assert handle.done() and result.simulations == 3000


@pytest.mark.parametrize("bad", [0, -1, 1.5, True])
def test_executors_validate_the_number_of_trees(bad):
    with pytest.raises(ConfigError, match="int ≥ 1"):
        InProcessExecutor(num_trees=bad)
