"""deploy/prometheus and deploy/grafana as the tests read them: the rules, the dashboard, promtool,
and the selectors of an expression (tests/unit and tests/engine test_deploy_prometheus*)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import promql_parser
import pytest
import yaml

from tests.support.paths import REPO
from tolk.local.fleet import RULES

PROMETHEUS_DIR = REPO / "deploy" / "prometheus"


DASHBOARD = REPO / "deploy" / "grafana" / "tolk.json"


PROMETHEUS = shutil.which("prometheus")


PROMTOOL = shutil.which("promtool")


# CI installs Debian's package and sets TOLK_REQUIRE_PROMETHEUS=1: there these tests run or fail.
needs_prometheus = pytest.mark.skipif(
    (PROMETHEUS is None or PROMTOOL is None) and not os.environ.get("TOLK_REQUIRE_PROMETHEUS"),
    reason="no prometheus/promtool on PATH: install Debian's `prometheus` package "
    "(apt-get install prometheus, as .ci/run does) to check the rules and the dashboard",
)


def promtool(*args: str, cwd: Path = PROMETHEUS_DIR) -> str:
    assert PROMTOOL is not None
    done = subprocess.run([PROMTOOL, *args], cwd=cwd, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout + done.stderr


def rule_expressions() -> list[tuple[str, str, bool]]:
    """(name, expression, is an alert) of every rule in rules.yml."""
    groups = yaml.safe_load(RULES.read_text("utf-8"))["groups"]
    return [
        (rule.get("record") or rule["alert"], rule["expr"], "alert" in rule)
        for group in groups
        for rule in group["rules"]
    ]


def dashboard() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return loaded


def selectors(expr: str) -> list[str]:
    """Every metric selector in a PromQL expression (inside functions, ranges, operators)."""
    found: list[str] = []

    def visit(node: Any) -> None:
        if isinstance(node, promql_parser.VectorSelector):
            found.append(str(node))

    promql_parser.walk(promql_parser.parse(expr), visit)
    return found
