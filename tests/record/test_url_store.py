"""A trajectory store at a URL (arex.record.url_store): `arex rollout --out s3://...`, `arex select --store s3://...`.

S3 is faked at the network edge by a moto server on 127.0.0.1 (real S3 cannot run here); s3fs,
botocore and arex run unchanged against it (endpoint from AWS_ENDPOINT_URL). The rollouts are the
fast tier's (tests/loop_kit.py: the one-class `tally` env kind on the `process` test
sandbox) with the scripted teacher over real HTTP; a first run is a real `arex` process, killed
with SIGKILL mid-round, so the lock it leaves and the rounds it uploaded are a crashed run's."""

import importlib.util
import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from loop_kit import climbing
from polling import deadline_poll
from repo_paths import TESTS
from typer.testing import CliRunner

from arex.cli import app
from arex.hashing import text_sha256
from arex.record.snapshots import SnapshotStore, read_member
from arex.record.trajectory import load
from arex.record.url_store import LOCK, MARK, Remote, is_url, opened, url_of
from arex.teacher.scripted import RoundScript, ScriptedServer

pytestmark = pytest.mark.usefixtures("tally_kind")  # the tally kind and the process backend registered


@pytest.fixture
def env(tally_env):
    return tally_env


BUCKET = "arex-url-store"
BASE = [
    "-c",
    "sandbox.backend=process",
    "-c",
    "teacher.model=scripted-teacher",
    "-c",
    "teacher.track_cost=false",
    "-c",
    "teacher.backoff_base_s=0.01",
    "-c",
    "teacher.max_attempts=2",
]
# An `arex` process that knows the fast tier's env kind and sandbox (registered as the fixtures do).
ARex = f"""
import sys
sys.path.insert(0, {str(TESTS)!r})
from loop_kit import register_tally_kind
register_tally_kind()
from arex.cli import main
sys.argv = ["arex", *sys.argv[1:]]
main()
"""


@pytest.fixture(scope="module")
def s3():
    """A moto S3 server on 127.0.0.1 with one bucket; the environment points botocore at it."""
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    values = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1",
              "AWS_ENDPOINT_URL": f"http://{host}:{port}",
              "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost"}  # fmt: skip
    with pytest.MonkeyPatch.context() as mp:
        for key, value in values.items():
            mp.setenv(key, value)
        for key in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"):
            mp.delenv(key, raising=False)
        import s3fs

        fs = s3fs.S3FileSystem()
        fs.mkdir(BUCKET)
        try:
            yield fs
        finally:
            server.stop()


def cli(*args: str, base_url: str = "http://127.0.0.1:9/v1"):
    return CliRunner().invoke(app, [*args, *BASE, "-c", f"teacher.base_url={base_url}"])


def objects(fs, prefix: str) -> dict[str, bytes]:
    """Every object under s3://BUCKET/prefix, by path relative to it."""
    fs.invalidate_cache()
    return {name[len(f"{BUCKET}/{prefix}/") :]: fs.cat_file(name) for name in fs.find(f"{BUCKET}/{prefix}")}


def lines(data: bytes) -> list[dict]:
    return [json.loads(line) for line in data.decode().splitlines()]


def kinds_of(data: bytes) -> list[str]:
    return [line["type"] for line in lines(data)]


# -- what a URL is, where its mirror lives ------------------------------------------------------------
def test_urls_and_their_mirrors(tmp_path, monkeypatch, s3):
    monkeypatch.setenv("AREX_CACHE", str(tmp_path / "cache"))
    assert is_url("s3://bucket/prefix") and is_url("gcs://b/p") and is_url("simplecache::s3://b/p")
    assert (
        not is_url("rollouts")
        and not is_url("/abs/store")
        and not is_url("file:///abs/store")
        and not is_url("a/s3://b")
    )
    with opened("file:///abs/store", write=True) as folder:
        assert folder == Path("/abs/store")
    remote = Remote(f"s3://{BUCKET}/unit/")
    assert remote.mirror == tmp_path / "cache" / "stores" / text_sha256(f"s3://{BUCKET}/unit")[:16]
    assert url_of(remote.mirror / "env" / "key") == f"s3://{BUCKET}/unit" and url_of(tmp_path) is None
    assert Remote(f"s3://{BUCKET}/unit", read_only=True).mirror.name.endswith(".read")
    # A key that would leave the mirror is never downloaded; the lock and the mirror's mark stay local.
    for rel in ("../escape.jsonl", "a/../../b.jsonl", LOCK, MARK):
        s3.pipe_file(f"{BUCKET}/unit/{rel}", b"{}\n")
    s3.pipe_file(f"{BUCKET}/unit/env/k.jsonl", b'{"type":"header"}\n')
    remote.pull()
    assert (remote.mirror / "env" / "k.jsonl").read_bytes() == b'{"type":"header"}\n'
    assert not (tmp_path / "cache" / "stores" / "escape.jsonl").exists() and not (remote.mirror / LOCK).exists()
    assert (remote.mirror / MARK).read_text().strip() == f"s3://{BUCKET}/unit"


# -- a run uploads round by round; a crash leaves what a fresh machine resumes --------------------------
def test_rollout_to_s3_uploads_each_round_and_a_fresh_machine_resumes_it(env, tmp_path, monkeypatch, s3):
    url = f"s3://{BUCKET}/run"
    reached, release = threading.Event(), threading.Event()
    script = RoundScript(climbing)

    def stall_in_round_2(request, index):
        if "Round 2 of 3" in request["messages"][-1]["content"]:
            reached.set()
            release.wait(60)  # until the test has killed the run
        return script(request, index)

    first_cache = tmp_path / "machine-a"
    with ScriptedServer(stall_in_round_2, model="scripted-teacher") as server:
        args = [
            "rollout",
            "--envs",
            str(env.dir),
            "--out",
            url,
            "--rounds",
            "3",
            *BASE,
            "-c",
            f"teacher.base_url={server.base_url}",
        ]
        log = (tmp_path / "run-a.log").open("wb")
        proc = subprocess.Popen(
            [sys.executable, "-c", ARex, *args],
            env={**os.environ, "AREX_CACHE": str(first_cache)},
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            deadline_poll(lambda: reached.is_set() or proc.poll() is not None, 120, "the run to reach round 2")
            assert proc.poll() is None, (tmp_path / "run-a.log").read_text()
            # Round 1 is at the URL, whole, with its workspace archive, before round 2 is over.
            uploaded = deadline_poll(
                lambda: {k: v for k, v in objects(s3, "run").items() if k.endswith(".jsonl")}, 30, "round 1 at the URL"
            )
            [(rel, data)] = uploaded.items()
            assert kinds_of(data) == ["header", "round_start", "step", "step", "step", "round_end"]
            assert lines(data)[-1]["round"] == 1
            snapshot = lines(data)[-1]["snapshot"]
            assert f"{rel[: -len('.jsonl')]}/snapshots/{snapshot}.tar" in objects(s3, "run")
            # The round in flight is in the local mirror only.
            local = first_cache / "stores" / text_sha256(url)[:16] / rel
            assert "round_start" in kinds_of(local.read_bytes())[6:]
            # The lock names the live run: a second run stops with one sentence saying how to clear it.
            owner = json.loads(s3.cat_file(f"{BUCKET}/run/{LOCK}"))
            assert owner["pid"] == proc.pid
            monkeypatch.setenv("AREX_CACHE", str(tmp_path / "machine-a2"))
            second = cli("rollout", "--envs", str(env.dir), "--out", url, "--rounds", "3", base_url=server.base_url)
            assert (
                second.exit_code == 2
                and f"the trajectory store {url} is locked by another arex rollout (pid {proc.pid}" in second.output
            )
            assert f"delete the object {url}/{LOCK}" in second.output and "Traceback" not in second.output
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            release.set()
    assert kinds_of(objects(s3, "run")[rel]) == kinds_of(data)  # the cut round 2 never went up

    # Another machine (a fresh mirror) re-runs the same command: it takes over the dead run's lock
    # and resumes from round 1; no round is played twice.
    with ScriptedServer(script, model="scripted-teacher") as server:
        monkeypatch.setenv("AREX_CACHE", str(tmp_path / "machine-b"))
        again = cli("rollout", "--envs", str(env.dir), "--out", url, "--rounds", "3", base_url=server.base_url)
        asked = [r["messages"][-1]["content"] for r in server.requests]
    assert again.exit_code == 0, again.output
    assert "took over the stale lock" in again.output
    assert not any("Round 1 of 3" in text for text in asked) and sum("Round 2 of 3" in text for text in asked) == 1
    stored = objects(s3, "run")
    final = lines(stored[rel])
    assert [line["round"] for line in final if line["type"] == "round_start"] == [1, 2, 3]
    assert [line["round"] for line in final if line["type"] == "round_end"] == [1, 2, 3]
    assert final[-1]["type"] == "end" and final[-1]["status"] == "done" and final[0]["key"] == Path(rel).stem
    assert [line["grade"]["held_out_score"] for line in final if line["type"] == "round_end"] == [0.2, 0.3, 0.4]
    assert json.loads(stored["summary.json"])["endings"] == {"done": 1}
    assert LOCK not in stored  # released at the end

    # `arex select` on the URL (its own read-only mirror) and on a plain local copy agree.
    mirror_b = tmp_path / "machine-b" / "stores" / text_sha256(url)[:16]
    verdicts = {}
    for name, store in (("url", url), ("local", str(mirror_b))):
        monkeypatch.setenv("AREX_CACHE", str(tmp_path / "machine-c"))
        result = CliRunner().invoke(
            app,
            [
                "select",
                "--store",
                store,
                "--envs",
                str(env.dir.parent),
                "--out",
                str(tmp_path / f"sel-{name}"),
                "-c",
                "sandbox.backend=process",
            ],
        )
        assert result.exit_code == 0, result.output
        verdicts[name] = {
            k: v
            for k, v in json.loads((tmp_path / f"sel-{name}" / "selection.json").read_text()).items()
            if k != "store"
        }
    assert verdicts["url"] == verdicts["local"] and verdicts["url"]["total"] == 1
    assert (tmp_path / "machine-c" / "stores" / f"{text_sha256(url)[:16]}.read" / rel).read_bytes() == stored[rel]
    assert LOCK not in objects(s3, "run")  # reading takes no lock
    record = load(mirror_b / rel)
    assert record.end.status == "done"
    # The resumed workspace was the one round 1's archive (downloaded from the URL) held.
    last = SnapshotStore(mirror_b / rel[: -len(".jsonl")] / "snapshots").path(record.rounds[-1].end.snapshot)
    assert read_member(last, "notes.txt", 1000) == b"round-1\nround-2\nround-3\n"


# -- one-sentence errors ----------------------------------------------------------------------------
def _absent_backend() -> tuple[str, str]:
    """A protocol fsspec knows whose package is not installed here, and that package."""
    from fsspec.registry import known_implementations

    for protocol in ("gcs", "abfs", "oci", "webhdfs", "dropbox"):
        package = known_implementations[protocol]["class"].split(".")[0]
        if importlib.util.find_spec(package) is None:
            return protocol, package
    raise AssertionError("every candidate fsspec backend is installed; pick another protocol for this test")


@pytest.mark.parametrize("command", ["rollout", "select"])
def test_a_url_arex_cannot_use_is_one_sentence_naming_it(env, tmp_path, monkeypatch, s3, command):
    monkeypatch.setenv("AREX_CACHE", str(tmp_path / "cache"))
    protocol, package = _absent_backend()
    flag = "--out" if command == "rollout" else "--store"
    for url, wanted in (
        (
            f"{protocol}://bucket/run",
            (
                f"the trajectory store {protocol}://bucket/run needs the fsspec backend for {protocol}://,"
                f" which is not installed: pip install {package}"
            ),
        ),
        ("zzz://bucket/run", "the trajectory store zzz://bucket/run cannot be opened"),
        (
            "s3://no-such-bucket-here/run",
            "the trajectory store s3://no-such-bucket-here/run could not be reached (FileNotFoundError",
        ),
    ):
        result = cli(
            command,
            "--envs",
            str(env.dir),
            flag,
            url,
            *(["--out", str(tmp_path / "sel")] if command == "select" else []),
        )
        assert result.exit_code == 2, result.output
        assert wanted in " ".join(result.output.split()) and "Traceback" not in result.output
        # one sentence (soft-wrapped at most)
        assert len([line for line in result.output.splitlines() if line.strip()]) <= 3


# -- Ray: nodes share no path, only the URL ------------------------------------------------------------
@pytest.mark.ray
def test_ray_tasks_write_node_local_mirrors_and_upload_to_the_url(env, tmp_path, monkeypatch, s3):
    ray = pytest.importorskip("ray")
    url = f"s3://{BUCKET}/ray-run"
    worker_cache, driver_cache = tmp_path / "worker-cache", tmp_path / "driver-cache"
    aws = {
        k: os.environ[k]
        for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION", "AWS_ENDPOINT_URL", "NO_PROXY")
    }
    runtime_env = {"env_vars": {**aws, "AREX_CACHE": str(worker_cache),
                                "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")])},
                   "worker_process_setup_hook": "loop_kit.register_tally_kind"}  # fmt: skip
    # a cluster of its own (address="local"): never one another test started, whatever RAY_ADDRESS says
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False, runtime_env=runtime_env)
    try:
        monkeypatch.setenv("AREX_CACHE", str(driver_cache))
        with ScriptedServer(RoundScript(climbing), model="scripted-teacher") as server:
            result = cli(
                "rollout",
                "--envs",
                str(env.dir),
                "--out",
                url,
                "--rounds",
                "2",
                "--samples",
                "2",
                "--executor",
                "ray",
                base_url=server.base_url,
            )
    finally:
        ray.shutdown()
    assert result.exit_code == 0, result.output
    stored = objects(s3, "ray-run")
    records = sorted(k for k in stored if k.endswith(".jsonl"))
    assert len(records) == 2 and json.loads(stored["summary.json"])["endings"] == {"done": 2}
    mirror = text_sha256(url)[:16]
    for rel in records:
        assert [line["round"] for line in lines(stored[rel]) if line["type"] == "round_end"] == [1, 2]
        assert (worker_cache / "stores" / mirror / rel).read_bytes() == stored[rel]  # written on the node's own mirror
        assert (driver_cache / "stores" / mirror / rel).read_bytes() == stored[rel]  # read back by the driver
    assert (
        not any(".arex-cluster-store" in k for k in stored)
        and not (driver_cache / "stores" / mirror / ".arex-cluster-store").exists()
    )
