import numpy as np
import pandas as pd
import pytest

from experiments.metrics import first_exposure_violation_rate, growth_fit, repeat_violation_rate, svr


def _steps(rows):
    return pd.DataFrame(rows, columns=["episode", "t", "violated_rules", "exposed_rules", "covered_rules"])


def test_rvr_counts_repeats_over_reexposures_by_hand():
    steps = _steps(
        [
            (0, 0, "", "a", ""),  # exposed to a, before any failure: not a re-exposure
            (0, 1, "a", "a", ""),  # first failure of a
            (0, 2, "", "a", ""),  # re-exposure 1, no repeat
            (1, 3, "a", "a", ""),  # re-exposure 2, repeat 1
            (1, 4, "", "a,b", "a"),  # re-exposure 3 (covered), no repeat; b never failed
            (1, 5, "b", "b", ""),  # first failure of b
        ]
    )
    m = repeat_violation_rate(steps)
    assert (m["repeat_violations"], m["reexposures"]) == (1, 3)
    assert m["rvr"] == pytest.approx(1 / 3)
    assert (m["repeat_violations_covered"], m["reexposures_covered"]) == (0, 1)
    assert m["first_failures"] == 2
    assert svr(steps) == pytest.approx(3 / 6)


def test_rvr_pools_an_equivalence_family():
    steps = _steps([(0, 0, "cup", "cup", ""), (0, 1, "plate", "plate", "")])
    assert repeat_violation_rate(steps)["rvr"] == 0.0
    assert repeat_violation_rate(steps, {"cup": "sink", "plate": "sink"})["rvr"] == 1.0


def test_first_exposure_rate_on_held_out_rules():
    steps = _steps([(0, 0, "", "p", ""), (0, 1, "p", "p", ""), (0, 2, "q", "q", "")])
    assert first_exposure_violation_rate(steps, ["p", "q", "never_seen"]) == (0.5, 2)


def test_growth_fit_recovers_exponent():
    t = np.arange(1, 200)
    fit = growth_fit(t, 3.0 * t**0.5)
    assert fit["b"] == pytest.approx(0.5, abs=1e-9) and fit["a"] == pytest.approx(3.0)
