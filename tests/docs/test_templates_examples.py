"""Every JSON example in docs/templates.md is what it claims to be.

A template body validates as the api's `TemplateCreate` and passes the issuer's style check; a
bare design validates as `Design`; a pass body validates as `PassCreate`, names only fields of
the template shown before it and carries valid metadata dates. A block that is none of these is
marked in the doc, on the line before its fence: `<!-- not checked: why -->` (fragments,
output), or `<!-- invalid: why -->` for a counter-example, which must then be refused.
"""

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from services.api.schemas import PassCreate, TemplateCreate
from services.issuer.validation import validate_design
from shared.design import Design
from shared.pass_values import check_field_values, check_metadata_dates

DOC = Path(__file__).resolve().parents[2] / "docs" / "templates.md"
_MARK = re.compile(r"^<!-- (?P<kind>not checked|invalid): .+ -->$")


@dataclass(frozen=True)
class Example:
    line: int
    mark: str | None  # "not checked", "invalid" or None
    body: str

    def __str__(self) -> str:
        return f"docs/templates.md:{self.line}"


def _examples() -> list[Example]:
    text = DOC.read_text()
    found = []
    for match in re.finditer(r"^```json\n(.*?)\n```$", text, re.MULTILINE | re.DOTALL):
        before = text[: match.start()].rstrip("\n").rsplit("\n", 1)[-1]
        mark = _MARK.match(before)
        found.append(
            Example(
                line=text.count("\n", 0, match.start()) + 1,
                mark=mark["kind"] if mark else None,
                body=match[1],
            )
        )
    return found


EXAMPLES = _examples()


def _check_template(body: dict[str, Any]) -> Design:
    template = TemplateCreate.model_validate(body)
    return validate_design(template.design.model_dump(mode="json"), template.apple_style)


def _check_pass(body: dict[str, Any], template: Design | None) -> None:
    created = PassCreate.model_validate(body)
    assert template is not None, "a pass body with no template body before it"
    check_field_values(template, created.field_values)
    check_metadata_dates(created.metadata)


def _check_all() -> dict[int, Exception | None]:
    """Each example's line -> what checking it raised (None: it passed). Pass bodies are checked
    against the template before them, so the examples are walked in order."""
    outcomes: dict[int, Exception | None] = {}
    template: Design | None = None
    for example in EXAMPLES:
        if example.mark == "not checked":
            continue
        try:
            body = json.loads(example.body)
            if not isinstance(body, dict):
                raise TypeError("not a JSON object")
            if "design" in body:
                template = _check_template(body)
            elif "template_id" in body:
                _check_pass(body, template)
            elif "organization_name" in body:
                Design.model_validate(body)
            else:
                raise TypeError("neither a template, a design nor a pass body")
        except Exception as exc:  # reported per example by the tests below
            outcomes[example.line] = exc
        else:
            outcomes[example.line] = None
    return outcomes


OUTCOMES = _check_all()


def test_the_doc_has_examples_of_every_kind() -> None:
    checked = [example for example in EXAMPLES if example.mark is None]
    bodies = [json.loads(example.body) for example in checked]
    assert sum("design" in body for body in bodies) >= 6  # one per apple_style and more
    assert any("template_id" in body for body in bodies)


@pytest.mark.parametrize("example", [e for e in EXAMPLES if e.mark != "not checked"], ids=str)
def test_example_is_what_the_doc_says(example: Example) -> None:
    problem = OUTCOMES[example.line]
    if example.mark == "invalid":
        assert problem is not None, f"{example} is marked invalid but validates"
    else:
        assert problem is None, f"{example}: {problem} (fix it, or mark it as the module says)"
