"""Who is calling, and whether they may: API keys, request rates and character quotas.

One place for all three APIs (tolk's, DeepL's, LibreTranslate's); each reads the key where
its clients send it and hands it here. Without keys in the store and with `require_key`
off (the default), everyone is anonymous and nothing is limited. Once a store has keys, a
key that is sent must be valid: a typo is a 403, never a silent fall-back to anonymous.

Rates use the `limits` library's moving window (the one flask-limiter and so LibreTranslate
use), in this process's memory: a key's rate holds per server. Quotas are characters of
source text per period, kept in the key store (tolk.store.keys). A request's characters are
reserved when it is admitted: it is admitted only if the characters used, those reserved by
the key's requests in flight and its own fit the quota (one step, so concurrent requests
cannot pass it together); when it ends, what it was charged becomes usage and the rest is
released, and a request that failed or was cancelled releases all of it. On one server a
quota is never passed; servers sharing a store see each other's usage within a sync
(docs/security.md, "Quotas and the segment cache").
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from functools import lru_cache

import limits
from limits.storage import MemoryStorage
from limits.strategies import MovingWindowRateLimiter

from tolk.errors import InvalidKey, KeyRequired, QuotaExceeded, RateLimited
from tolk.store.keys import Key, KeyStore, Period, Reservation, period_start
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

    def admit(self, caller: Caller, characters: int) -> Reservation:
        """Refuse a request over the caller's rate, else reserve its characters of the
        caller's quota (`reserve`); the caller settles the reservation when it ends."""
        self.check_rate(caller)
        return self.reserve(caller, characters)

    def check_rate(self, caller: Caller) -> None:
        """Count a request against the caller's rate; refuse it over the rate."""
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

    def reserve(self, caller: Caller, characters: int) -> Reservation:
        """Hold `characters` of the caller's quota for a request in flight, or refuse it:
        admitted only if used + reserved + characters <= the quota."""
        key = caller.key
        if key is self.anonymous:
            return Reservation(key, period_start("month"), characters)
        held = self.store.reserve(key, characters)
        if held is None:
            used, reserved = self.store.used(key), self.store.reserved(key)
            in_flight = f", {reserved} held by requests in flight" if reserved else ""
            raise QuotaExceeded(
                f"this key's quota of {key.character_limit} characters per {key.period} is "
                f"spent ({used} used{in_flight}; this request needs {characters}); it resets "
                "at the start of the next period",
                character_count=used,
                character_limit=key.character_limit,
            )
        return held

    def settle(self, held: Reservation, charged: int | None) -> None:
        """End a request's reservation: `charged` characters counted as used (None: it
        failed or was cancelled, nothing counted), the rest released. Once per
        reservation; a second call does nothing."""
        if held.key is not self.anonymous:
            self.store.settle(held, charged)
        elif not held.settled:
            held.settled = True
            if charged is not None:
                start = held.period_start
                self._anonymous_used[start] = self._anonymous_used.get(start, 0) + charged

    def usage(self, caller: Caller) -> tuple[int, int, Period]:
        """(characters used this period, the limit, the period)."""
        key = caller.key
        if key is self.anonymous:
            return self._anonymous_used.get(period_start("month"), 0), UNLIMITED, "month"
        return self.store.used(key), key.character_limit or UNLIMITED, key.period
