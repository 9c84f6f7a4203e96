"""A stand-in upstream for the proxy's benchmarks and fault tests: NOT a translation server.

It speaks enough of tolk's API (/translate, /ready, /models, /metrics) for the proxy, and
behaves in exactly the way it is told: it holds each request a fixed time under a fixed
concurrency cap (a server of known capacity, which two real engines on a 2-core machine are
not), or fails in a chosen way (slow, 500s, connection resets, 503 overload or shutting
down) so that the proxy's handling of each fault can be shown. Its "translation" is the
source text reversed.

    python -m tolk.proxy.standin --port 9001 --languages en,de --capacity 8 --hold 0.05

POST /_standin {"mode": "ok" | "slow" | "error" | "reset" | "overload" | "shutdown" |
"unready", "hold": seconds} changes its behaviour; GET /_standin reports what it served.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
from typing import Any

from aiohttp import web

MODES = ("ok", "slow", "error", "reset", "overload", "shutdown", "unready")


class StandIn:
    def __init__(
        self, name: str, languages: list[str], capacity: int, hold: float, max_waiting: int
    ) -> None:
        self.name = name
        self.langs = languages
        self.capacity = asyncio.Semaphore(capacity)
        self.capacity_total = capacity
        self.max_waiting = max_waiting
        self.hold = hold
        self.slow_hold = 2.0
        self.retry_after = 1  # seconds, on its 503 overloaded
        self.mode = "ok"
        self.served = 0
        self.in_flight = 0
        self.running = 0

    def _error(self, status: int, code: str, message: str, **headers: str) -> web.Response:
        body = {"error": {"code": code, "message": f"stand-in {self.name}: {message}"}}
        return web.json_response(body, status=status, headers=headers)

    async def translate(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        if self.mode == "reset":
            # Drop the connection with no response at all, as a crashed server would.
            assert request.transport is not None
            request.transport.abort()
            raise asyncio.CancelledError
        if self.mode == "error":
            return self._error(500, "internal_error", "failing on purpose")
        if self.mode == "shutdown":
            return self._error(503, "shutting_down", "shutting down")
        if self.mode == "overload" or self.in_flight >= self.capacity_total + self.max_waiting:
            retry_after = str(self.retry_after)
            return self._error(503, "overloaded", "overloaded", **{"Retry-After": retry_after})
        data: dict[str, Any] = json.loads(body)
        hold = self.slow_hold if self.mode == "slow" else self.hold
        self.in_flight += 1
        try:
            async with self.capacity:
                self.running += 1
                try:
                    await asyncio.sleep(hold)
                finally:
                    self.running -= 1
        finally:
            self.in_flight -= 1
        self.served += 1
        text = data.get("text", "")
        translation = text[::-1] if isinstance(text, str) else [t[::-1] for t in text]
        return web.json_response(
            {
                "translation": translation,
                "source_lang": data.get("source_lang"),
                "target_lang": data.get("target_lang"),
                "model": self.name,
                "usage": {
                    "prompt_tokens": 0,
                    "completion_tokens": 0,
                    "total_tokens": 0,
                    "characters": 0,
                },
            },
            headers={"Server-Timing": f"engine;dur={hold * 1000:.3f}"},
        )

    async def ready(self, request: web.Request) -> web.Response:
        if self.mode in ("unready", "shutdown"):
            return self._error(503, "shutting_down", "not ready")
        return web.json_response({"status": "ready", "models": {self.name: "ready"}})

    async def languages(self, request: web.Request) -> web.Response:
        pairs = [f"{s}>{t}" for s, t in itertools.permutations(self.langs, 2)]
        return web.json_response(
            {
                "models": [
                    {
                        "model": self.name,
                        "prompt_format": "stand-in",
                        "languages": self.langs,
                        "pairs": pairs,
                        "ready": True,
                        "capacity": self.capacity_total + self.max_waiting,
                    }
                ]
            }
        )

    async def metrics(self, request: web.Request) -> web.Response:
        waiting = self.in_flight - self.running
        text = (
            f'vllm:num_requests_running{{model_name="{self.name}"}} {self.running}\n'
            f'vllm:num_requests_waiting{{model_name="{self.name}"}} {waiting}\n'
            f'vllm:kv_cache_usage_perc{{model_name="{self.name}"}} 0.0\n'
        )
        return web.Response(text=text, content_type="text/plain")

    async def control(self, request: web.Request) -> web.Response:
        if request.method == "POST":
            change = await request.json()
            if change.get("mode") is not None:
                if change["mode"] not in MODES:
                    return web.json_response({"error": f"mode is one of {MODES}"}, status=400)
                self.mode = change["mode"]
            if change.get("hold") is not None:
                self.hold = float(change["hold"])
            if change.get("slow_hold") is not None:
                self.slow_hold = float(change["slow_hold"])
            if change.get("retry_after") is not None:
                self.retry_after = int(change["retry_after"])
        return web.json_response(
            {
                "name": self.name,
                "mode": self.mode,
                "hold": self.hold,
                "served": self.served,
                "in_flight": self.in_flight,
            }
        )

    def app(self) -> web.Application:
        app = web.Application()
        app.add_routes(
            [
                web.post("/translate", self.translate),
                web.get("/ready", self.ready),
                web.get("/health", self.ready),
                web.get("/models", self.languages),
                web.get("/metrics", self.metrics),
                web.get("/_standin", self.control),
                web.post("/_standin", self.control),
            ]
        )
        return app


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--name", default="standin")
    parser.add_argument("--languages", default="en,de")
    parser.add_argument("--capacity", type=int, default=8)
    parser.add_argument("--hold", type=float, default=0.05)
    parser.add_argument("--max-waiting", type=int, default=10_000)
    args = parser.parse_args(argv)
    standin = StandIn(
        args.name, args.languages.split(","), args.capacity, args.hold, args.max_waiting
    )
    web.run_app(
        standin.app(),
        host=args.host,
        port=args.port,
        print=None,
        access_log=None,
        handler_cancellation=True,  # a dropped connection ends the held request, as in tolk
    )


if __name__ == "__main__":
    main()
