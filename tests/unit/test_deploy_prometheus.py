"""deploy/prometheus and deploy/grafana without a server: the rules shipped in the package
(deploy/ links to them), the Grafana dashboard importable with its datasource and model
variables, the metric selectors found inside every PromQL construct, and promtool (Debian's
binary; skipped without it) checking the rules, running their unit tests (rules_test.yml) and
accepting the single-machine scrape config."""

from __future__ import annotations

from pathlib import Path

import promql_parser
import yaml

from tests.support.prometheus import (
    PROMETHEUS_DIR,
    dashboard,
    needs_prometheus,
    promtool,
    rule_expressions,
    selectors,
)
from tolk.local.fleet import RULES


def test_the_rules_ship_in_the_package_and_deploy_links_to_them() -> None:
    """`tolk fleet` reads the rules from the package (an installed tolk has no deploy/);
    deploy/prometheus/rules.yml, which the docs and promtool's tests name, is the same file."""
    shipped = Path(str(RULES))
    assert shipped.is_file()
    assert (PROMETHEUS_DIR / "rules.yml").resolve() == shipped.resolve()
    assert yaml.safe_load(RULES.read_text("utf-8"))["groups"]


def test_the_dashboard_is_importable_with_datasource_and_model_variables() -> None:
    board = dashboard()
    variables = {v["name"]: v for v in board["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    model = variables["model"]
    assert model["type"] == "query"
    assert model["includeAll"]
    assert model["multi"]
    assert "label_values(" in model["definition"]
    ids = [p["id"] for p in board["panels"]]
    assert len(ids) == len(set(ids))
    cells: set[tuple[int, int]] = set()
    for panel in board["panels"]:
        grid = panel["gridPos"]
        assert grid["x"] + grid["w"] <= 24, panel["title"]
        mine = {
            (grid["y"] + dy, grid["x"] + dx) for dy in range(grid["h"]) for dx in range(grid["w"])
        }
        assert not cells & mine, f"{panel['title']} overlaps another panel"
        cells |= mine
        if panel["type"] == "row":
            continue
        # Every query follows the datasource variable, so the import asks for nothing else.
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            assert target["datasource"] == panel["datasource"]
            promql_parser.parse(target["expr"].replace("$__rate_interval", "1m"))  # valid PromQL
    titles = " | ".join(p["title"] for p in board["panels"]).lower()
    for signal in (
        "requests/s by status",
        "p50 / p95",
        "running vs waiting",
        "kv cache",
        "time to first token",
        "decode",
        "preemptions",
        "gpu utilisation",
        "service overhead",
        "retries",
        "upstream health",
    ):
        assert signal in titles, signal


def test_selectors_are_found_inside_every_construct() -> None:
    found = selectors('max_over_time(a[1m]) == 2 or sum by (x) (rate(b_bucket{le="1"}[5m])) > 0')
    assert found == ["a{}", 'b_bucket{le="1"}']


@needs_prometheus
def test_promtool_checks_the_rules() -> None:
    assert f"SUCCESS: {len(rule_expressions())} rules found" in promtool(
        "check", "rules", "rules.yml"
    )


@needs_prometheus
def test_the_rules_unit_tests_pass() -> None:
    assert "SUCCESS" in promtool("test", "rules", "rules_test.yml")


@needs_prometheus
def test_promtool_accepts_the_single_machine_scrape_config() -> None:
    assert "is valid prometheus config" in promtool("check", "config", "prometheus.yml")
