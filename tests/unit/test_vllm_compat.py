"""The vLLM version seam and tolk's own admission control, on plain data: vLLM 0.26 (the GPU
kit) and 0.32 (the CPU suite) differ in which engine settings exist, and admission must not
depend on either."""

from __future__ import annotations

import dataclasses

import pytest

from tolk.config import build_config
from tolk.engine.admission import Admission
from tolk.engine.engine import engine_args
from tolk.engine.vllm_compat import UnsupportedEngineArgs, VllmRelease

# Fields that differ between the two releases (read from each release's AsyncEngineArgs).
ONLY_0_32 = {"max_num_queued_reqs", "max_num_queued_tokens", "max_num_active_seqs"}
ONLY_0_26 = {"calculate_kv_scales", "max_num_partial_prefills", "override_attention_dtype"}


def _installed_fields() -> frozenset[str]:
    from vllm.engine.arg_utils import AsyncEngineArgs

    return frozenset(f.name for f in dataclasses.fields(AsyncEngineArgs))


def _release_0_26() -> VllmRelease:
    """0.26's fields: the installed (0.32) ones less 0.32's additions, plus 0.26's own."""
    return VllmRelease("0.26.0", (_installed_fields() - ONLY_0_32) | ONLY_0_26)


def _model(engine: dict[str, object]) -> object:
    data = {
        "models": [{"name": "m", "path": "/models/m", "languages": ["en", "de"], "engine": engine}]
    }
    return build_config(data, environ={}).models[0]


def test_installed_release_is_read_from_vllm() -> None:
    release = VllmRelease.installed()
    assert release.version_tuple == (0, 32)
    assert release.tested
    assert release.accepts("max_num_seqs")
    assert release.accepts("max_num_queued_reqs")


@pytest.mark.parametrize(
    "release", [VllmRelease.installed(), _release_0_26()], ids=lambda r: r.version
)
def test_tolks_engine_args_are_accepted_by_both_releases(release: VllmRelease) -> None:
    for cpu in (True, False):
        args = engine_args(_model({"kv_cache_memory_bytes": "1GiB"}), cpu=cpu)  # type: ignore[arg-type]
        assert release.check_engine_args(args, "m") == args


def test_a_field_the_release_lacks_is_refused_by_name() -> None:
    args = engine_args(_model({"extra_args": {"max_num_queued_tokens": 4096}}), cpu=True)  # type: ignore[arg-type]
    assert VllmRelease.installed().check_engine_args(args, "m")["max_num_queued_tokens"] == 4096
    with pytest.raises(UnsupportedEngineArgs) as refused:
        _release_0_26().check_engine_args(args, "m")
    assert "vLLM 0.26.0 has no engine setting 'max_num_queued_tokens'" in str(refused.value)
    assert "model 'm'" in str(refused.value)


def test_version_tuple_and_tested_releases() -> None:
    assert VllmRelease("0.26.0", frozenset()).version_tuple == (0, 26)
    assert VllmRelease("0.32.0+cpu", frozenset()).tested
    assert not VllmRelease("0.20.1", frozenset()).tested
    assert VllmRelease("dev", frozenset()).version_tuple == (0, 0)


def test_admission_counts_texts_against_capacity() -> None:
    admission = Admission(capacity=40)  # max_num_seqs 16 + max_waiting 24
    assert admission.try_acquire(30)
    assert admission.try_acquire(10)  # exactly full
    assert not admission.try_acquire(1)
    assert admission.held == 40
    assert admission.refused == 1
    admission.release(10)
    assert not admission.try_acquire(11)  # a list is admitted whole or not at all
    assert admission.held == 30
    assert admission.try_acquire(10)
    admission.release(40)
    assert admission.held == 0


def test_admission_refuses_a_request_larger_than_the_capacity_even_when_idle() -> None:
    admission = Admission(capacity=40)
    assert not admission.try_acquire(41)
    assert admission.held == 0
    assert admission.try_acquire(0)
    with pytest.raises(ValueError, match="only 0 are held"):
        admission.release(1)


def test_a_request_larger_than_the_capacity_is_fed_through_one_batch() -> None:
    admission = Admission(capacity=40, batch=16)  # max_num_seqs 16 + max_waiting 24
    assert admission.window(30) == 30  # within capacity: all at once
    assert admission.admit(300) == 16  # a long document: one batch's worth
    assert admission.held == 16
    assert admission.admit(30) is None  # whole or not at all: 16 + 30 > 40
    assert admission.held == 16
    assert admission.admit(24) == 24
    assert admission.admit(300) is None  # even its window does not fit now
    admission.release(40)
    assert admission.held == 0
