"""Google's walletobjects v1 discovery document, turned into JSON Schema for validation.

tests/fixtures/walletobjects.v1.json is copied unchanged from google-api-python-client
(googleapiclient/discovery_cache/documents/). Its `schemas` use the Discovery format; this
module maps them to JSON Schema 2020-12: `$ref: Name` -> `#/$defs/Name`, 64-bit integers as
decimal strings (as Google's JSON encodes them), and `additionalProperties: false` wherever the
discovery document does not allow extra keys, so a misspelled key fails validation.

Discovery does not mark required fields; REQUIRED adds the ones Google's reference documents.
"""

import json
from functools import cache
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

DISCOVERY_PATH = Path(__file__).resolve().parents[2] / "fixtures" / "walletobjects.v1.json"

# Fields Google's REST reference marks "Required." (plus what we always rely on being present).
REQUIRED: dict[str, list[str]] = {
    "EventTicketClass": ["id", "issuerName", "eventName", "reviewStatus"],
    "LoyaltyClass": ["id", "issuerName", "programName", "programLogo", "reviewStatus"],
    "OfferClass": ["id", "issuerName", "title", "provider", "redemptionChannel", "reviewStatus"],
    "GenericClass": ["id"],
    "EventTicketObject": ["id", "classId", "state"],
    "LoyaltyObject": ["id", "classId", "state"],
    "OfferObject": ["id", "classId", "state"],
    "GenericObject": ["id", "classId", "cardTitle", "header"],
    "LocalizedString": ["defaultValue"],
    "TranslatedString": ["language", "value"],
    "Image": ["sourceUri"],
    "ImageUri": ["uri"],
    "Barcode": ["type", "value"],
    "TextModuleData": ["id", "body"],
    "EventVenue": ["name", "address"],
}
_INT64_FORMATS = {"int64", "uint64"}
_DIALECT = "https://json-schema.org/draft/2020-12/schema"
SCHEMA_ID = "urn:tessera:test:walletobjects:v1"


@cache
def discovery() -> dict[str, Any]:
    document: dict[str, Any] = json.loads(DISCOVERY_PATH.read_text(encoding="utf-8"))
    return document


@cache
def definitions(with_required: bool = True) -> dict[str, Any]:
    """Every discovery schema as a JSON Schema, keyed by name (the `$defs`)."""
    defs = {name: to_json_schema(schema) for name, schema in discovery()["schemas"].items()}
    if with_required:
        for name, fields in REQUIRED.items():
            defs[name]["required"] = fields
    return defs


def to_json_schema(node: dict[str, Any]) -> dict[str, Any]:
    """One discovery schema node -> JSON Schema."""
    if "$ref" in node:
        return {"$ref": f"#/$defs/{node['$ref']}"}
    kind = node.get("type")
    if kind == "object":
        result: dict[str, Any] = {"type": "object"}
        result["properties"] = {
            key: to_json_schema(value) for key, value in node.get("properties", {}).items()
        }
        extra = node.get("additionalProperties")
        result["additionalProperties"] = False if extra is None else to_json_schema(extra)
        return result
    if kind == "array":
        return {"type": "array", "items": to_json_schema(node["items"])}
    if kind == "string":
        result = {"type": "string"}
        if "enum" in node:
            result["enum"] = node["enum"]
        if node.get("format") in _INT64_FORMATS:
            result["pattern"] = r"^-?[0-9]+$"
        return result
    if kind == "integer" and node.get("format") in _INT64_FORMATS:
        return {"type": ["string", "integer"], "pattern": r"^-?[0-9]+$"}
    if kind in {"integer", "number", "boolean"}:
        return {"type": kind}
    if kind == "any":
        return {}
    raise ValueError(f"unmapped discovery node: {node!r}")


@cache
def document(with_required: bool = True) -> dict[str, Any]:
    """All definitions as one JSON Schema document (valid per the 2020-12 metaschema)."""
    return {"$schema": _DIALECT, "$id": SCHEMA_ID, "$defs": definitions(with_required)}


@cache
def _registry(with_required: bool) -> Registry[Any]:
    # One crawled registry, shared by every validator: resolving the $refs of 155 definitions
    # again for each schema name would cost the test suite seconds.
    resource = Resource.from_contents(document(with_required), default_specification=DRAFT202012)
    registry: Registry[Any] = Registry().with_resource(SCHEMA_ID, resource).crawl()
    return registry


@cache
def validator(schema_name: str, with_required: bool = True) -> Draft202012Validator:
    if schema_name not in discovery()["schemas"]:
        raise KeyError(f"no schema {schema_name!r} in the discovery document")
    root = {"$ref": f"{SCHEMA_ID}#/$defs/{schema_name}"}
    return Draft202012Validator(root, registry=_registry(with_required))


def errors(schema_name: str, instance: dict[str, Any], *, with_required: bool = True) -> list[str]:
    """Every violation of `schema_name` by `instance`, as "path: message" lines.

    `with_required=False` checks names and types only (for the skinny JWT's id references).
    """
    found = validator(schema_name, with_required).iter_errors(instance)
    return sorted(f"{'/'.join(map(str, e.absolute_path)) or '<root>'}: {e.message}" for e in found)
