"""`arex push`: upload an export folder (dataset card + parquet shards + checksums.json) to the Hub.

The folder is checked locally first (card front matter, shards present, shards match
checksums.json, each shard a readable parquet file) so that a broken or half-written export never
reaches the Hub, and so that these mistakes are reported before any network call. Everything is
then uploaded in a single
commit: a dataset revision either has all the shards of one export or none of them.
"""

from __future__ import annotations

import importlib
import json
import os
import traceback
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import yaml
from huggingface_hub import CommitOperationAdd, HfApi, constants, get_token
from huggingface_hub.utils import (
    HfHubHTTPError,  # also importable there in huggingface_hub < 0.24
)
from pydantic import BaseModel

from arex.errors import UserInputError
from arex.hashing import file_sha256


class PushError(UserInputError):
    """A push that cannot proceed or failed (no token, an incomplete export folder, the Hub refused);
    the message says what is wrong and what to do."""


class PushedFile(BaseModel):
    path: str  # path inside the repo (POSIX), same as inside the export folder
    size: int


class PushResult(BaseModel):
    repo_id: str
    repo_url: str
    revision: str
    commit_id: str
    commit_url: str
    files: list[PushedFile]

    @property
    def total_bytes(self) -> int:
        return sum(f.size for f in self.files)


def push(
    folder: Path,
    repo_id: str,
    *,
    token: str | None = None,
    endpoint: str | None = None,
    private: bool = False,
    revision: str = "main",
    commit_message: str | None = None,
) -> PushResult:
    """Create the dataset repo `repo_id` (if needed) and upload `folder` to it in one commit."""
    folder = Path(folder)
    files = check_export(folder)
    token = resolve_token(token)
    # HfApi's default endpoint is read from HF_ENDPOINT once, when huggingface_hub is imported;
    # reading the variable here too honours a value set later (tests, a CLI wrapper).
    endpoint = (endpoint or os.environ.get("HF_ENDPOINT") or constants.ENDPOINT).rstrip("/")
    api = HfApi(endpoint=endpoint, token=token)
    message = commit_message or f"Upload arex export ({len(files)} files)"
    operations = [CommitOperationAdd(path_in_repo=rel, path_or_fileobj=str(folder / rel)) for rel in files]
    try:
        repo_url = api.create_repo(repo_id, repo_type="dataset", private=private, exist_ok=True)
        if revision != constants.DEFAULT_REVISION:
            # The commit endpoint does not create branches; a missing one would be a 404.
            api.create_branch(repo_id, repo_type="dataset", branch=revision, exist_ok=True)
        # create_commit rather than upload_folder: with hf_xet installed, upload_folder may split a
        # folder over several commits, and we want the exact file list we validated, no more.
        info = api.create_commit(
            repo_id,
            operations,
            commit_message=message,
            repo_type="dataset",
            revision=revision,
        )
    except Exception as exc:
        error = _hub_error(exc, endpoint, repo_id)
        if error is None:
            raise
        raise error from exc
    return PushResult(
        repo_id=repo_id,
        repo_url=str(repo_url),
        revision=revision,
        commit_id=info.oid,
        commit_url=info.commit_url,
        files=[PushedFile(path=rel, size=(folder / rel).stat().st_size) for rel in files],
    )


def plan(folder: Path) -> list[PushedFile]:
    """`arex push --dry-run`: the folder checked as a push checks it, and the files a push would
    upload; no token is read and nothing is sent."""
    folder = Path(folder)
    return [PushedFile(path=rel, size=(folder / rel).stat().st_size) for rel in check_export(folder)]


def resolve_token(token: str | None) -> str:
    """The token argument, else HF_TOKEN, else the token saved by `hf auth login`."""
    token = (token or "").strip() or os.environ.get("HF_TOKEN", "").strip()
    if not token:
        try:
            token = (get_token() or "").strip()
        except Exception as exc:  # OIDC exchange (HF_OIDC_RESOURCE) raises instead of returning None
            raise PushError(f"Could not get a Hugging Face token ({exc}); set HF_TOKEN or pass --token.") from exc
    if not token:
        raise PushError(
            "No Hugging Face token found; set HF_TOKEN, pass --token, or run `hf auth login` with a write token."
        )
    return token


def check_export(folder: Path) -> list[str]:
    """Validate an export folder and return the files to upload (sorted POSIX paths). Hidden files are
    skipped, the `.arex-export` marker too: it guards the local folder (which files arex may replace)
    and means nothing on the Hub."""
    if not folder.is_dir():
        raise PushError(f"Export folder {folder} does not exist; run `arex export` first.")
    readme = folder / "README.md"
    if not readme.is_file():
        raise PushError(f"{folder} has no README.md (the dataset card); run `arex export` to write it.")
    _check_front_matter(readme)
    files = sorted(
        p.relative_to(folder).as_posix()
        for p in folder.rglob("*")
        # Hidden files and folders (.git, .cache, editor swap files, the export marker) are not part of the dataset.
        if p.is_file() and not any(part.startswith(".") for part in p.relative_to(folder).parts)
    )
    shards = [f for f in files if f.endswith(".parquet")]
    if not shards:
        raise PushError(f"{folder} has no .parquet shards; run `arex export` first.")
    listed = _read_checksums(folder)
    for rel, expected in listed.items():
        path = folder / rel
        if not path.is_file():
            raise PushError(f"{rel} is listed in checksums.json but missing from {folder}; re-run `arex export`.")
        if file_sha256(path) != expected:
            raise PushError(
                f"{rel} does not match its sha256 in checksums.json (changed or truncated); re-run `arex export`."
            )
    # A shard nobody checksummed is most likely left over from an earlier export.
    unlisted = [s for s in shards if s not in listed]
    if unlisted:
        raise PushError(
            f"{unlisted[0]} is not listed in checksums.json (a stale shard?); re-run `arex export` into a clean folder."
        )
    for rel in shards:  # a checksum only says the file is the one listed, not that it is parquet
        _check_parquet(folder, rel)
    return files


def _check_parquet(folder: Path, rel: str) -> None:
    """PushError unless the shard starts and ends with parquet's magic and its footer (metadata) reads."""
    path = folder / rel
    try:
        with path.open("rb") as handle:
            head = handle.read(4)
        metadata = pq.read_metadata(path)
        if head != b"PAR1":
            raise ValueError("no parquet magic at its start")
        metadata.schema.to_arrow_schema()
    except (pa.ArrowException, OSError, ValueError) as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise PushError(f"{rel} in {folder} is not a readable parquet file ({reason}); re-run `arex export`.") from None


def _check_front_matter(readme: Path) -> None:
    text = readme.read_text(encoding="utf-8", errors="replace")
    lines = text.splitlines()
    # The Hub reads card metadata only from a YAML block opened by '---' on the very first line.
    end = next((i for i, line in enumerate(lines[1:], 1) if line.strip() == "---"), None)
    if not lines or lines[0].strip() != "---" or end is None:
        raise PushError(
            f"{readme} has no YAML front matter (a block between '---' lines at the top); re-run `arex export`."
        )
    try:
        meta = yaml.safe_load("\n".join(lines[1:end]))
    except yaml.YAMLError as exc:
        raise PushError(f"The YAML front matter of {readme} does not parse ({exc}); re-run `arex export`.") from exc
    if not isinstance(meta, dict):
        raise PushError(f"The YAML front matter of {readme} is not a mapping of keys; re-run `arex export`.")


def _read_checksums(folder: Path) -> dict[str, str]:
    """checksums.json as {relative path: sha256 hex}.

    Accepted shapes: {"path": "hex"}, {"path": {"sha256": "hex", ...}}, either one wrapped in
    {"files": ...}, or a list of {"path": ..., "sha256": ...} (the export's format is not fixed yet).
    """
    path = folder / "checksums.json"
    if not path.is_file():
        raise PushError(f"{folder} has no checksums.json; run `arex export` first.")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise PushError(f"{path} is not valid JSON ({exc}); re-run `arex export`.") from exc
    if isinstance(data, dict) and isinstance(data.get("files"), (dict, list)):
        data = data["files"]
    if isinstance(data, list):
        data = {e.get("path"): e for e in data if isinstance(e, dict)}
    if not isinstance(data, dict):
        raise PushError(f"{path} is not a mapping of file paths to sha256 digests; re-run `arex export`.")
    out: dict[str, str] = {}
    for rel, value in data.items():
        digest = value.get("sha256") if isinstance(value, dict) else value
        if not isinstance(rel, str) or not isinstance(digest, str) or len(digest) != 64:
            raise PushError(f"{path} has a malformed entry for {rel!r} (expected a sha256 hex); re-run `arex export`.")
        # An entry must name a file inside the folder, never ../something.
        if Path(rel).is_absolute() or ".." in Path(rel).parts:
            raise PushError(f"{path} lists {rel!r}, which is outside the export folder; re-run `arex export`.")
        out[Path(rel).as_posix()] = digest.lower()
    return out


def _transport_errors() -> tuple[type[BaseException], ...]:
    """Connection-level error classes: huggingface_hub 2.x uses httpx2, 1.x httpx, 0.x requests,
    and none of them derives its transport errors from the builtin ConnectionError."""
    kinds: list[type[BaseException]] = [ConnectionError, TimeoutError]
    for module, name in (("httpx2", "TransportError"), ("httpx", "TransportError"), ("requests", "RequestException")):
        try:
            kinds.append(getattr(importlib.import_module(module), name))
        except (ImportError, AttributeError):
            pass
    return tuple(kinds)


def _raised_in_xet(exc: BaseException) -> bool:
    # hf_xet (Rust) raises plain ConnectionErrors, even for HTTP statuses; only the stack tells them apart.
    return any("xet" in frame.name or "xet" in frame.filename for frame in traceback.extract_tb(exc.__traceback__))


def _hub_error(exc: BaseException, endpoint: str, repo_id: str) -> PushError | None:
    """Translate a huggingface_hub failure into a one-sentence PushError; None for anything else."""
    # LFS uploads wrap the HTTP error in a RuntimeError, so look down the cause chain.
    chain: list[BaseException] = []
    e: BaseException | None = exc
    while e is not None and e not in chain:
        chain.append(e)
        e = e.__cause__ or e.__context__
    http = next((e for e in chain if isinstance(e, HfHubHTTPError)), None)
    if http is not None and http.response is not None:
        status = http.response.status_code
        detail = (http.server_message or "").strip().splitlines()
        detail_text = f": {detail[0]}" if detail else ""
        if status == 401:
            return PushError(
                f"The Hub at {endpoint} rejected the token (HTTP 401{detail_text}); "
                "set HF_TOKEN or pass --token with a valid write token."
            )
        if status == 403:
            return PushError(
                f"The Hub at {endpoint} refused to write to {repo_id} (HTTP 403{detail_text}); "
                "use a token with write access to that namespace."
            )
        if status == 404:
            return PushError(
                f"The Hub at {endpoint} did not find {repo_id} (HTTP 404{detail_text}); "
                "check the repo id and that the token may write to it."
            )
        return PushError(
            f"The Hub at {endpoint} failed while pushing {repo_id} (HTTP {status}{detail_text}); "
            "re-run `arex push` later (a re-run uploads only what is missing)."
        )
    transport = next((e for e in chain if isinstance(e, _transport_errors())), None)
    if transport is not None and _raised_in_xet(exc):
        return PushError(
            f"The Xet upload to the Hub at {endpoint} failed ({type(transport).__name__}: {transport}); "
            "retry later, or set HF_HUB_DISABLE_XET=1 to upload through plain LFS instead."
        )
    if transport is not None:
        return PushError(
            f"Could not reach the Hub at {endpoint} ({type(transport).__name__}: {transport}); "
            "check the network, HF_ENDPOINT or --endpoint."
        )
    if isinstance(exc, ValueError) and "metadata in README.md" in str(exc):
        # Raised by the Hub's validate-yaml check of the dataset card.
        first = str(exc).strip().splitlines()
        return PushError(
            f"The Hub at {endpoint} rejected the metadata in README.md ({' '.join(first[1:2]) or first[0]}); "
            "fix the card's front matter (re-run `arex export`)."
        )
    return None
