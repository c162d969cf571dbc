"""The issuer's settings refuse values it cannot work with safely."""

import pytest
from pydantic import ValidationError

from services.issuer.config import IssuerSettings


@pytest.mark.parametrize(
    ("sweep", "age"),
    [(20.0, 5.0), (6.6, 5.0), (2.0, 0.4)],
)
def test_a_rollout_sweep_after_every_old_preparation_is_accepted(sweep: float, age: float) -> None:
    settings = IssuerSettings(rollout_sweep_seconds=sweep, max_prepared_age_seconds=age)
    assert settings.rollout_sweep_seconds == sweep


@pytest.mark.parametrize(
    ("sweep", "age"),
    [(1.0, 5.0), (6.5, 5.0), (20.0, 19.0), (0.0, 5.0)],
)
def test_a_rollout_sweep_that_could_miss_a_pass_refuses_to_start(sweep: float, age: float) -> None:
    """docs/templates.md#passes-made-while-the-design-changes: the sweep looks for passes still
    on the old design; one prepared up to the max age before its commit, with a template the
    caches drop within 1.5 s, could commit after an earlier sweep looked, and keep the old
    design for good."""
    with pytest.raises(ValidationError, match=r"(?i)rollout_sweep_seconds"):
        IssuerSettings(rollout_sweep_seconds=sweep, max_prepared_age_seconds=age)


def test_the_rule_reads_the_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TESSERA_ISSUER_ROLLOUT_SWEEP_SECONDS", "3")
    with pytest.raises(ValidationError, match=r"MAX_PREPARED_AGE_SECONDS \(5\) \+ 1\.5 s"):
        IssuerSettings()
    monkeypatch.setenv("TESSERA_ISSUER_MAX_PREPARED_AGE_SECONDS", "1")
    assert IssuerSettings().rollout_sweep_seconds == 3.0
