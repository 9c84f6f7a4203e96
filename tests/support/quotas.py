"""The character quota of the keys the quota tests make (tests/unit and tests/edge test_quotas*)."""

from __future__ import annotations

QUOTA = 300
