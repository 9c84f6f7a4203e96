"""proxy.yaml: where the upstreams are, how their health is judged, how requests retry."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import AnyHttpUrl, BaseModel, ConfigDict, Field, ValidationError, model_validator

from tolk.config import ConfigError, describe_validation_error, read_yaml_mapping


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class DnsUpstreams(_Strict):
    """A name that resolves to several addresses (a Kubernetes headless service): each
    address is an upstream, re-resolved every `interval` seconds."""

    name: str
    port: int = Field(8000, ge=1, le=65535)
    scheme: str = Field("http", pattern="^https?$")
    interval: float = Field(10.0, gt=0, description="Seconds between resolutions.")


class HealthSettings(_Strict):
    """Active checks of each upstream's /ready."""

    interval: float = Field(2.0, gt=0, description="Seconds between checks.")
    timeout: float = Field(1.0, gt=0, description="Seconds a check may take.")
    rise: int = Field(2, ge=1, description="Consecutive passes to mark a down upstream up.")
    fall: int = Field(2, ge=1, description="Consecutive failures to mark an up upstream down.")
    discovery_interval: float = Field(
        10.0, gt=0, description="Seconds between refreshes of each upstream's /models."
    )
    load_interval: float = Field(
        1.0, gt=0, description="Seconds between scrapes of queue depth and KV cache use."
    )


class BreakerSettings(_Strict):
    """Passive ejection: consecutive failed requests open an upstream's circuit."""

    failures: int = Field(3, ge=1, description="Consecutive failures that open the circuit.")
    open_seconds: float = Field(
        5.0, gt=0, description="Seconds the circuit stays open before one probe is let through."
    )


class RetrySettings(_Strict):
    attempts: int = Field(3, ge=1, description="Tries per request, the first included.")
    backoff: float = Field(
        0.05, ge=0, description="Seconds before the first retry; doubled each time, jittered."
    )


class ProxyConfig(_Strict):
    host: str = "127.0.0.1"
    port: int = Field(8080, ge=0, le=65535)
    upstreams: tuple[AnyHttpUrl, ...] = Field((), description="Static upstream base URLs.")
    dns: tuple[DnsUpstreams, ...] = ()
    health: HealthSettings = HealthSettings()
    breaker: BreakerSettings = BreakerSettings()
    retries: RetrySettings = RetrySettings()
    request_timeout: float = Field(
        60.0, gt=0, description="Deadline per request (a client's X-Request-Timeout may lower it)."
    )
    max_connections: int = Field(1000, ge=1, description="Pooled connections to all upstreams.")
    max_client_connections: int = Field(
        4096,
        ge=1,
        description="Open client connections at most; beyond them new ones are answered 503.",
    )
    header_timeout: float = Field(
        10.0, gt=0, description="Seconds a request's line and headers may take to arrive."
    )
    body_timeout: float = Field(
        30.0, gt=0, description="Seconds a request's body may take to arrive; slower: 408."
    )
    max_body_bytes: int = Field(1 << 20, ge=1)
    max_file_bytes: int = Field(
        10 << 20, ge=1, description="Largest file upload forwarded (the servers' own default)."
    )
    log_level: str = "info"

    @model_validator(mode="after")
    def _some_upstreams(self) -> ProxyConfig:
        if not self.upstreams and not self.dns:
            raise ValueError("give 'upstreams' (URLs) or 'dns' (names to resolve), or both")
        return self

    @property
    def static_urls(self) -> list[str]:
        return [str(u).rstrip("/") for u in self.upstreams]


def load_proxy_config(
    path: Path | None,
    overrides: dict[str, Any] | None = None,
    upstreams: list[str] | None = None,
) -> ProxyConfig:
    """The file's settings (if any), then `overrides` that are set, plus `upstreams`."""
    data = read_yaml_mapping(path, "a mapping of proxy settings") if path else {}
    data.update({k: v for k, v in (overrides or {}).items() if v is not None})
    if upstreams:
        data["upstreams"] = [*(data.get("upstreams") or []), *upstreams]
    try:
        return ProxyConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(describe_validation_error(exc, str(path or "command line"))) from exc
