"""Pydantic's messages reworded for clients (shared/validation_messages.py)."""

import pytest

from shared.validation_messages import client_message


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("Value error, must be a hex color like #1A2B3C.", "must be a hex color like #1A2B3C"),
        (
            "Input should be a valid dictionary or object to extract fields from",
            "must be a JSON object",
        ),
        ("Input should be greater than or equal to 1", "must be greater than or equal to 1"),
        ("String should have at most 100 characters", "must have at most 100 characters"),
        ("Field required", "Field required"),
    ],
)
def test_client_message(raw: str, expected: str) -> None:
    assert client_message(raw) == expected
