"""The body of POST /v1/jobs: one model for every job type a client creates, `type` first.

One flat model rather than a union tagged by `type`: a tagged union's validation errors carry
the tag in their location (`update_passes.field_values`), and the spec's envelope names the
body's own parameter (`field_values`). What each type requires and allows is checked here, so
bad input gets a 400 naming its `param`.
"""

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from services.api.schemas import MAX_IMPORT_ROWS, check_storable
from shared.errors import InvalidRequest
from shared.pass_limits import MAX_METADATA_KEYS, field_values_problem, metadata_problem

_ONLY = {
    "import_passes": ("rows",),
    "update_passes": ("field_values", "metadata"),
}


class JobCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    type: Literal["import_passes", "update_passes"] = Field(
        description="`import_passes` (issue one pass per row) or `update_passes` (set "
        "values on every pass of the template)."
    )
    template_id: str = Field(max_length=100, description="The template the job works on.")
    rows: list[Any] | None = Field(
        None,
        min_length=1,
        max_length=MAX_IMPORT_ROWS,
        description="import_passes: 1 to 100,000 rows: holder_name, holder_email, "
        "field_values, metadata.",
    )
    field_values: dict[str, str | None] | None = Field(
        None,
        max_length=100,
        description="update_passes: the values set on every pass (null removes a pass's own "
        "value: the field shows its template default again, as with PATCH).",
    )
    metadata: dict[str, Any] | None = Field(
        None,
        max_length=MAX_METADATA_KEYS,
        description="update_passes: metadata merged into every pass's (null removes a key).",
    )

    @model_validator(mode="before")
    @classmethod
    def _storable(cls, data: Any) -> Any:
        # Every value but the rows, which fail alone (each checked as a pass body is).
        if isinstance(data, dict):
            check_storable({key: value for key, value in data.items() if key != "rows"})
        return data

    @model_validator(mode="after")
    def _fits_type(self) -> "JobCreate":
        given = {
            name for name in ("rows", "field_values", "metadata") if name in self.model_fields_set
        }
        for name in sorted(given - set(_ONLY[self.type])):
            raise InvalidRequest(
                f"Unknown parameter for a {self.type} job: {name}.",
                param=name,
                code="parameter_unknown",
            )
        if self.type == "import_passes" and self.rows is None:
            raise InvalidRequest(
                "Missing required parameter: rows.", param="rows", code="parameter_missing"
            )
        if self.type == "update_passes":
            if self.field_values is None and self.metadata is None:
                raise InvalidRequest(
                    "Send field_values, metadata or both.",
                    param="field_values",
                    code="parameter_missing",
                )
            # Null values delete keys; what they merge into is checked per pass by the issuer.
            present = {k: v for k, v in (self.metadata or {}).items() if v is not None}
            values = {k: v for k, v in (self.field_values or {}).items() if v is not None}
            problem = field_values_problem(values) or metadata_problem(present)
            if problem is not None:
                param, message = problem
                raise InvalidRequest(message, param=param, code="parameter_too_large")
        return self
