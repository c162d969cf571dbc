"""Unknown query parameters are refused, as Stripe refuses them.

A misspelt or unsupported filter (`?status=voided`) silently ignored returns unfiltered data
that looks filtered. So every authenticated route (v1 and operator) answers 400
`parameter_unknown` naming the first query parameter it does not declare. The declared ones are
read from the matched route's FastAPI dependant (its own parameters and its dependencies', such
as paging's), so a new route is covered with no list to keep. Public pages (/p/, /b/, /l/, /t/)
do not authenticate and keep ignoring unknown parameters: links to them carry utm_* and other
tracking parameters.
"""

from fastapi import Request
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute
from pydantic import BaseModel

from shared.errors import InvalidRequest


def _query_names(dependant: Dependant) -> set[str]:
    names: set[str] = set()
    for field in dependant.query_params:
        model = field.field_info.annotation
        if isinstance(model, type) and issubclass(model, BaseModel):
            # A query parameter model: its fields are the parameters.
            names |= {info.alias or name for name, info in model.model_fields.items()}
        else:
            names.add(field.alias)
    for sub in dependant.dependencies:
        names |= _query_names(sub)
    return names


def declared_query_params(route: APIRoute) -> set[str]:
    """The query parameters `route` declares. Walked per request: a handful of dependants, and
    routes are unhashable, so a cache would need keys of its own."""
    return _query_names(route.dependant)


def refuse_unknown_query_params(request: Request) -> None:
    """400 `parameter_unknown` for the first query parameter the matched route does not take."""
    route = request.scope.get("route")
    if not isinstance(route, APIRoute):
        return
    known = declared_query_params(route)
    for name in request.query_params:
        if name not in known:
            takes = ", ".join(sorted(known)) if known else "no query parameters"
            raise InvalidRequest(
                f"Unknown query parameter: {name} (this endpoint takes {takes}).",
                param=name,
                code="parameter_unknown",
            )
