"""A `tolk bench run`'s results (tolk.bench.report's input): one level of one request."""

from __future__ import annotations

from tolk.bench import report
from tolk.bench.stats import RequestRecord, summarize


def run_results() -> dict[str, object]:
    level = {
        "level": 5.0,
        "summary": summarize([RequestRecord(0.0, 1.0, 200, engine_seconds=0.9)], 1.0).to_json(),
        "engine": {"ttft_s_p50": 0.1, "kv_cache_peak": 0.5, "running_peak": 4.0},
        "timeline": [{"t": 0.0, "running": 1.0, "waiting": 0.0, "kv_cache": 0.1}],
        "records": [{"start": 0.0, "latency": 1.0, "status": 200}],
    }
    return {
        "schema": report.SCHEMA,
        "started_at": "2026-01-01T00:00:00+00:00",
        "url": "u",
        "mode": "closed",
        "workload": {"name": "variable"},
        "generator_ceiling_rps": 500.0,
        "warnings": [],
        "levels": [level],
    }
