"""One settings model shared by the LSP settings (section `stitch`), the environment and CLI flags.

The LSP client sends camelCase keys (`llmBaseUrl`); Python code uses snake_case. Both are accepted.
Environment variables `STITCH_<SNAKE_NAME>` (read with pydantic-settings; lists comma-separated)
override defaults, so CI and scripts need no editor.

Settings that name a program to run, a path to load code from, where code or the API key is
sent, or whether candidate code is confined are `USER_LEVEL_ONLY`: a workspace may not set them,
trusted or not (the server takes them only from its own environment, its command line, or
values the editor vouches come from user-level settings; see `stitch_lsp.server.scopes`).
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model, field_validator
from pydantic.alias_generators import to_camel
from pydantic_settings import BaseSettings, SettingsConfigDict

DEFAULT_NCU_SECTIONS: tuple[str, ...] = (
    "SpeedOfLight",
    "SpeedOfLight_RooflineChart",
    "Occupancy",
    "LaunchStats",
    "MemoryWorkloadAnalysis_Tables",
    "WarpStateStats",
    "SourceCounters",
)
ENV_PREFIX = "STITCH_"
API_KEY_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(_API_KEY|_KEY|_TOKEN)$", re.IGNORECASE)
USER_LEVEL_ONLY: tuple[str, ...] = (
    "llm_base_url",
    "llm_api_key_env",
    "cluster",
    "python_for_workers",
    "ncu_path",
    "sandbox",
)
"""Settings a workspace may not set: the endpoint, which variable's value is sent to it, the
Ray cluster that receives the user's code, the Python the workers run (also probed at start-up),
the ncu binary that is run (and beside which NVIDIA's report reader is imported), and the
sandbox that confines candidate code. A project's own files would otherwise choose what runs."""
NCU_SECTION_NAME = re.compile(r"[^\s\x00-\x1f\x7f\-][^\s\x00-\x1f\x7f]{0,127}")


class SettingsError(ValueError):
    """Settings that do not validate, named the way the user wrote them."""


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
    reference_dtype: Literal["auto", "float32", "float16", "bfloat16"] = Field(
        "auto",
        description="Precision of the problem for the static checks (fp16/bf16 kernels are not "
        "downcasts when the problem is fp16); auto reads it from the reference's get_inputs.",
    )
    verify_timeout_s: float = Field(600.0, gt=0)
    verify_on_save: bool = False
    python_for_workers: str | None = Field(
        None, description="Python with torch used for GPU workers; default: the server's own."
    )
    sandbox: Literal["auto", "bwrap", "none"] = Field(
        "auto",
        description="Where candidate and reference code runs: bwrap (bubblewrap: no network, "
        "read-only system, only the job's scratch folder writable, GPU device nodes bound in); "
        "auto: bwrap where it can start, else refuse LLM output; none: run unconfined "
        "(user level only).",
    )
    cluster: str | None = Field(
        None,
        description="Ray cluster address (ray://head:10001, or head:6379 inside the cluster; "
        "'local' starts one here): verify, profile and generate run there.",
    )

    # Profiler
    profile_on_save: bool = False
    ncu_path: str = "ncu"
    ncu_sections: list[str] = Field(default_factory=lambda: list(DEFAULT_NCU_SECTIONS))
    ncu_full_set: bool = False

    # Editor
    debounce_ms: int = Field(250, ge=0, le=10_000)
    max_file_bytes: int = Field(5_000_000, ge=1_000)

    @field_validator("ncu_sections")
    @classmethod
    def _section_names(cls, value: list[str]) -> list[str]:
        # Each name follows `--section` on ncu's command line: never an option of its own.
        for name in value:
            if not NCU_SECTION_NAME.fullmatch(name):
                raise ValueError(
                    f"{name!r} is not an Nsight Compute section name (1-128 characters, no "
                    "spaces or control characters, not starting with -)"
                )
        return value

    @field_validator("llm_api_key_env")
    @classmethod
    def _looks_like_a_key_variable(cls, value: str) -> str:
        # The variable's value goes to the endpoint as a Bearer token: never HOME or a password.
        if not API_KEY_NAME.match(value):
            raise ValueError(
                f"{value!r} does not look like an API-key variable (a name ending in _API_KEY, "
                "_KEY or _TOKEN); its value would be sent to the endpoint"
            )
        return value

    @classmethod
    def from_sources(
        cls, lsp: dict[str, Any] | None = None, *, strict: bool = True, **overrides: Any
    ) -> Settings:
        """Defaults < environment < LSP settings < explicit overrides (CLI flags).

        A bad environment value raises SettingsError naming the variable; with `strict=False`
        it is left out instead (the server must start whatever the environment holds).
        """
        data, problems = environment_values()
        if problems and strict:
            raise SettingsError("; ".join(problems))
        if lsp:
            merged = cls.model_validate({**data, **lsp})
            data = merged.model_dump()
        data.update({k: v for k, v in overrides.items() if v is not None})
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            if lsp:
                raise  # the server drops bad LSP values one by one
            raise SettingsError(_describe(exc, overrides)) from None


def _is_list(name: str) -> bool:
    return "list" in str(Settings.model_fields[name].annotation)


class _EnvironmentBase(BaseSettings):
    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="ignore", case_sensitive=False)


_ENV_FIELDS: dict[str, Any] = {name: (str | None, None) for name in Settings.model_fields}
# Every Settings field, as the text of its STITCH_* variable; Settings validates the values.
StitchEnvironment: type[BaseSettings] = create_model(
    "StitchEnvironment", __base__=_EnvironmentBase, **_ENV_FIELDS
)


def environment_values() -> tuple[dict[str, Any], list[str]]:
    """The STITCH_* variables that are set, each validated on its own: (values, problems).

    Lists are comma-separated (`STITCH_NCU_SECTIONS=SpeedOfLight,Occupancy`); booleans take
    1/0, true/false, yes/no, on/off."""
    values: dict[str, Any] = {}
    problems: list[str] = []
    for name, text in StitchEnvironment().model_dump(exclude_none=True).items():
        value: Any = [s.strip() for s in text.split(",") if s.strip()] if _is_list(name) else text
        try:
            Settings.model_validate({name: value})
        except ValidationError as exc:
            msg = exc.errors()[0]["msg"]
            problems.append(f"{ENV_PREFIX}{name.upper()}={text!r}: {msg}")
            continue
        values[name] = value
    return values, problems


def _describe(exc: ValidationError, overrides: dict[str, Any]) -> str:
    parts = []
    for e in exc.errors():
        name = str(e["loc"][0]) if e.get("loc") else "?"
        flag = f"--{name.replace('_', '-')}"
        where = flag if name in overrides else f"{ENV_PREFIX}{name.upper()}"
        parts.append(f"{where}: {e['msg']}")
    return "; ".join(parts)
