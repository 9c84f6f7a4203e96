"""What building one segment's engine request costs (`plan_job`: the chat template and the
prompt's token ids) with the shipped real-model config, two examples in the prompt, on the
2,400 FLORES sentences of section 13 (1,200 of them), best of three passes; and a digest of
every job (prompt ids, source tokens, budget), to show two checkouts build the same ones
(docs/benchmarks.md §14, §22).

    .venv/bin/python scripts/plan-job-cost.py                        # this checkout
    PYTHONPATH=/tmp/old/src .venv/bin/python scripts/plan-job-cost.py  # another
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
from pathlib import Path

from transformers import AutoTokenizer

from tolk.budget import Budgets, counting
from tolk.config import load_config
from tolk.languages import lang
from tolk.translation.jobs import plan_job

DATA = Path(__file__).resolve().parents[1].parent / "shared/quality/flores101"
PAIRS = [("en", "de"), ("en", "fr"), ("en", "es"), ("en", "zh"), ("en", "ne"), ("de", "en")]
FILES = {"en": "eng", "de": "deu", "fr": "fra", "es": "spa", "zh": "cmn_Hans", "ne": "npi"}


def main() -> None:
    settings = load_config(Path("configs/gpu-qwen2.5-coder-0.5b.yaml")).models[0]
    tokenizer = AutoTokenizer.from_pretrained("models/qwen2.5-coder-0.5b-instruct")
    lines = {
        tag: (DATA / f"{name}.txt").read_text(encoding="utf-8").splitlines()
        for tag, name in FILES.items()
    }
    items = [(lines[s][i], s, t) for i in range(200) for s, t in PAIRS]

    budgets = Budgets(counting(tokenizer), settings.max_tokens_ratio)

    def one_pass() -> tuple[float, list[tuple[list[int], int, int]]]:
        began = time.perf_counter()
        jobs = [
            plan_job(settings, tokenizer, 4096, n, text, (lang(s), lang(t)), budgets)
            for n, (text, s, t) in enumerate(items)
        ]
        elapsed = time.perf_counter() - began
        return elapsed / len(items) * 1e3, [
            (j.prompt_ids, j.source_tokens, j.max_tokens) for j in jobs
        ]

    one_pass()  # warm: templates compiled, examples chosen
    passes = [one_pass() for _ in range(3)]
    digest = hashlib.sha256(repr(passes[0][1]).encode()).hexdigest()[:16]
    # The digest covers each job's prompt ids, source tokens and output budget.
    result = {"ms_per_segment": [round(p[0], 3) for p in passes], "jobs": digest}
    sys.stdout.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
