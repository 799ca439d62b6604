"""Every field of every tier's config is type-checked before anything runs: a wrong type is one ``ConfigError``
naming the field, the value and the type it must have (never a ``TypeError`` from deep inside a run)."""

from __future__ import annotations

import dataclasses
import typing

import pytest

from scars.experiments.config import Tier1Config, Tier2Config, Tier3Config
from scars.synthesis.errors import ConfigError

CONFIGS = (Tier1Config, Tier2Config, Tier3Config)
WRONG = {
    str: (None, 3, 1.5, ["x"], {"a": 1}, True),
    int: (None, "3", 1.5, [3], True),
    float: (None, "0.5", [0.5], True),
    bool: (None, "yes", 1, 0.0),
}


def cases():
    for cls in CONFIGS:
        hints = typing.get_type_hints(cls)
        for f in dataclasses.fields(cls):
            hint = hints[f.name]
            if typing.get_origin(hint) is tuple:
                wrong = (None, "0-4", (0, 1.5), (0, True), 3)
            else:
                wrong = WRONG[hint]
            for value in wrong:
                yield pytest.param(cls, f.name, value, id=f"{cls.__name__}.{f.name}={value!r}")


@pytest.mark.parametrize(("cls", "name", "value"), list(cases()))
def test_a_wrong_type_in_any_field_is_one_config_error_naming_it(cls, name, value):
    with pytest.raises(ConfigError) as caught:
        cls(**{name: value})
    message = str(caught.value)
    assert name in message and "\n" not in message


def test_the_types_a_file_gives_are_taken():
    assert Tier3Config(seeds=[0, 1]).seeds == (0, 1)
    assert Tier1Config(temperature=1).temperature == 1
