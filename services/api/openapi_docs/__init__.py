"""What the OpenAPI documents say about each operation, beyond what the routes declare.

Keyed by (method, path), so that the endpoint modules stay about behaviour: a summary, a
description, a tag, named request and response examples (examples.py) and, for the public
pages, files and redirects, their real answers (HTML, files, a `302` with its `Location`).
services/api/openapi.py applies them when it builds a document; an entry whose route does not
exist (yet) is left unused, and a route without an entry keeps its own summary under the
reference's name of its tag (`TAG_NAMES`). Model properties get their descriptions from `Field`
in the model modules; properties.py holds those of models this package leaves to their routes.
tests/api/test_openapi_docs.py fails on an operation or a property left undescribed, and on an
example its schema refuses.
"""

from services.api.openapi_docs import integrations, operator, pages, resources
from services.api.openapi_docs.common import TAG_NAMES, TAGS, Doc, Examples
from services.api.openapi_docs.properties import PROPERTIES

# The public document's: the v1 API, Variant A and the public pages.
OPERATIONS: dict[tuple[str, str], Doc] = {
    **resources.OPERATIONS,
    **integrations.OPERATIONS,
    **pages.OPERATIONS,
}
OPERATOR_OPERATIONS = operator.OPERATIONS
OPERATOR_TAGS = operator.TAGS

__all__ = [
    "OPERATIONS",
    "OPERATOR_OPERATIONS",
    "OPERATOR_TAGS",
    "PROPERTIES",
    "TAGS",
    "TAG_NAMES",
    "Doc",
    "Examples",
]
