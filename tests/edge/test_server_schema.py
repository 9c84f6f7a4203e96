"""Schemathesis, a property-based API fuzzer, against the main server's own OpenAPI schema:
every operation, with generated valid and invalid inputs (bodies, queries, headers), must
answer without a 5xx, with a documented content type, and with a body that matches the
schema of the status it answered."""

from __future__ import annotations

from typing import Any

import httpx
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_schema_conformance,
)
from schemathesis.core.result import Ok

from tests.support.errors import assert_error
from tests.support.servers import InProcessServer


def not_a_server_error_but_the_asked_deadline(ctx: Any, response: Any, case: Any) -> bool | None:
    """A 5xx is a failure, except the documented 504 of a deadline the case itself set (an
    X-Request-Timeout of 5e-324 s ends as it should)."""
    asked = {k.lower() for k in (case.headers or {})}
    if (
        response.status_code == 504
        and "x-request-timeout" in asked
        and response.json()["error"]["code"] == "deadline_exceeded"
    ):
        return None
    return not_a_server_error(ctx, response, case)


CHECKS = [
    not_a_server_error_but_the_asked_deadline,
    content_type_conformance,
    response_schema_conformance,
]
EXAMPLES = 20


def test_every_operation_answers_within_its_schema(edge_server: InProcessServer) -> None:
    # Each operation's cases are drawn by Hypothesis from schemathesis' strategy for it
    # (schemathesis' own pytest plugin does not run on pytest 9 yet); every failure is
    # collected, so one run names all the operations that fail.
    schema = schemathesis.openapi.from_url(f"{edge_server.url}/openapi.json")
    failures: dict[str, str] = {}
    operations = 0
    for found in schema.get_all_operations():
        assert isinstance(found, Ok), f"the schema has an invalid operation: {found}"
        operation = found.ok()
        operations += 1

        @given(case=operation.as_strategy())
        @settings(
            max_examples=EXAMPLES,
            deadline=None,
            suppress_health_check=list(HealthCheck),
            derandomize=True,  # the same cases on every run: a failure reproduces
            database=None,
        )
        def exercise(case: Any) -> None:
            case.call_and_validate(checks=CHECKS, timeout=120)

        try:
            exercise()
        except Exception as exc:
            failures[f"{operation.method.upper()} {operation.path}"] = str(exc)[:2000]
    assert operations >= 20
    assert failures == {}


def test_a_bad_header_is_named_as_a_header(edge_server: InProcessServer) -> None:
    response = httpx.post(
        f"{edge_server.url}/translate",
        json={"text": "Hello.", "source_lang": "en", "target_lang": "de"},
        headers={"X-Request-Timeout": "null"},
        timeout=60,
    )
    error = assert_error(response, 422, "invalid_request")
    assert error["message"].startswith("the request is not valid: header x-request-timeout")
    assert error["problems"][0]["field"] == "header x-request-timeout"
