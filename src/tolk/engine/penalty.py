"""A repetition penalty applied to the requests that ask for one, and to no other.

vLLM's own `repetition_penalty` is computed for the whole batch of an engine step once any
request in it has a penalty: every running request's prompt padded into one tensor and its
output tokens into another (built on the CPU, from Python lists, at each step), both counted
over the whole vocabulary for every row, and the step then waits for the previous step's
tokens (`vllm/v1/worker/gpu_input_batch.py`, `vllm/v1/sample/ops/penalties.py`). tolk's
retries (and the first tries of a pair whose retries replace them) ask for a penalty, so at
saturation one is nearly always running and every step paid for all 256 rows: tolk's engine
steps took 9.9 ms against 7.0 ms without the penalised requests (docs/benchmarks.md, section
23). This logits processor keeps, for each penalised request only, one row of a mask of the
tokens it has seen (its prompt once, then each new output token) and scales those rows'
logits as vLLM does; the other rows are not read. Written here because vLLM has no
per-request penalty of its own: its logits processors interface is how such a one is added.

A request asks for it with `SamplingParams.extra_args[PENALTY_EXTRA_ARG]` (tolk.engine.engine's
`sampling_params` does, for a model with `engine.penalty_per_request`). vLLM's engine process
loads it by name (`PENALTY_FQCN`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from vllm.v1.sample.logits_processor import BatchUpdate, LogitsProcessor, MoveDirectionality

from tolk.engine.vllm_compat import PENALTY_EXTRA_ARG

if TYPE_CHECKING:
    from vllm import SamplingParams
    from vllm.config import VllmConfig


def requested_penalty(params: SamplingParams) -> float | None:
    """The penalty a request asks this processor for, or None (none, or 1: no change)."""
    value = (params.extra_args or {}).get(PENALTY_EXTRA_ARG)
    if value is None or float(value) == 1.0:
        return None
    return float(value)


@dataclass
class _Row:
    penalty: float
    output: list[int]  # vLLM's own list of the request's output tokens, kept up to date
    seen: int = 0  # how many of them the mask has


class RequestPenalty(LogitsProcessor):
    """vLLM's repetition penalty (HF's: a seen token's logit divided by the penalty when
    positive, multiplied when not), for the rows whose request asks for it."""

    @classmethod
    def validate_params(cls, sampling_params: SamplingParams) -> None:
        value = (sampling_params.extra_args or {}).get(PENALTY_EXTRA_ARG)
        if value is None:
            return
        if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
            raise ValueError(f"{PENALTY_EXTRA_ARG} must be a number above 0, not {value!r}")

    def __init__(self, vllm_config: VllmConfig, device: torch.device, is_pin_memory: bool):
        self._device = device
        self._vocab = int(vllm_config.model_config.get_vocab_size())
        self._max_rows = int(vllm_config.scheduler_config.max_num_seqs)
        self._rows: dict[int, _Row] = {}  # by batch index, which is also the mask's row
        self._mask: torch.Tensor | None = None  # made on the first penalised request
        self._index: torch.Tensor | None = None  # the penalised rows, when they changed
        self._penalties: torch.Tensor | None = None

    def is_argmax_invariant(self) -> bool:
        return False  # it changes which token greedy decoding picks

    def _mask_rows(self) -> torch.Tensor:
        if self._mask is None:
            self._mask = torch.zeros(
                (self._max_rows, self._vocab), dtype=torch.bool, device=self._device
            )
        return self._mask

    def update_state(self, batch_update: BatchUpdate | None) -> None:
        # In vLLM's order: removed, added, moved. A batch index is the mask's row, so a move
        # moves the row along with the request.
        if not batch_update:
            return
        rows = self._rows
        changed = False
        for index in batch_update.removed:
            changed |= rows.pop(index, None) is not None
        for index, params, prompt, output in batch_update.added:
            penalty = requested_penalty(params)
            if penalty is None:
                changed |= rows.pop(index, None) is not None
                continue
            mask = self._mask_rows()
            mask[index].zero_()
            if prompt:
                mask[index, torch.tensor(prompt, dtype=torch.long, device=self._device)] = True
            rows[index] = _Row(penalty, output)
            changed = True
        for a, b, direction in batch_update.moved:
            row_a, row_b = rows.pop(a, None), rows.pop(b, None)
            if row_a is None and row_b is None:
                continue
            changed = True
            if row_a is None and direction != MoveDirectionality.SWAP:
                continue  # b's request was replaced by one without a penalty
            mask = self._mask_rows()
            if direction == MoveDirectionality.SWAP:
                mask[[a, b]] = mask[[b, a]]
                if row_b is not None:
                    rows[a] = row_b
            else:
                mask[b] = mask[a]
            if row_a is not None:
                rows[b] = row_a
        if changed:
            self._index = self._penalties = None

    def apply(self, logits: torch.Tensor) -> torch.Tensor:
        if not self._rows:
            return logits
        mask = self._mask_rows()
        # Each row's new output tokens into its mask. vLLM has put the previous step's
        # tokens into the lists by now (with a custom logits processor it always does); a
        # -1 is one it has not (async scheduling) and is read at the next step.
        at: list[int] = []
        tokens: list[int] = []
        for index, row in self._rows.items():
            output, seen = row.output, row.seen
            while seen < len(output) and output[seen] >= 0:
                at.append(index)
                tokens.append(output[seen])
                seen += 1
            row.seen = seen
        if at:
            device = self._device
            mask[torch.tensor(at, device=device), torch.tensor(tokens, device=device)] = True
        if self._index is None or self._penalties is None:
            order = sorted(self._rows)
            self._index = torch.tensor(order, dtype=torch.long, device=self._device)
            self._penalties = torch.tensor(
                [self._rows[i].penalty for i in order], dtype=logits.dtype, device=self._device
            ).unsqueeze(1)
        penalised = self._index
        vocab = logits.shape[1]
        rows = logits[penalised]
        # As vLLM's own (apply_repetition_penalties_torch), so a penalised request decodes
        # the same tokens either way.
        penalties = torch.where(mask[penalised, :vocab], self._penalties, 1.0)
        scaling = torch.where(rows > 0, 1.0 / penalties, penalties)
        logits[penalised] = rows * scaling
        return logits
