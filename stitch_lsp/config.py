"""One settings model shared by the LSP settings (section `stitch`), the environment and CLI flags.

The LSP client sends camelCase keys (`llmBaseUrl`); Python code uses snake_case. Both are accepted.
Environment variables `STITCH_<SNAKE_NAME>` override defaults, so CI and scripts need no editor.
"""

from __future__ import annotations

import os
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

DEFAULT_NCU_SECTIONS: tuple[str, ...] = (
    "SpeedOfLight",
    "SpeedOfLight_RooflineChart",
    "Occupancy",
    "LaunchStats",
    "MemoryWorkloadAnalysis_Tables",
    "WarpStateStats",
    "SourceCounters",
)


class Settings(BaseModel):
    """Everything the server, the workers and the CLI read."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore")

    # Coder
    coder: Literal["auto", "builtin", "llm"] = Field(
        "auto", description="auto: the LLM when llmBaseUrl is set, else the builtin generator."
    )
    llm_base_url: str | None = Field(
        None, description="OpenAI-compatible endpoint, e.g. http://localhost:8000/v1"
    )
    llm_model: str = Field("gpt-4o", description="Model name sent to the endpoint.")
    llm_api_key_env: str = Field(
        "OPENAI_API_KEY", description="Environment variable that holds the API key."
    )
    llm_temperature: float = Field(0.2, ge=0.0, le=2.0)
    llm_max_tokens: int = Field(8192, ge=256)
    llm_timeout_s: float = Field(120.0, gt=0)

    # Agent loop
    max_attempts: int = Field(5, ge=1, le=50)
    target_speedup: float = Field(1.0, gt=0)
    trajectories_dir: str = Field(
        ".stitch/trajectories", description="Relative to the workspace root."
    )

    # Verifier
    device: str | None = Field(None, description="cuda:K, or None for every visible GPU.")
    trials: int = Field(5, ge=1, le=100)
    timing_trials: int = Field(20, ge=3, le=1000)
    allow_tf32: bool = False
    extra_baselines: bool = Field(
        False,
        description="Also time the reference under a CUDA graph and torch.compile "
        "reduce-overhead (slower verify; `stitch-lsp bench` turns it on).",
    )
    verify_timeout_s: float = Field(600.0, gt=0)
    verify_on_save: bool = False
    python_for_workers: str | None = Field(
        None, description="Python with torch used for GPU workers; default: the server's own."
    )

    # Profiler
    profile_on_save: bool = False
    ncu_path: str = "ncu"
    ncu_sections: list[str] = Field(default_factory=lambda: list(DEFAULT_NCU_SECTIONS))
    ncu_full_set: bool = False

    # Editor
    debounce_ms: int = Field(250, ge=0, le=10_000)
    max_file_bytes: int = Field(5_000_000, ge=1_000)

    @classmethod
    def from_sources(cls, lsp: dict[str, Any] | None = None, **overrides: Any) -> Settings:
        """Defaults < environment < LSP settings < explicit overrides (CLI flags)."""
        data: dict[str, Any] = {}
        for name, field in cls.model_fields.items():
            raw = os.environ.get(f"STITCH_{name.upper()}")
            if raw is not None:
                data[name] = _parse_env(raw, field.annotation)
        if lsp:
            merged = cls.model_validate({**data, **lsp})
            data = merged.model_dump()
        data.update({k: v for k, v in overrides.items() if v is not None})
        return cls.model_validate(data)


def _parse_env(raw: str, annotation: Any) -> Any:
    text = str(annotation)
    if "list" in text:
        return [s.strip() for s in raw.split(",") if s.strip()]
    if "bool" in text:
        return raw.strip().lower() in {"1", "true", "yes", "on"}
    return raw
