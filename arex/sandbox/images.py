"""Images a backend builds from a recipe folder (a Dockerfile and its context): ML envs' dependency
and env images, the docs layer. A backend that can build them returns an `Images` from
`Sandbox.images()`; one that cannot returns None and keeps the image its config names."""

from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path
from typing import BinaryIO


class ImageBuildFailed(Exception):
    """A step of the recipe failed (the recipe's fault, e.g. a requirement that does not install):
    `reason` is the engine's one line, `log_tail` the end of the build's output."""

    def __init__(self, reason: str, log_tail: str):
        super().__init__(reason)
        self.reason, self.log_tail = reason, log_tail


class Images(ABC):
    """Image operations of one backend. Engine failures raise SandboxError."""

    @abstractmethod
    def id(self, name: str) -> str | None:
        """The image's content id, or None if there is no such image."""

    @abstractmethod
    def user(self, name: str) -> str:
        """The user the image's commands run as by default ('' for root)."""

    @abstractmethod
    def build(
        self, context: Path, tag: str, *, network: bool, labels: dict[str, str], buildargs: dict[str, str] | None = None
    ) -> None:
        """Build `context` (a folder with a Dockerfile) as `tag`; ImageBuildFailed if a step fails."""

    @abstractmethod
    def run(
        self,
        image: str,
        command: list[str],
        *,
        files: dict[str, bytes],
        env: dict[str, str],
        timeout: float,
        name: str = "run-once",
    ) -> tuple[int, str, str]:
        """Run `command` (what for: `name`) once as root with network in a throwaway instance of `image`, with `files`
        ({absolute path: bytes}) put there first: (exit code, stdout, stderr). The instance is always
        removed; a run over `timeout` seconds raises TimeoutError."""

    def built_on(self, name: str, kinds: tuple[str, ...]) -> str | None:
        """The id of the arex image of one of `kinds` (its `arex.kind` label) that `name` was built on:
        the one with the most layers that start `name`'s own. None if there is none or the backend
        cannot tell (then a caller does without: the ML leak scan reads every file, unindexed)."""
        return None

    @abstractmethod
    def save(self, name: str, dest: BinaryIO) -> None:
        """Write the image (with its name) to `dest`, for `load` on another machine."""

    @abstractmethod
    def load(self, source: BinaryIO) -> None:
        """Load an image `save` wrote."""
