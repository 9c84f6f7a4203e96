"""Who is calling, and whether they may: API keys, request rates and character quotas.

One place for all three APIs (tolk's, DeepL's, LibreTranslate's); each reads the key where
its clients send it and hands it here. Without keys in the store and with `require_key`
off (the default), everyone is anonymous and nothing is limited. Once a store has keys, a
key that is sent must be valid: a typo is a 403, never a silent fall-back to anonymous.

Rates use the `limits` library's moving window (the one flask-limiter and so LibreTranslate
use), in this process's memory: a key's rate holds per server. Quotas are characters of
source text per period, counted in the key store (tolk.keys) after each translation that
succeeded; the check is made before, so concurrent requests can overshoot by one request.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from functools import lru_cache

import limits
from limits.storage import MemoryStorage
from limits.strategies import MovingWindowRateLimiter

from tolk.errors import InvalidKey, KeyRequired, QuotaExceeded, RateLimited
from tolk.keys import Key, KeyStore, Period, period_start
from tolk.wire.bodies import check_text

# What /v2/usage reports as the limit of a caller without a quota: DeepL Pro's own
# "unlimited" figure, so that clients' `any_limit_reached` stays false.
UNLIMITED = 1_000_000_000_000


@dataclass(frozen=True)
class Caller:
    key: Key  # ANONYMOUS when no key was sent

    @property
    def owner(self) -> str:
        return self.key.id


@lru_cache(maxsize=256)
def _rate(text: str) -> limits.RateLimitItem:
    return limits.parse(text)


class Access:
    def __init__(
        self, store: KeyStore, require_key: bool = False, anonymous_rate: str | None = None
    ) -> None:
        self.store = store
        self.require_key = require_key
        self.anonymous = Key("anonymous", "anonymous", None, "month", anonymous_rate, 0.0)
        self._limiter = MovingWindowRateLimiter(MemoryStorage())
        self._anonymous_used: dict[str, int] = {}

    def caller(self, secret: str | None) -> Caller:
        """The caller a request's key names (None or "" is no key)."""
        if not secret:
            if self.require_key:
                raise KeyRequired(
                    "this server requires an API key; ask its operator for one "
                    "(created with `tolk keys add`)"
                )
            return Caller(self.anonymous)
        check_text(secret, "the API key")  # read_params refuses it first; hashing would fail
        key = self.store.lookup(secret)
        if key is None:
            if not self.require_key and not self.store.has_keys():
                return Caller(self.anonymous)  # no keys exist: any key is as good as none
            raise InvalidKey("the API key is not valid (unknown or revoked); check it")
        return Caller(key)

    def admit(self, caller: Caller, characters: int) -> None:
        """Refuse a request over the caller's rate or remaining quota."""
        key = caller.key
        if key.rate is not None:
            item = _rate(key.rate)
            if not self._limiter.hit(item, key.id):
                reset, _ = self._limiter.get_window_stats(item, key.id)
                raise RateLimited(
                    f"too many requests for this key (its rate is {key.rate}); slow down",
                    retry_after=max(0.0, reset - time.time()),
                    rate=key.rate,
                )
        if key.character_limit is not None:
            used = self.store.used(key)
            if used + characters > key.character_limit:
                raise QuotaExceeded(
                    f"this key's quota of {key.character_limit} characters per {key.period} is "
                    f"spent ({used} used; this request needs {characters}); it resets at the "
                    "start of the next period",
                    character_count=used,
                    character_limit=key.character_limit,
                )

    def record(self, caller: Caller, characters: int) -> None:
        if caller.key is self.anonymous:
            start = period_start("month")
            self._anonymous_used[start] = self._anonymous_used.get(start, 0) + characters
        else:
            self.store.record(caller.key, characters)

    def usage(self, caller: Caller) -> tuple[int, int, Period]:
        """(characters used this period, the limit, the period)."""
        key = caller.key
        if key is self.anonymous:
            return self._anonymous_used.get(period_start("month"), 0), UNLIMITED, "month"
        return self.store.used(key), key.character_limit or UNLIMITED, key.period
