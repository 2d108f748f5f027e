"""ML sources as real users give them: tables that are not UTF-8, sources that break in unforeseen
ways, git working trees with uncommitted work, and YAML overlays that add or leave out files."""

import csv
import io
import textwrap
from pathlib import Path

import git
import pytest
import yaml

from arex.envs.build import build_envs
from arex.envs.judge_sources import SourceError
from arex.envs.ml_data import decode_table, detect_encoding, split_table
from arex.envs.ml_source import content_digest, open_source
from arex.hashing import cache_dir
from arex.sandbox import SandboxConfig
from arex.specs import DataSpec, MLSpec


def commit_repo(path: Path, files: dict[str, str | bytes], message: str = "initial") -> git.Repo:
    """A real repository at `path` holding `files`, all committed."""
    path.mkdir(parents=True, exist_ok=True)
    repo = git.Repo.init(path, initial_branch="main")
    repo.config_writer().set_value("user", "name", "t").set_value("user", "email", "t@t").release()
    write(path, files)
    repo.git.add("-A")
    repo.index.commit(message)
    return repo


def write(root: Path, files: dict[str, str | bytes]) -> None:
    for rel, body in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        if isinstance(body, bytes):
            (root / rel).write_bytes(body)
        else:
            (root / rel).write_text(body, encoding="utf-8")


def spec_yaml(env_id: str, **overrides) -> str:
    spec = {
        "id": env_id,
        "title": env_id,
        "run": "python3 train.py",
        "metric": {"name": "rmse", "direction": "minimize"},
        "data": {"table": "data/full.csv", "target": "y"},
        "time_limit_s": 20,
        "mutation": {"file": "train.py", "find": "mean + slope", "replace": "0 * slope"},
    }
    spec.update(overrides)
    return yaml.safe_dump(spec, allow_unicode=True)


LINEAR_TABLE = "x,y\n" + "".join(f"{x},{3 * x + (x * 7919) % 13}\n" for x in range(100))
LINEAR_TRAIN = textwrap.dedent("""
    import csv
    rows = list(csv.DictReader(open("data/train.csv")))
    mean = sum(float(r["y"]) for r in rows) / len(rows)
    slope = sum((float(r["x"]) - 50) * (float(r["y"]) - mean) for r in rows) / sum((float(r["x"]) - 50) ** 2 for r in rows)
    with open("submission.csv", "w") as f:
        f.write("id,prediction\\n")
        for r in csv.DictReader(open("data/test.csv")):
            f.write(f"{r['id']},{mean + slope * (float(r['x']) - 50)}\\n")
""")  # noqa: E501


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("AREX_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


# -- 1, 2: encodings, and a batch that an unforeseen failure does not stop ------------------------
def sms_table() -> bytes:
    """A small SMS spam table as such tables are often shipped: latin-1, with £ and accents, and some
    labels wrong (as in real ones), so that no model scores a perfect 1.0 (the headroom gate)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow(["text", "label"])
    names = ["Zoë", "José", "Chloé", "Jürgen", "Åsa", "Noël"]
    flip = {"spam": "ham", "ham": "spam"}
    for n in range(150):
        name = names[n % len(names)]
        if n % 3 == 0:
            text, label = f"WIN £{(n + 1) * 10} cash prize! Text CLAIM{n} to 8{n:03d}, free entry", "spam"
        elif n % 3 == 1:
            text, label = f"Café at {n % 12 + 1}? {name} says the crème brûlée is très bon", "ham"
        else:
            text, label = f"{name}, the meeting moved to Zürich room {n}, see you déjà", "ham"
        writer.writerow([text, flip[label] if n % 7 == 3 else label])
    return out.getvalue().encode("latin-1")


SMS_TRAIN = textwrap.dedent("""
    import csv, math
    from collections import Counter
    counts = {"spam": Counter(), "ham": Counter()}
    for r in csv.DictReader(open("data/train.csv", encoding="utf-8")):
        counts[r["label"]].update(r["text"].lower().split())
    def score(text):
        return sum(math.log((counts["spam"][w] + 1) / (counts["ham"][w] + 1)) for w in text.lower().split())
    with open("submission.csv", "w") as f:
        f.write("id,prediction\\n")
        for r in csv.DictReader(open("data/test.csv", encoding="utf-8")):
            f.write(f"{r['id']},{'spam' if score(r['text']) > 0 else 'ham'}\\n")
""")


def sms_repo(path: Path, env_id: str, **data) -> Path:
    spec = spec_yaml(env_id, metric={"name": "accuracy", "direction": "maximize"},
                     data={"table": "data/sms.csv", "target": "label", "split": {"stratify": True}, **data},
                     mutation={"file": "train.py", "find": "> 0 else", "replace": "> 1e9 else"})  # fmt: skip
    commit_repo(
        path,
        {"data/sms.csv": sms_table(), "train.py": SMS_TRAIN, "README.md": "Tell spam from ham.\n", "arex.yaml": spec},
    )
    return path


def test_rows_that_do_not_fit_the_header_are_named():
    spec = MLSpec(
        id="t",
        title="t",
        run="true",
        metric={"name": "accuracy", "direction": "maximize"},
        data={"table": "data/sms.csv", "target": "label", "split": {"stratify": True}},
    )
    with pytest.raises(SourceError, match=r"data.table 'data/sms.csv' line 3 has fewer fields than its header \(2\)"):
        split_table(spec, "text,label\nhello,ham\ncut off\nbye,ham\n".encode("latin-1"))
    with pytest.raises(SourceError, match="line 2 has more fields than its header"):
        split_table(spec, "text,label\nWIN £5, now,spam\n".encode("latin-1"))


def test_encodings_are_detected_and_forced_ones_explained():
    text = "id,text\n1,Café £5 déjà\n"
    assert detect_encoding(text.encode("utf-8")) == "utf-8"
    assert detect_encoding(text.encode("latin-1")) == "cp1252"  # latin-1's letters are cp1252's
    assert detect_encoding("€ euro".encode("cp1252")) == "cp1252"
    assert detect_encoding(b"a,\x81b\n") == "latin-1"  # a byte cp1252 leaves undefined
    assert (
        detect_encoding(text.encode("utf-16")) == "utf-16" and detect_encoding(text.encode("utf-16-le")) == "utf-16-le"
    )
    assert detect_encoding(text.encode("utf-8-sig")) == "utf-8-sig"
    for codec in ("utf-8-sig", "utf-16", "utf-16-be", "latin-1", "utf-32"):
        assert decode_table(DataSpec(table="t.csv", target="y"), text.encode(codec))[0] == text, codec
    forced = DataSpec(table="data/sms.csv", target="y", encoding="utf-8")
    with pytest.raises(
        SourceError,
        match=r"data.table 'data/sms.csv' cannot be decoded as utf-8 \(byte 0xe9 on line 2\): set data.encoding",
    ):
        decode_table(forced, text.encode("latin-1"))


@pytest.fixture(scope="module")
def encoding_batch(tmp_path_factory):
    """One batch: a latin-1 table (builds), the same table forced to UTF-8 (rejected), and a sound
    repository whose env image build meets a failure no check anticipates (a bug, injected: any
    real one would be fixed once found), which must become that source's error."""
    import arex.envs.ml_build as ml_build

    root = tmp_path_factory.mktemp("encodings")
    real_env_image = ml_build.env_image

    def env_image(spec, deps, workspace, content):
        if spec.id == "broken":
            raise RuntimeError(f"image store\nis confused by {spec.id}")
        return real_env_image(spec, deps, workspace, content)

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("AREX_CACHE", str(root / "cache"))
        mp.setattr(ml_build, "env_image", env_image)
        sms = sms_repo(root / "sms", "sms-latin1")
        forced = sms_repo(root / "forced", "sms-forced", encoding="utf-8")
        broken = commit_repo(
            root / "broken",
            {
                "data/full.csv": LINEAR_TABLE,
                "train.py": LINEAR_TRAIN,
                "README.md": "x\n",
                "arex.yaml": spec_yaml("broken"),
            },
        )
        reports = build_envs([Path(broken.working_dir), sms, forced], root / "out", SandboxConfig(), concurrency=2)
    return root, {Path(r.source).name: r for r in reports}


@pytest.mark.docker
def test_latin1_table_builds_and_is_written_as_utf8(encoding_batch):
    root, reports = encoding_batch
    report = reports["sms"]
    assert report.status == "accepted", report.reason
    assert "data.table read as cp1252, written as UTF-8" in report.reason
    assert report.scores["baseline"] > report.scores["noop"] + 0.2
    env = root / "out" / "sms-latin1"
    train = (env / "workspace" / "data" / "train.csv").read_bytes().decode("utf-8")  # raises if not UTF-8
    test = (env / "workspace" / "data" / "test.csv").read_bytes().decode("utf-8")
    assert "£" in train and "crème brûlée" in train and "Zürich" in train + test and "Â" not in train
    assert train.splitlines()[0] == "id,text,label" and "\r" not in train
    (env / "private" / "labels.csv").read_bytes().decode("utf-8")
    assert not (env / "workspace" / "data" / "sms.csv").exists()


@pytest.mark.docker
def test_forced_encoding_that_fails_is_one_sentence(encoding_batch):
    _, reports = encoding_batch
    report = reports["forced"]
    assert report.status == "rejected"
    assert report.reason.startswith("data.table 'data/sms.csv' cannot be decoded as utf-8 (byte 0x")
    assert "set data.encoding in the spec" in report.reason and "\n" not in report.reason


@pytest.mark.docker
def test_an_unforeseen_failure_is_that_sources_error_and_the_batch_goes_on(encoding_batch):
    root, reports = encoding_batch
    report = reports["broken"]
    assert report.status == "error" and report.env_id == "broken"
    assert report.reason.startswith("unexpected RuntimeError: image store is confused by broken (at ml_build.py:"), (
        report.reason
    )
    assert "Traceback" not in report.reason and "\n" not in report.reason
    assert reports["sms"].status == "accepted" and (root / "out" / "sms-latin1" / "task.yaml").is_file()
    # its temporary folder is gone
    assert not (root / "out" / "broken").exists() and not [
        p for p in (root / "out").iterdir() if p.name.startswith(".broken-")
    ]
    saved = yaml.safe_load((root / "out" / "build-report.json").read_text())
    assert saved["summary"] == {"accepted": 1, "skipped": 0, "rejected": 1, "error": 1}


def test_batch_survives_a_builder_that_raises(tmp_path, cache, monkeypatch):
    """Whatever escapes a builder (here one that raises outright) is its source's row; the next
    source, a real repository rejected for its own reason, is still built and reported."""
    import arex.envs.build as build

    good = commit_repo(
        tmp_path / "other",
        {"data/full.csv": LINEAR_TABLE, "README.md": "x\n", "arex.yaml": spec_yaml("other", statement="NOPE.md")},
    )
    boom = commit_repo(
        tmp_path / "boom",
        {"data/full.csv": LINEAR_TABLE, "train.py": LINEAR_TRAIN, "README.md": "x\n", "arex.yaml": spec_yaml("boom")},
    )
    real = build.build_ml

    def flaky(path, out, sandbox, *options):
        if Path(path).name == "boom":
            raise KeyError("no such column")
        return real(path, out, sandbox, *options)

    monkeypatch.setattr(build, "build_ml", flaky)
    reports = build_envs([Path(boom.working_dir), Path(good.working_dir)], tmp_path / "out")
    assert [r.status for r in reports] == ["error", "rejected"]
    assert (
        reports[0].reason.startswith("unexpected KeyError: 'no such column' (at build.py:")
        and reports[0].env_id == "boom"
    )
    assert "field 'statement' names 'NOPE.md'" in reports[1].reason


# -- 3: a local git folder is built as its working tree ---------------------------------------------
@pytest.mark.docker
def test_working_tree_is_built_as_the_user_sees_it(tmp_path, cache):
    folder = tmp_path / "wt"
    committed = {"data/full.csv": LINEAR_TABLE, "train.py": LINEAR_TRAIN, "old.txt": "deleted later\n",
                 ".gitignore": "scratch/\n", "arex.yaml": spec_yaml("wt", statement="OLD.md")}  # fmt: skip
    repo = commit_repo(folder, committed)
    head = repo.head.commit.hexsha
    # Uncommitted work: the spec now names an untracked statement; a tracked file is deleted; an ignored folder.
    write(
        folder,
        {
            "arex.yaml": spec_yaml("wt", statement="TASK.md"),
            "TASK.md": "Predict y (first draft).\n",
            "scratch/big.bin": b"\0" * 100,
        },
    )
    (folder / "old.txt").unlink()
    pinned = tmp_path / "pinned.yaml"
    pinned.write_text(yaml.safe_dump({"repo": str(folder), "commit": head}))
    out = tmp_path / "out"

    first, at_commit = build_envs([folder, pinned], out)
    assert first.status == "accepted", first.reason
    assert (
        at_commit.status == "rejected"
        and "field 'statement' names 'OLD.md', which is not in the repository" in at_commit.reason
    )
    env = out / "wt"
    task = yaml.safe_load((env / "task.yaml").read_text())
    assert task["source_commit"] == f"{head}+worktree" and task["statement"] == "TASK.md"
    assert (env / "statement.md").read_text() == "Predict y (first draft).\n"
    workspace = {p.relative_to(env / "workspace").as_posix() for p in (env / "workspace").rglob("*") if p.is_file()}
    assert {"TASK.md", "train.py", ".gitignore", "arex.yaml"} <= workspace and not workspace & {
        "old.txt",
        "scratch/big.bin",
    }
    assert not any(part == ".git" for p in workspace for part in p.split("/"))
    assert repo.git.status("--porcelain") != ""  # the user's folder is as they left it

    (folder / "TASK.md").write_text("Predict y from x (second draft).\n")
    [second] = build_envs([folder], out)
    assert second.status == "accepted", second.reason
    assert (env / "statement.md").read_text() == "Predict y from x (second draft).\n"
    [again] = build_envs([folder], out)
    assert again.status == "skipped"

    repo.git.add("-A")
    repo.index.commit("the draft, committed")
    [committed_run] = build_envs([folder], out)
    assert committed_run.status == "skipped", committed_run.reason
    assert len([p for p in (cache_dir() / "trees").iterdir() if not p.name.startswith(".")]) == 1  # older trees pruned


# -- 4: YAML overlays -----------------------------------------------------------------------------
DRAFT_SPEC = spec_yaml(
    "overlaid",
    run="python3 arex_train.py",
    statement="STATEMENT.md",
    mutation={"file": "arex_train.py", "find": "mean + slope", "replace": "0 * slope"},
)


def upstream(tmp_path: Path) -> git.Repo:
    """Someone else's repository: no arex.yaml, a copy of the labelled table (which would leak),
    pickled models; the user will not fork it."""
    return commit_repo(tmp_path / "upstream", {"data/full.csv": LINEAR_TABLE, "data/raw.csv": LINEAR_TABLE,
                                               "models/a.pkl": b"\x80\x04N.", "models/b.pkl": b"\x80\x04N.",
                                               "models/notes.txt": "kept\n",
                                               "README.md": "Upstream readme.\n"})  # fmt: skip


def overlay_yaml(tmp_path: Path, name: str, **fields) -> Path:
    drafts = tmp_path / "drafts" / "t"
    write(
        drafts,
        {
            "arex.yaml": DRAFT_SPEC,
            "arex_train.py": LINEAR_TRAIN,
            "STATEMENT.md": "Predict y from x; the table is data/train.csv.\n",
        },
    )
    body = {"repo": f"file://{tmp_path / 'upstream'}", "commit": "main",
            "add": {"arex.yaml": "drafts/t/arex.yaml", "arex_train.py": "drafts/t/arex_train.py",
                    "STATEMENT.md": "drafts/t/STATEMENT.md"},
            "remove": ["data/raw.csv", "models/*.pkl"], **fields}  # fmt: skip
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(body))
    return path


@pytest.mark.docker
def test_overlay_adds_and_removes_files_without_a_fork(tmp_path, cache):
    upstream(tmp_path)
    source = overlay_yaml(tmp_path, "titanic")
    [report] = build_envs([source], tmp_path / "out")
    assert report.status == "accepted", report.reason  # data/raw.csv would have failed the leak gate
    env = tmp_path / "out" / "overlaid"
    workspace = {p.relative_to(env / "workspace").as_posix() for p in (env / "workspace").rglob("*") if p.is_file()}
    assert {"arex_train.py", "STATEMENT.md", "arex.yaml", "models/notes.txt", "README.md"} <= workspace
    assert not workspace & {"data/raw.csv", "models/a.pkl", "models/b.pkl", "data/full.csv"}
    assert (env / "statement.md").read_text() == "Predict y from x; the table is data/train.csv.\n"
    [checkout] = (cache / "repos").iterdir()
    # the cached checkout is untouched
    assert (checkout / "data" / "raw.csv").is_file() and not (checkout / "arex_train.py").exists()
    [again] = build_envs([source], tmp_path / "out")
    assert again.status == "skipped"


def test_overlay_content_digest_covers_added_files_and_removals(tmp_path, cache):
    repo = upstream(tmp_path)
    path = overlay_yaml(tmp_path, "a")
    first = open_source(path)
    digest = content_digest(first, "base")
    assert content_digest(open_source(path), "base") == digest
    assert (
        first.spec.id == "overlaid"
        and first.commit == repo.head.commit.hexsha
        and (first.folder / "arex_train.py").is_file()
    )
    (tmp_path / "drafts" / "t" / "arex_train.py").write_text(LINEAR_TRAIN + "# tuned\n")
    tuned = content_digest(open_source(path), "base")
    assert tuned != digest
    more = open_source(overlay_yaml(tmp_path, "b", remove=["data/raw.csv", "models/*.pkl", "models/notes.txt"]))
    assert content_digest(more, "base") not in (digest, tuned) and not (more.folder / "models" / "notes.txt").exists()
    assert not (more.folder / "models").exists() and not first.folder.exists()  # a source's older tree is pruned
    [checkout] = (cache / "repos").iterdir()
    # never overlaid in place
    assert {p.relative_to(checkout).as_posix() for p in checkout.rglob("*.pkl")} == {
        "models/a.pkl",
        "models/b.pkl",
    }


@pytest.mark.parametrize(
    "fields, message",
    [
        (
            {"add": {"arex.yaml": "drafts/t/arex.yaml", "train.py": "drafts/t/missing.py"}},
            "key 'add', entry 'train.py': file drafts/t/missing.py does not exist",
        ),
        (
            {"add": {"../outside.py": "drafts/t/arex_train.py"}},
            "key 'add', entry '../outside.py': give a path inside the repository",
        ),
        (
            {"add": {"/etc/cron.d/x": "drafts/t/arex_train.py"}},
            "key 'add', entry '/etc/cron.d/x': give a path inside the repository",
        ),
        (
            {"add": {".git/hooks/post-checkout": "drafts/t/arex_train.py"}},
            "key 'add', entry '.git/hooks/post-checkout': give a path inside",
        ),
        (
            {"remove": ["data/raw.csv", "weights/*.bin"]},
            "key 'remove', entry 'weights/*.bin' matches no file of the repository",
        ),
        ({"remove": ["../data"]}, "key 'remove', entry '../data': give a path inside the repository"),
        (
            {"add": {"models": "drafts/t/arex_train.py", "arex.yaml": "drafts/t/arex.yaml"}, "remove": []},
            "key 'add', entry 'models' clashes with 'models'",
        ),
        ({"ad": {}}, "unknown key 'ad'"),
    ],
)
def test_overlay_mistakes_are_one_sentence(tmp_path, cache, fields, message):
    upstream(tmp_path)
    source = overlay_yaml(tmp_path, "draft", **fields)
    [report] = build_envs([source], tmp_path / "out")
    assert report.status == "rejected" and str(source) in report.reason and message in report.reason, report.reason
    assert "\n" not in report.reason


def test_added_spec_errors_name_the_users_file(tmp_path, cache):
    upstream(tmp_path)
    source = overlay_yaml(tmp_path, "draft")
    (tmp_path / "drafts" / "t" / "arex.yaml").write_text(DRAFT_SPEC.replace("STATEMENT.md", "NOTES.md"))
    [report] = build_envs([source], tmp_path / "out")
    assert report.status == "rejected"
    assert (
        f"{(tmp_path / 'drafts' / 't' / 'arex.yaml').resolve()}: field 'statement' names 'NOTES.md'" in report.reason
    ), report.reason


# -- a metric is never repository code run on the host ---------------------------------------------
def test_metric_code_from_the_repository_never_runs_on_the_host(tmp_path, cache):
    """The attack: a spec (the repository's, or one a model drafted) naming `evil:score` as its
    metric, with evil.py in the repository. Before, arex imported evil.py on the host while loading
    the spec, so its top-level code ran outside any sandbox; now only built-in metrics exist."""
    marker = tmp_path / "pwned"
    evil = f"open({str(marker)!r}, 'w').write('ran on the host')\ndef score(y_true, y_pred):\n    return 0.0\n"
    repo = tmp_path / "repo"
    commit_repo(
        repo,
        {
            "data/full.csv": LINEAR_TABLE,
            "train.py": LINEAR_TRAIN,
            "evil.py": evil,
            "README.md": "x\n",
            "arex.yaml": spec_yaml("evil-metric", metric={"name": "evil:score", "direction": "maximize"}),
        },
    )
    [report] = build_envs([repo], tmp_path / "out", SandboxConfig())
    assert report.status == "rejected"
    assert "metric.name" in report.reason and "unknown metric 'evil:score'" in report.reason
    assert not marker.exists()


def test_unnamed_and_repeated_header_columns_get_stable_names():
    """A spreadsheet export's header `v1,v2,,,` and a repeated name: read as they were, later empty
    columns overwrote earlier ones and pandas named the rest by position, differently in the train
    and test files (a real SMS spam repository's baseline crashed on it)."""
    spec = MLSpec.model_validate(yaml.safe_load(spec_yaml("hdr", data={"table": "t.csv", "target": "v1"})))
    text = "v1,v2,,,v2\r\n" + "".join(f"{'ab'[i % 2]},m{i},,x{i},k{i}\r\n" for i in range(20))
    columns, train, public, private = split_table(spec, text)
    assert columns == ["id", "v1", "v2", "column_3", "column_4", "v2_2"]
    row = next(r for r in train + public + private if r["v2"] == "m3")
    assert (row["column_4"], row["v2_2"], row["column_3"]) == ("x3", "k3", "")
