"""`arex.dataset.push` against the local fake Hub (tests/fake_hub.py); nothing leaves 127.0.0.1."""

import hashlib
import json
import socket
import urllib.error
import urllib.request
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from fake_hub import FakeHub, isolate_hf_client

from arex.dataset.push import PushError, push

REPO = "arex-test/sft-demo"
TOKEN = "hf_fake_token"

CARD = """---
license: apache-2.0
configs:
- config_name: rounds
  data_files:
  - split: train
    path: rounds/train-*.parquet
- config_name: trajectories
  data_files:
  - split: train
    path: trajectories/train-*.parquet
---
# arex SFT demo

Two configs: rounds and trajectories.
"""


@pytest.fixture(autouse=True)
def loopback_only(monkeypatch):
    """Fail any connection attempt to an address other than 127.0.0.1 (the real Hub included)."""
    real_connect = socket.socket.connect

    def connect(self, address):
        host = address[0] if isinstance(address, tuple) else address
        if self.family in (socket.AF_INET, socket.AF_INET6) and host != "127.0.0.1":
            raise AssertionError(f"test tried to connect to {address}")
        return real_connect(self, address)

    monkeypatch.setattr(socket.socket, "connect", connect)


@pytest.fixture
def hub(monkeypatch, tmp_path):
    with FakeHub() as h:
        isolate_hf_client(monkeypatch, h.endpoint, tmp_path / "hf-home")
        yield h


def _write_shard(path: Path, rows: int, seed: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    table = pa.table(
        {
            "messages": [json.dumps([{"role": "user", "content": f"task {seed}-{i}"}]) for i in range(rows)],
            "score": [float((seed * 31 + i) % 17) for i in range(rows)],
        }
    )
    pq.write_table(table, path)


def make_export(folder: Path) -> Path:
    folder.mkdir(parents=True)
    (folder / "README.md").write_text(CARD)
    _write_shard(folder / "rounds" / "train-00000-of-00002.parquet", 200, 1)
    _write_shard(folder / "rounds" / "train-00001-of-00002.parquet", 150, 2)
    _write_shard(folder / "trajectories" / "train-00000-of-00001.parquet", 40, 3)
    checksums = {
        p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*.parquet"))
    }
    (folder / "checksums.json").write_text(json.dumps(checksums, indent=2))
    # Hidden files must never be uploaded.
    (folder / ".DS_Store").write_bytes(b"junk")
    (folder / ".cache").mkdir()
    (folder / ".cache" / "state.json").write_text("{}")
    return folder


def local_files(folder: Path) -> dict[str, bytes]:
    return {
        p.relative_to(folder).as_posix(): p.read_bytes()
        for p in folder.rglob("*")
        if p.is_file() and not any(part.startswith(".") for part in p.relative_to(folder).parts)
    }


def without_gitattributes(files: dict[str, bytes]) -> dict[str, bytes]:
    return {p: d for p, d in files.items() if p != ".gitattributes"}


def test_loopback_guard_blocks_other_addresses():
    with pytest.raises(AssertionError, match="tried to connect"):
        socket.create_connection(("192.0.2.1", 443), timeout=1)  # TEST-NET-1, never routed


def test_fake_hub_requires_a_bearer_token():
    with FakeHub(tokens={"good"}) as h:
        for headers, status in [
            ({}, 401),
            ({"Authorization": "Bearer bad"}, 401),
            ({"Authorization": "Bearer good"}, 200),
        ]:
            request = urllib.request.Request(
                f"{h.endpoint}/api/repos/create",
                data=json.dumps({"name": "x", "organization": "o", "type": "dataset"}).encode(),
                headers={"Content-Type": "application/json", **headers},
            )
            try:
                with urllib.request.urlopen(request) as response:
                    assert response.status == status
            except urllib.error.HTTPError as e:
                assert e.code == status
        assert [r.status for r in h.requests] == [401, 401, 200]
        assert h.repo_types("o/x") == ["dataset"]


def test_push_uploads_the_export_byte_for_byte(hub, tmp_path):
    folder = make_export(tmp_path / "export")
    result = push(folder, REPO, token=TOKEN, endpoint=hub.endpoint, private=True, commit_message="SFT v1")

    expected = local_files(folder)
    assert set(expected) == {
        "README.md",
        "checksums.json",
        "rounds/train-00000-of-00002.parquet",
        "rounds/train-00001-of-00002.parquet",
        "trajectories/train-00000-of-00001.parquet",
    }
    remote = hub.files(REPO)
    assert ".gitattributes" in remote  # written by the repo's initial commit, as on the Hub
    assert without_gitattributes(remote) == expected

    # One dataset repo, one commit on top of the initial one, carrying our message.
    assert hub.repo_types(REPO) == ["dataset"]
    assert hub.repo(REPO).private is True
    commits = hub.commits(REPO)
    assert [c.message for c in commits] == ["initial commit", "SFT v1"]
    assert result.commit_id == commits[-1].oid
    assert result.commit_url.endswith(f"/datasets/{REPO}/commit/{commits[-1].oid}")
    assert result.repo_url == f"{hub.endpoint}/datasets/{REPO}"
    assert {f.path: f.size for f in result.files} == {p: len(d) for p, d in expected.items()}
    assert result.total_bytes == sum(len(d) for d in expected.values())

    # Shards went through the LFS batch API + basic PUT + verify; card and checksums inline.
    assert commits[-1].lfs_paths == {p for p in expected if p.endswith(".parquet")}
    names = hub.request_names()
    assert names.count("lfs_upload") == 3 and names.count("lfs_verify") == 3
    assert names.count("commit") == 1
    assert "xet_token" not in names and "unknown" not in names

    # The bytes on the fake Hub are real parquet, not LFS pointer text.
    table = pq.read_table(pa.BufferReader(remote["rounds/train-00001-of-00002.parquet"]))
    assert table.num_rows == 150


def test_push_again_without_changes_makes_no_new_commit(hub, tmp_path):
    folder = make_export(tmp_path / "export")
    first = push(folder, REPO, token=TOKEN, endpoint=hub.endpoint)
    second = push(folder, REPO, token=TOKEN, endpoint=hub.endpoint)
    assert len(hub.commits(REPO)) == 2
    assert second.commit_id == first.commit_id
    assert hub.request_names().count("lfs_upload") == 3  # nothing re-uploaded


def test_push_to_a_new_branch_leaves_main_alone(hub, tmp_path):
    folder = make_export(tmp_path / "export")
    push(folder, REPO, token=TOKEN, endpoint=hub.endpoint, revision="v1")
    assert without_gitattributes(hub.files(REPO, revision="v1")) == local_files(folder)
    assert set(hub.files(REPO)) == {".gitattributes"}


def test_token_comes_from_hf_token_env(hub, tmp_path, monkeypatch):
    hub.tokens = {"hf_from_env"}
    monkeypatch.setenv("HF_TOKEN", "hf_from_env")
    folder = make_export(tmp_path / "export")
    push(folder, REPO, endpoint=hub.endpoint)
    assert without_gitattributes(hub.files(REPO)) == local_files(folder)


def test_wrong_token_is_a_push_error_naming_401(hub, tmp_path):
    hub.tokens = {"hf_the_right_one"}
    folder = make_export(tmp_path / "export")
    with pytest.raises(PushError) as err:
        push(folder, REPO, token="hf_wrong", endpoint=hub.endpoint)
    message = str(err.value)
    assert "401" in message and hub.endpoint in message and "HF_TOKEN" in message
    assert hub.repo(REPO) is None
    assert {r.status for r in hub.requests} == {401}


def test_missing_token_fails_before_any_request(hub, tmp_path):
    folder = make_export(tmp_path / "export")
    with pytest.raises(PushError, match="No Hugging Face token"):
        push(folder, REPO, endpoint=hub.endpoint)
    assert hub.requests == []


def test_server_error_on_commit_then_a_retry_succeeds(hub, tmp_path):
    hub.fail_next = {"commit": 500}
    folder = make_export(tmp_path / "export")
    with pytest.raises(PushError) as err:
        push(folder, REPO, token=TOKEN, endpoint=hub.endpoint)
    assert "500" in str(err.value) and hub.endpoint in str(err.value)
    assert [c.message for c in hub.commits(REPO)] == ["initial commit"]  # nothing committed
    assert hub.request_names().count("lfs_upload") == 3

    result = push(folder, REPO, token=TOKEN, endpoint=hub.endpoint)
    assert without_gitattributes(hub.files(REPO)) == local_files(folder)
    assert result.commit_id == hub.commits(REPO)[-1].oid
    # The shards uploaded by the failed attempt are already on the Hub: not sent again.
    assert hub.request_names().count("lfs_upload") == 3


def test_unreachable_hub_is_a_push_error(tmp_path, monkeypatch):
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    endpoint = f"http://127.0.0.1:{port}"
    isolate_hf_client(monkeypatch, endpoint, tmp_path / "hf-home")
    folder = make_export(tmp_path / "export")
    with pytest.raises(PushError, match="Could not reach the Hub at " + endpoint):
        push(folder, REPO, token=TOKEN, endpoint=endpoint)


def test_xet_is_refused_by_the_fake_hub_and_reported(hub, tmp_path, monkeypatch):
    """huggingface_hub 2.4.0 uploads through Xet whenever hf_xet is installed, whatever the server
    says; the fake Hub has no Xet storage, so it refuses the token request and push says why."""
    pytest.importorskip("hf_xet")
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_DISABLE_XET", False)
    folder = make_export(tmp_path / "export")
    with pytest.raises(PushError, match="Xet upload to the Hub at .*HF_HUB_DISABLE_XET=1"):
        push(folder, REPO, token=TOKEN, endpoint=hub.endpoint)
    names = hub.request_names()
    assert "xet_token" in names and "lfs_batch" not in names and "commit" not in names


def _drop_readme(folder: Path) -> None:
    (folder / "README.md").unlink()


def _strip_front_matter(folder: Path) -> None:
    (folder / "README.md").write_text("# a card without metadata\n")


def _corrupt_shard(folder: Path) -> None:
    shard = folder / "rounds" / "train-00001-of-00002.parquet"
    shard.write_bytes(shard.read_bytes()[:-10])


def _drop_one_shard(folder: Path) -> None:
    (folder / "trajectories" / "train-00000-of-00001.parquet").unlink()


def _add_unlisted_shard(folder: Path) -> None:
    _write_shard(folder / "rounds" / "train-00002-of-00003.parquet", 5, 9)


def _drop_checksums(folder: Path) -> None:
    (folder / "checksums.json").unlink()


def _rechecksum(folder: Path) -> None:
    checksums = {
        p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*.parquet"))
    }
    (folder / "checksums.json").write_text(json.dumps(checksums, indent=2))


def _text_shard_with_its_checksum(folder: Path) -> None:
    (folder / "rounds" / "train-00001-of-00002.parquet").write_text('{"messages": []}\n')  # JSONL named .parquet
    _rechecksum(folder)


def _footer_cut_with_its_checksum(folder: Path) -> None:
    shard = folder / "trajectories" / "train-00000-of-00001.parquet"
    shard.write_bytes(shard.read_bytes()[:-10])  # starts like parquet; its footer is gone
    _rechecksum(folder)


def _head_replaced_with_its_checksum(folder: Path) -> None:
    shard = folder / "rounds" / "train-00000-of-00002.parquet"
    shard.write_bytes(b"JUNK" + shard.read_bytes()[4:])  # the footer still reads
    _rechecksum(folder)


@pytest.mark.parametrize(
    ("breakage", "expected"),
    [
        (_drop_readme, "has no README.md"),
        (_strip_front_matter, "has no YAML front matter"),
        (_corrupt_shard, "rounds/train-00001-of-00002.parquet does not match its sha256"),
        (_drop_one_shard, "trajectories/train-00000-of-00001.parquet is listed in checksums.json but missing"),
        (_add_unlisted_shard, "train-00002-of-00003.parquet is not listed in checksums.json"),
        (_drop_checksums, "has no checksums.json"),
        (_text_shard_with_its_checksum, "rounds/train-00001-of-00002.parquet in .* is not a readable parquet file"),
        (
            _footer_cut_with_its_checksum,
            "trajectories/train-00000-of-00001.parquet in .* is not a readable parquet file",
        ),
        (
            _head_replaced_with_its_checksum,
            "rounds/train-00000-of-00002.parquet in .* is not a readable parquet file .no parquet magic at its start",
        ),
    ],
)
def test_broken_export_fails_before_any_request(hub, tmp_path, breakage, expected):
    folder = make_export(tmp_path / "export")
    breakage(folder)
    with pytest.raises(PushError, match=expected) as err:
        push(folder, REPO, token=TOKEN, endpoint=hub.endpoint)
    assert "arex export" in str(err.value)
    assert hub.requests == []


def test_folder_without_shards_at_all(hub, tmp_path):
    folder = tmp_path / "export"
    folder.mkdir()
    (folder / "README.md").write_text(CARD)
    with pytest.raises(PushError, match="has no .parquet shards; run `arex export` first"):
        push(folder, REPO, token=TOKEN, endpoint=hub.endpoint)
    assert hub.requests == []


def test_hidden_files_and_the_export_marker_are_not_uploaded(hub, tmp_path):
    folder = make_export(tmp_path / "export")
    (folder / ".arex-export").write_text('{"format": 1}\n')
    push(folder, REPO, token=TOKEN, endpoint=hub.endpoint)
    remote = without_gitattributes(hub.files(REPO))
    assert remote == local_files(folder) and ".arex-export" not in remote  # it guards the local folder only
    assert ".DS_Store" not in remote and ".cache/state.json" not in remote


def test_a_dry_run_checks_and_lists_what_would_be_uploaded_and_sends_nothing(hub, tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from arex.cli import app

    folder = make_export(tmp_path / "export")
    (folder / ".arex-export").write_text('{"format": 1}\n')
    monkeypatch.delenv("HF_TOKEN", raising=False)  # a dry run needs no token
    done = CliRunner().invoke(app, ["push", "--dataset", str(folder), "--repo-id", REPO, "--dry-run", "--json"])
    assert done.exit_code == 0, done.output
    summary = json.loads(done.stdout)
    listed = {item["id"]: item["numbers"]["bytes"] for item in summary["items"]}
    assert listed == {rel: len(data) for rel, data in local_files(folder).items()} and ".arex-export" not in listed
    assert summary["extra"]["dry_run"] is True and hub.requests == []
    next(folder.rglob("*.parquet")).write_bytes(b"PAR1 not really")  # the same checks as a push
    broken = CliRunner().invoke(app, ["push", "--dataset", str(folder), "--repo-id", REPO, "--dry-run"])
    assert broken.exit_code == 2 and "sha256" in broken.output and hub.requests == []
