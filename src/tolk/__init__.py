"""tolk: a self-hosted, high-throughput machine-translation server on vLLM."""

__version__ = "0.1.0"
