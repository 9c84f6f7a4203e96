"""Starting tolk's own processes on this machine, on loopback: `tolk serve`, `tolk proxy`,
the proxy's stand-in upstreams (processes), and a whole fleet with Prometheus (fleet).

Used by `tolk fleet`, `tolk translate --config`, the benchmarks and the tests; nothing here
serves traffic itself.
"""

from pathlib import Path

# The demo configuration, relative to a checkout (make serve's and the benchmarks' default).
DEMO_CONFIG = Path("configs/demo.yaml")
