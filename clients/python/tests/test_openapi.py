"""The client agrees with the endpoint's OpenAPI document (`GET /api/openapi.json` of the real
server): every route of the document is one the client calls or lists as left out, and for the
routes it calls, the query parameters, body fields and answer fields are the same on both
sides. A route, parameter or field added on one side only fails here, naming it."""

from __future__ import annotations

import dataclasses
from typing import Any, Dict, Set, Tuple

import pytest

from cairn_client import models, routes


@pytest.fixture(scope="module")
def document():
    import tempfile
    from pathlib import Path

    from conftest import Server

    with tempfile.TemporaryDirectory(prefix="cairn-py-openapi-") as tmp:
        server = Server(Path(tmp) / "cairn.db")
        try:
            _, doc = server.client().endpoint.call("GET", "/api/openapi.json", None)
        finally:
            server.stop()
    return doc


def resolve(doc: Dict[str, Any], schema: Dict[str, Any]) -> Dict[str, Any]:
    ref = schema.get("$ref")
    if ref:
        return resolve(doc, doc["components"]["schemas"][ref.rsplit("/", 1)[1]])
    return schema


def props(doc: Dict[str, Any], schema: Dict[str, Any]) -> Tuple[Set[str], Set[str]]:
    """The property names of an object schema and the required ones, through `$ref`, `allOf`
    (all parts) and `oneOf` (its object part: a nullable object)."""
    schema = resolve(doc, schema)
    names, required = set(schema.get("properties", {})), set(schema.get("required", []))
    for part in schema.get("allOf", []):
        n, r = props(doc, part)
        names |= n
        required |= r
    objects = [p for p in schema.get("oneOf", []) if resolve(doc, p).get("type") != "null"]
    if len(objects) == 1:
        n, _ = props(doc, objects[0])  # a nullable part: none of it is required
        names |= n
    return names, required


def fields(model) -> Tuple[Set[str], Set[str]]:
    every = {f.name for f in dataclasses.fields(model) if f.name != "extra"}
    required = {
        f.name for f in dataclasses.fields(model)
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    }
    return every, required


def operation(doc, route: routes.Route) -> Dict[str, Any]:
    return doc["paths"][route.path][route.method.lower()]


def body_schema(op) -> Dict[str, Any]:
    return op["requestBody"]["content"]["application/json"]["schema"]


def test_every_route_of_the_document_is_called_or_left_out_and_none_is_missing(document):
    in_doc = {(m.upper(), p) for p, item in document["paths"].items() for m in item}
    client = {(r.method, r.path) for r in routes.COVERED} | set(routes.NOT_COVERED)
    unknown = {r for r in in_doc - client if not routes.is_web_view(r[1])}
    assert not unknown, f"routes of the document this client neither calls nor leaves out: {unknown}"
    gone = client - in_doc
    assert not gone, f"routes of the client the document does not have: {gone}"


def test_the_query_parameters_agree(document):
    for route in routes.COVERED:
        params = operation(document, route).get("parameters", [])
        in_doc = {p["name"] for p in params if p["in"] == "query"}
        assert in_doc == set(route.query), f"{route.method} {route.path}: {in_doc ^ set(route.query)}"


def test_the_answers_agree_with_the_models(document):
    for route in routes.COVERED:
        if route.answer is None:
            continue
        answer = operation(document, route)["responses"]["200"]["content"]["application/json"]
        names, required = props(document, answer.get("schema", {}))
        if not names:
            continue  # the document gives no fields for this answer (a follow-up's to add)
        mine, my_required = fields(route.answer)
        assert names == mine, f"{route.answer.__name__}: fields on one side only: {names ^ mine}"
        assert my_required <= required, f"{route.answer.__name__} requires {my_required - required}"
    row_names, _ = props(document, {"$ref": "#/components/schemas/ThreadRow"})
    assert row_names == fields(models.ThreadRow)[0]
    refusal, _ = props(document, {"$ref": "#/components/schemas/Refusal"})
    assert refusal == {"error", "field"}


def test_the_start_body_agrees_with_start_options(document):
    op = operation(document, routes.START)
    names, required = props(document, body_schema(op))
    mine = fields(models.StartOptions)[0] | set(routes.START.body_args)
    assert names == mine, f"start body fields on one side only: {names ^ mine}"
    assert required == {"input"}
    budgets, _ = props(document, body_schema(op)["properties"]["budgets"])
    assert budgets == fields(models.Budgets)[0], budgets ^ fields(models.Budgets)[0]


def test_the_control_bodies_agree(document):
    op = operation(document, routes.CONTROL)
    controls = {c.strip() for c in op["summary"].replace(" or ", ", ").split(",")}
    assert controls == set(routes.CONTROL_BODIES), controls ^ set(routes.CONTROL_BODIES)
    in_doc = [props(document, s)[0] for s in body_schema(op)["oneOf"]]
    mine = [set(b) for b in routes.CONTROL_BODIES.values() if b]
    assert sorted(map(sorted, in_doc)) == sorted(map(sorted, mine))
    signal = next(s for s in body_schema(op)["oneOf"] if "dedup_key" in s.get("properties", {}))
    start, _ = props(document, signal["properties"]["start"])
    assert start == fields(models.SignalStart)[0], start ^ fields(models.SignalStart)[0]
    fork = next(s for s in body_schema(op)["oneOf"] if "checkpoint" in s.get("properties", {}))
    assert props(document, fork)[0] == fields(models.ForkOptions)[0]


def test_the_update_and_promise_bodies_agree(document):
    op = operation(document, routes.UPDATE)
    names, required = props(document, body_schema(op))
    assert names == set(routes.UPDATE.body_args), names ^ set(routes.UPDATE.body_args)
    assert not required
    start, start_required = props(document, body_schema(op)["properties"]["start"])
    mine, my_required = fields(models.UpdateStart)
    assert start == mine, start ^ mine
    assert start_required <= my_required
    promise, _ = props(document, body_schema(operation(document, routes.PROMISE)))
    assert promise == set(routes.PROMISE.body_args), promise ^ set(routes.PROMISE.body_args)


def test_the_stream_is_an_event_stream(document):
    op = operation(document, routes.STREAM)
    assert set(op["responses"]["200"]["content"]) == {"text/event-stream"}
