"""What every tolk HTTP process speaks, the server and the proxy alike: the one error shape
per API (errors), which API a path belongs to (endpoints), the APIs' language codes (codes),
ASGI helpers (asgi) and Prometheus' buckets and text (prometheus).

It imports nothing of tolk's processes (server, proxy, bench): they stand on it.
The rules are checked by `lint-imports` in `make test` (pyproject's [tool.importlinter]).
"""
