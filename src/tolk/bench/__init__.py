"""tolk bench: honest load tests, the case study's architecture journey, and overhead checks.

Everything here talks to servers over HTTP, except where a benchmark deliberately measures the
engine directly (the journey's reference baselines and `tolk bench overhead`).
"""
