"""The `build:` section of the arex configuration (kept light: the CLI imports it for every command)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class BuildConfig(BaseModel):
    """How `build-envs` and `draft-env` treat what a source asks for."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, frozen=True)

    package_sources: bool = False
    """Let a source's requirement lines choose where packages come from (`--index-url`,
    `--extra-index-url`, `--trusted-host`, `--find-links`, `-r <URL>`, `pkg @ <URL>`, `git+...`,
    `-e git+...`). Off: such a line is refused, naming its file and line, since whoever picks the
    index picks the code the build installs; turn it on for a source you trust."""
