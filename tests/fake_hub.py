"""A local stand-in for the Hugging Face Hub API, enough for `create_repo` + `create_commit`/`upload_folder`.

The real Hub is not reachable from the test machines, so this server answers, on 127.0.0.1 only,
exactly the requests huggingface_hub 2.4.0 makes for a dataset push over the legacy (non-Xet)
path, and records what was committed so tests can compare bytes:

    POST /api/repos/create                                  create a repo (409 if it exists)
    POST /api/validate-yaml                                 README.md metadata check (create_commit)
    POST /api/{type}s/{ns}/{name}/preupload/{rev}           per file: "lfs" or "regular", remote oid
    POST /{prefix}{ns}/{name}.git/info/lfs/objects/batch    LFS batch API, "basic" transfer only
    PUT  /__lfs/{type}/{ns}/{name}/{oid}?sig=...            LFS object upload ("presigned": no auth header)
    POST /__lfs-verify/{type}/{ns}/{name}                   LFS verify
    POST /api/{type}s/{ns}/{name}/commit/{rev}              NDJSON commit (base64 files, LFS pointers)
    POST /api/{type}s/{ns}/{name}/branch/{branch}           create a branch (push to revision != main)
    GET  /api/{type}s/{ns}/{name}[/revision/{rev}]          repo_info (no-change re-push, exist_ok on 401/403)
    GET  /api/{type}s/{ns}/{name}/xet-write-token/{rev}     refused with 501: Xet is not implemented

Xet: huggingface_hub 2.4.0 picks Xet purely client-side (hf_xet installed and HF_HUB_DISABLE_XET
unset); nothing the server answers can steer it back to LFS. Use `isolate_hf_client()` in tests,
which turns Xet off and points the client at this server.
"""

from __future__ import annotations

import base64
import fnmatch
import hashlib
import json
import re
import secrets
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

import yaml

LFS_SIZE_THRESHOLD = 10 * 1024 * 1024  # the Hub stores any file above 10 MB in LFS

# The .gitattributes the Hub writes in a new repo's initial commit (abridged): LFS by extension.
DEFAULT_GITATTRIBUTES = (
    "*.7z filter=lfs diff=lfs merge=lfs -text\n"
    "*.arrow filter=lfs diff=lfs merge=lfs -text\n"
    "*.bin filter=lfs diff=lfs merge=lfs -text\n"
    "*.gz filter=lfs diff=lfs merge=lfs -text\n"
    "*.parquet filter=lfs diff=lfs merge=lfs -text\n"
    "*.safetensors filter=lfs diff=lfs merge=lfs -text\n"
    "*.zip filter=lfs diff=lfs merge=lfs -text\n"
    "*.zst filter=lfs diff=lfs merge=lfs -text\n"
)

_TYPES = {"models": "model", "datasets": "dataset", "spaces": "space"}
_URL_PREFIX = {"model": "", "dataset": "datasets/", "space": "spaces/"}


@dataclass
class Commit:
    oid: str
    message: str
    description: str
    parent: str | None
    files: dict[str, bytes]  # full tree after this commit
    lfs_paths: frozenset[str] = frozenset()  # files committed as LFS pointers in this commit


@dataclass
class Repo:
    repo_id: str
    repo_type: str
    private: bool
    branches: dict[str, list[Commit]] = field(default_factory=dict)
    lfs_objects: dict[str, bytes] = field(default_factory=dict)  # sha256 hex -> bytes

    def head(self, revision: str) -> Commit | None:
        commits = self.branches.get(revision)
        return commits[-1] if commits else None


@dataclass
class Request:
    method: str
    path: str
    name: str  # route name, the key used by fail_next
    status: int


class _HTTPError(Exception):
    def __init__(self, status: int, message: str, code: str | None = None):
        super().__init__(message)
        self.status, self.message, self.code = status, message, code


class FakeHub:
    """`with FakeHub() as hub:` serves on `hub.endpoint` (http://127.0.0.1:<free port>).

    tokens: accepted bearer tokens; None accepts any non-empty token.
    fail_next: {route name: HTTP status} answered once (after authentication) instead of the
    real response; route names are those in `hub.requests` (e.g. "commit", "preupload", "lfs_batch").
    """

    def __init__(self, tokens: set[str] | list[str] | None = None, fail_next: dict[str, int] | None = None):
        self.tokens = set(tokens) if tokens is not None else None
        self.fail_next: dict[str, int] = dict(fail_next or {})
        self.requests: list[Request] = []
        self._repos: dict[tuple[str, str], Repo] = {}
        self._lock = threading.Lock()
        self._sig = secrets.token_hex(16)  # stands in for an S3 presigned-URL signature
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.endpoint = ""

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> FakeHub:
        hub = self

        class Handler(_Handler):
            fake = hub

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.endpoint = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), name="fake-hub", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> FakeHub:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- what tests look at ------------------------------------------------------------------

    def repo(self, repo_id: str, repo_type: str = "dataset") -> Repo | None:
        with self._lock:
            return self._repos.get((repo_type, repo_id))

    def repo_types(self, repo_id: str) -> list[str]:
        with self._lock:
            return sorted(t for (t, rid) in self._repos if rid == repo_id)

    def files(self, repo_id: str, revision: str = "main", repo_type: str = "dataset") -> dict[str, bytes]:
        repo = self.repo(repo_id, repo_type)
        head = repo.head(revision) if repo else None
        return dict(head.files) if head else {}

    def commits(self, repo_id: str, revision: str = "main", repo_type: str = "dataset") -> list[Commit]:
        repo = self.repo(repo_id, repo_type)
        return list(repo.branches.get(revision, [])) if repo else []

    def request_names(self) -> list[str]:
        with self._lock:
            return [r.name for r in self.requests]

    # -- request handling (called from server threads) ---------------------------------------

    def handle(self, method: str, raw_path: str, headers, body: bytes) -> tuple[int, dict, bytes]:
        url = urlsplit(raw_path)
        path, query = unquote(url.path), parse_qs(url.query)
        name, handler, args = self._route(method, path)
        try:
            if name != "lfs_upload":  # presigned uploads carry no Authorization header, like S3
                self._authenticate(headers.get("Authorization", ""))
            with self._lock:
                status = self.fail_next.pop(name, None)
            if status is not None:
                raise _HTTPError(status, f"fake Hub: injected failure on {name}")
            status, payload, extra = handler(*args, query=query, headers=headers, body=body)
        except _HTTPError as e:
            status, payload = e.status, {"error": e.message}
            extra = {"X-Error-Message": e.message}
            if e.code:
                extra["X-Error-Code"] = e.code
        with self._lock:
            self.requests.append(Request(method, path, name, status))
        data = json.dumps(payload).encode()
        return status, {"Content-Type": "application/json", **extra}, data

    def _authenticate(self, header: str) -> None:
        scheme, _, token = header.partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token or (self.tokens is not None and token not in self.tokens):
            raise _HTTPError(401, "Invalid credentials in Authorization header")

    def _route(self, method: str, path: str):
        routes = [
            ("POST", r"/api/repos/create", "create_repo", self._create_repo),
            ("POST", r"/api/validate-yaml", "validate_yaml", self._validate_yaml),
            ("POST", r"/api/(models|datasets|spaces)/([^/]+/[^/]+)/preupload/(.+)", "preupload", self._preupload),
            ("POST", r"/api/(models|datasets|spaces)/([^/]+/[^/]+)/commit/(.+)", "commit", self._commit),
            ("POST", r"/api/(models|datasets|spaces)/([^/]+/[^/]+)/branch/(.+)", "branch", self._branch),
            ("GET", r"/api/(models|datasets|spaces)/([^/]+/[^/]+)/xet-write-token/(.+)", "xet_token", self._xet),
            ("GET", r"/api/(models|datasets|spaces)/([^/]+/[^/]+)/revision/(.+)", "repo_info", self._repo_info),
            ("GET", r"/api/(models|datasets|spaces)/([^/]+/[^/]+)", "repo_info", self._repo_info),
            ("POST", r"/(datasets/|spaces/|)([^/]+/[^/]+)\.git/info/lfs/objects/batch", "lfs_batch", self._lfs_batch),
            ("PUT", r"/__lfs/(model|dataset|space)/([^/]+/[^/]+)/([0-9a-f]{64})", "lfs_upload", self._lfs_upload),
            ("POST", r"/__lfs-verify/(model|dataset|space)/([^/]+/[^/]+)", "lfs_verify", self._lfs_verify),
        ]
        for m, pattern, name, handler in routes:
            match = re.fullmatch(pattern, path)
            if m == method and match:
                return name, handler, match.groups()

        def unknown(**_):
            raise _HTTPError(404, f"fake Hub: no route for {method} {path}")

        return "unknown", unknown, ()

    # -- helpers -----------------------------------------------------------------------------

    def _get_repo(self, kind: str, repo_id: str) -> Repo:
        repo_type = _TYPES.get(kind, kind)
        repo = self._repos.get((repo_type, repo_id))
        if repo is None:
            raise _HTTPError(404, f"Repository not found: {repo_type} {repo_id}", code="RepoNotFound")
        return repo

    def _get_head(self, repo: Repo, revision: str) -> Commit:
        head = repo.head(revision)
        if head is None:
            raise _HTTPError(404, f"Invalid rev id: {revision}", code="RevisionNotFound")
        return head

    def _repo_url(self, repo: Repo) -> str:
        return f"{self.endpoint}/{_URL_PREFIX[repo.repo_type]}{repo.repo_id}"

    @staticmethod
    def _is_lfs_path(files: dict[str, bytes], path: str) -> bool:
        for line in files.get(".gitattributes", b"").decode().splitlines():
            pattern, *attrs = line.split()
            if "filter=lfs" in attrs:
                target = path if "/" in pattern else path.rsplit("/", 1)[-1]
                if fnmatch.fnmatchcase(target, pattern):
                    return True
        return False

    @staticmethod
    def _oid(data: bytes, lfs: bool) -> str:
        # What huggingface_hub compares against: sha256 for LFS files, git blob sha1 otherwise.
        if lfs:
            return hashlib.sha256(data).hexdigest()
        return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()

    def _new_commit(self, repo: Repo, revision: str, message: str, description: str, files, lfs_paths=()) -> Commit:
        parent = repo.head(revision)
        digest = hashlib.sha1(
            json.dumps([parent.oid if parent else None, message, len(repo.branches.get(revision, []))]).encode()
        )
        for path in sorted(files):
            digest.update(path.encode() + b"\0" + hashlib.sha256(files[path]).digest())
        commit = Commit(
            digest.hexdigest(), message, description, parent.oid if parent else None, files, frozenset(lfs_paths)
        )
        repo.branches.setdefault(revision, []).append(commit)
        return commit

    # -- endpoints ---------------------------------------------------------------------------

    def _create_repo(self, *, body: bytes, **_):
        payload = json.loads(body or b"{}")
        repo_type = payload.get("type") or "model"
        if repo_type not in _URL_PREFIX:
            raise _HTTPError(400, f"Invalid repo type {repo_type!r}")
        repo_id = f"{payload.get('organization') or 'fake-user'}/{payload['name']}"
        with self._lock:
            existing = self._repos.get((repo_type, repo_id))
            if existing is not None:
                return 409, {"error": "You already created this repo", "url": self._repo_url(existing)}, {}
            # 2.4.0 sends "visibility"; older clients sent "private".
            private = payload.get("visibility") == "private" or bool(payload.get("private"))
            repo = Repo(repo_id, repo_type, private)
            self._new_commit(repo, "main", "initial commit", "", {".gitattributes": DEFAULT_GITATTRIBUTES.encode()})
            self._repos[(repo_type, repo_id)] = repo
        return 200, {"url": self._repo_url(repo), "name": repo_id, "id": repo_id}, {}

    def _validate_yaml(self, *, body: bytes, **_):
        content = json.loads(body).get("content", "")
        match = re.match(r"---\n(.*?)\n---", content, re.DOTALL)
        if match:
            try:
                yaml.safe_load(match.group(1))
            except yaml.YAMLError as e:
                return 400, {"errors": [{"message": f"Invalid YAML: {e}"}], "warnings": []}, {}
        return 200, {"errors": [], "warnings": []}, {}

    def _preupload(self, kind: str, repo_id: str, revision: str, *, body: bytes, **_):
        with self._lock:
            repo = self._get_repo(kind, repo_id)
            head = self._get_head(repo, revision)
            answers = []
            for f in json.loads(body)["files"]:
                lfs = f["size"] > LFS_SIZE_THRESHOLD or self._is_lfs_path(head.files, f["path"])
                remote = head.files.get(f["path"])
                remote_lfs = remote is not None and (
                    len(remote) > LFS_SIZE_THRESHOLD or self._is_lfs_path(head.files, f["path"])
                )
                answers.append(
                    {
                        "path": f["path"],
                        "uploadMode": "lfs" if lfs else "regular",
                        "shouldIgnore": False,
                        "oid": self._oid(remote, remote_lfs) if remote is not None else None,
                    }
                )
        return 200, {"files": answers, "commitOid": head.oid}, {}

    def _lfs_batch(self, prefix: str, repo_id: str, *, body: bytes, headers, **_):
        kind = {"datasets/": "dataset", "spaces/": "space", "": "model"}[prefix]
        request = json.loads(body)
        if request.get("operation") != "upload" or "basic" not in request.get("transfers", ["basic"]):
            raise _HTTPError(422, "fake Hub: only the 'basic' upload transfer is implemented")
        objects = []
        with self._lock:
            repo = self._get_repo(kind, repo_id)
            for obj in request["objects"]:
                oid, size = obj["oid"], obj["size"]
                entry = {"oid": oid, "size": size, "authenticated": True}
                stored = repo.lfs_objects.get(oid)
                if stored is None or len(stored) != size:  # already stored => no actions, client skips it
                    entry["actions"] = {
                        "upload": {"href": f"{self.endpoint}/__lfs/{kind}/{repo_id}/{oid}?size={size}&sig={self._sig}"},
                        "verify": {"href": f"{self.endpoint}/__lfs-verify/{kind}/{repo_id}", "header": {}},
                    }
                objects.append(entry)
        # "basic" transfer, no multipart chunk_size, no Xet headers: the plain PUT path.
        return 200, {"transfer": "basic", "objects": objects}, {"Content-Type": "application/vnd.git-lfs+json"}

    def _lfs_upload(self, kind: str, repo_id: str, oid: str, *, query, body: bytes, **_):
        if query.get("sig") != [self._sig]:
            raise _HTTPError(403, "fake Hub: bad upload signature")
        size = int(query.get("size", ["-1"])[0])
        if len(body) != size or hashlib.sha256(body).hexdigest() != oid:
            raise _HTTPError(400, f"fake Hub: uploaded bytes do not match oid {oid} / size {size}")
        with self._lock:
            self._get_repo(kind, repo_id).lfs_objects[oid] = body
        return 200, {}, {"ETag": f'"{oid[:32]}"'}

    def _lfs_verify(self, kind: str, repo_id: str, *, body: bytes, **_):
        request = json.loads(body)
        with self._lock:
            stored = self._get_repo(kind, repo_id).lfs_objects.get(request["oid"])
        if stored is None or len(stored) != request["size"]:
            raise _HTTPError(404, f"fake Hub: LFS object {request['oid']} not found with size {request['size']}")
        return 200, {}, {}

    def _commit(self, kind: str, repo_id: str, revision: str, *, query, body: bytes, **_):
        if query.get("create_pr"):
            raise _HTTPError(400, "fake Hub: create_pr is not implemented")
        lines = [json.loads(line) for line in body.splitlines() if line.strip()]
        if not lines or lines[0].get("key") != "header":
            raise _HTTPError(400, "fake Hub: commit payload must start with a header line")
        header = lines[0]["value"]
        with self._lock:
            repo = self._get_repo(kind, repo_id)
            head = self._get_head(repo, revision)
            if header.get("parentCommit") and not head.oid.startswith(header["parentCommit"]):
                raise _HTTPError(412, "A commit has happened since. Please refresh and try again.")
            files, lfs_paths = dict(head.files), set()
            for line in lines[1:]:
                key, value = line["key"], line["value"]
                if key == "file":
                    if value.get("encoding") != "base64":
                        raise _HTTPError(400, f"fake Hub: unsupported encoding {value.get('encoding')!r}")
                    files[value["path"]] = base64.b64decode(value["content"])
                elif key == "lfsFile":
                    data = repo.lfs_objects.get(value["oid"])
                    if data is None or ("size" in value and len(data) != value["size"]):
                        raise _HTTPError(
                            400, f"fake Hub: LFS object {value['oid']} of {value['path']} was never uploaded"
                        )
                    files[value["path"]] = data
                    lfs_paths.add(value["path"])
                elif key == "deletedFile":
                    if files.pop(value["path"], None) is None:
                        raise _HTTPError(404, "A file with this name doesn't exist", code="EntryNotFound")
                elif key == "deletedFolder":
                    prefix = value["path"].rstrip("/") + "/"
                    files = {p: d for p, d in files.items() if not p.startswith(prefix)}
                else:
                    raise _HTTPError(400, f"fake Hub: unknown commit line {key!r}")
            commit = self._new_commit(
                repo, revision, header.get("summary", ""), header.get("description", ""), files, lfs_paths
            )
        return (
            200,
            {
                "success": True,
                "commitOid": commit.oid,
                "commitUrl": f"{self._repo_url(repo)}/commit/{commit.oid}",
                "hookOutput": "",
            },
            {},
        )

    def _branch(self, kind: str, repo_id: str, branch: str, *, body: bytes, **_):
        start = (json.loads(body or b"{}") or {}).get("startingPoint") or "main"
        with self._lock:
            repo = self._get_repo(kind, repo_id)
            if branch in repo.branches:
                raise _HTTPError(409, f"Reference already exists: refs/heads/{branch}")
            repo.branches[branch] = [self._get_head(repo, start)]
        return 200, {}, {}

    def _repo_info(self, kind: str, repo_id: str, revision: str = "main", **_):
        with self._lock:
            repo = self._get_repo(kind, repo_id)
            head = self._get_head(repo, revision)
            return (
                200,
                {
                    "id": repo.repo_id,
                    "_id": hashlib.sha1(repo.repo_id.encode()).hexdigest()[:24],
                    "author": repo.repo_id.split("/")[0],
                    "sha": head.oid,
                    "private": repo.private,
                    "disabled": False,
                    "gated": False,
                    "siblings": [{"rfilename": p} for p in sorted(head.files)],
                },
                {},
            )

    def _xet(self, *args, **_):
        # Refuse clearly rather than let hf_xet wander off to a CAS server that does not exist.
        raise _HTTPError(501, "fake Hub: Xet is not implemented; set HF_HUB_DISABLE_XET (see isolate_hf_client)")


class _Handler(BaseHTTPRequestHandler):
    fake: FakeHub
    protocol_version = "HTTP/1.1"  # keep-alive, as httpx expects; every answer has a Content-Length

    def _serve(self) -> None:
        body = self._read_body()
        status, headers, data = self.fake.handle(self.command, self.path, self.headers, body)
        self.send_response(status)
        for key, value in headers.items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _read_body(self) -> bytes:
        # httpx streams file uploads with chunked transfer encoding when it cannot tell the size.
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            chunks = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    do_GET = do_POST = do_PUT = do_DELETE = _serve

    def log_message(self, *args) -> None:  # keep pytest output clean
        pass


def isolate_hf_client(monkeypatch, endpoint: str, home: Path) -> None:
    """Point huggingface_hub at `endpoint` and away from huggingface.co and the user's own login.

    huggingface_hub reads its settings from the environment once, at import time, so the module
    constants are patched as well as the variables.
    """
    from huggingface_hub import constants

    settings = {
        "HF_ENDPOINT": endpoint,
        "HF_HUB_DISABLE_TELEMETRY": "1",
        "HF_HUB_DISABLE_XET": "1",  # Xet is chosen client-side and would bypass the LFS endpoints
        "HF_HUB_DISABLE_PROGRESS_BARS": "1",
        "HF_HOME": str(home),
    }
    for key, value in settings.items():
        monkeypatch.setenv(key, value)
    for key in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_OIDC_RESOURCE", "HF_TOKEN_PATH"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setattr(constants, "ENDPOINT", endpoint)
    monkeypatch.setattr(constants, "HF_HUB_DISABLE_TELEMETRY", True)
    monkeypatch.setattr(constants, "HF_HUB_DISABLE_XET", True)
    monkeypatch.setattr(constants, "HF_HOME", str(home))
    monkeypatch.setattr(constants, "HF_TOKEN_PATH", str(home / "token"))
    monkeypatch.setattr(constants, "HF_STORED_TOKENS_PATH", str(home / "stored_tokens"))
