"""`arex report`: a two-variant run of the real rollout loop (scripted teacher over real HTTP, the
`process` test backend and the tally env of tests/loop_kit.py), reported; every number in
report.json and in the page's tables is checked against numbers computed here from the records'
raw JSON lines; the report and a trajectory page are rendered by headless Chromium (screenshot
not blank, the DOM holds the titles and the curves' data); model output is shown escaped."""

import asyncio
import json
import os
import shutil
import subprocess
from html.parser import HTMLParser
from itertools import accumulate
from pathlib import Path
from statistics import fmean, pstdev

import pytest
from loop_kit import PROCESS_BACKEND, TEACHER, TallyEnv, process_sandbox
from typer.testing import CliRunner

from arex.cli import app
from arex.envs import runtime
from arex.envs.runtime import load_env
from arex.report import write_report
from arex.rollout.batch import run_batch
from arex.rollout.config import RolloutConfig
from arex.sandbox.base import BACKENDS
from arex.selection.selector import SelectConfig, select
from arex.teacher.config import Price
from arex.teacher.scripted import RoundScript, ScriptedServer

HOSTILE = "<script>alert(1)</script>"
HOSTILE_REFLECTION = (
    'REVIEW: <img src=x onerror="alert(2)"> looked fine.\nDIAGNOSE: none.\nPLAN: go on.\nSTATE: keep going.'
)
VARIANTS = [
    {"name": "no-skills", "overrides": ["rollout.general_skills=false", "rollout.task_skills=false"]},
    {"name": "skills", "overrides": []},
]


# -- the run -------------------------------------------------------------------------------------
def make_env(envs: Path, env_id: str):
    root = envs / env_id
    (root / "workspace").mkdir(parents=True)
    (root / "task.yaml").write_text(f"kind: tally\nid: {env_id}\ntitle: Count up\n")
    (root / "statement.md").write_text("Leave a number from 0 to 10 in answer.txt; higher is better.\n")
    (root / "workspace" / "answer.txt").write_text("1\n")
    (root / "workspace" / "rules.txt").write_text("do not edit\n")
    if env_id == "tally-a":  # a build stamp: TallyEnv's baseline (0.1) goes into the header
        (root / ".build.json").write_text('{"scores": {}}')
    return load_env(root)


# Priced, with a cached-input price: the report's cost numbers are then the records' own, not zeros.
PRICE = Price(input=3.0, cached_input=0.3, output=15.0)
PRICED = TEACHER.model_copy(update={"track_cost": True, "prices": {"scripted-teacher": PRICE}})


def run(envs, script, store: Path, config: RolloutConfig, samples: int) -> None:
    with ScriptedServer(script, model="scripted-teacher") as server:
        asyncio.run(run_batch(envs, PRICED, config, process_sandbox(), store, samples, 2, server.base_url))


def zigzag(n: int) -> list[str]:
    return [f"echo {[3, 2, 4][n - 1]} > answer.txt"]


def climbing_with_hostile_text(n: int) -> list[str]:
    return [f"echo {n + 1} > answer.txt"] + ([f"echo '{HOSTILE}' >> notes.txt"] if n == 2 else [])


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """Two variants on two envs: `no-skills` (3 zigzag rounds × 2 samples, plus one budget-ended
    rollout per env), `skills` (4 climbing rounds × 2 samples, hostile text in round 2); each
    variant selected into its own folder."""
    base = tmp_path_factory.mktemp("report-run")
    with pytest.MonkeyPatch.context() as mp:
        mp.setitem(runtime.KINDS, "tally", TallyEnv)
        mp.setitem(BACKENDS, "process", PROCESS_BACKEND)
        envs = [make_env(base / "envs", "tally-a"), make_env(base / "envs", "tally-b")]
        store = base / "store"
        store.mkdir()
        (store / "variants.json").write_text(json.dumps({"variants": VARIANTS}))
        run(envs, RoundScript(zigzag), store / "no-skills", RolloutConfig(rounds=3), samples=2)
        run(
            envs,
            RoundScript(lambda n: ["echo 7 > answer.txt"]),
            store / "no-skills",
            RolloutConfig(rounds=3, max_tokens=1),
            samples=1,
        )
        run(
            envs,
            RoundScript(climbing_with_hostile_text, lambda n: HOSTILE_REFLECTION),
            store / "skills",
            RolloutConfig(rounds=4),
            samples=2,
        )
        for variant in ("no-skills", "skills"):
            select(store / variant, base / "envs", base / "sel" / variant, SelectConfig(), process_sandbox())
    result = write_report(store, base / "report", base / "sel")
    return base, result


# -- numbers computed here, from the raw lines --------------------------------------------------
def raw_records(store: Path) -> list[list[dict]]:
    return [[json.loads(line) for line in p.read_text().splitlines()] for p in sorted(store.glob("*/*.jsonl"))]


def held_out(lines: list[dict]) -> list[float]:
    return [line["grade"]["held_out_score"] for line in lines if line["type"] == "round_end"]


def expected_curve(records: list[list[dict]]) -> list[dict]:
    """Best so far by round, each rollout's last best carried past its end (no survivorship)."""
    runs = [list(accumulate(held_out(r), max)) for r in records]
    out = []
    for n in range(1, max(map(len, runs)) + 1):
        values = [run[min(n, len(run)) - 1] for run in runs]
        played = sum(len(run) >= n for run in runs)
        ci = 1.96 * pstdev(values) / len(values) ** 0.5 if len(values) > 1 else 0.0
        out.append(
            {"round": n, "n": len(values), "mean": fmean(values), "spread": pstdev(values), "ran": played, "ci": ci}
        )
    return out


def expected_improving(records: list[list[dict]]) -> list[float]:
    out = []
    for n in range(1, max(len(held_out(r)) for r in records) + 1):
        count = 0
        for r in records:
            scores = held_out(r)
            baseline = r[0]["baseline_score"] if r[0]["baseline_score"] is not None else float("-inf")
            before = max(scores[: n - 1]) if n > 1 else baseline
            count += any(s > before for s in scores[n - 1 :])
        out.append(count / len(records))
    return out


def expected_spend(records: list[list[dict]]) -> dict[int, tuple[int, int]]:
    """round -> (calls, tokens): every step's call, every reflection, every spent line."""
    table: dict[int, list[int]] = {}
    for lines in records:
        for line in lines:
            row = (
                table.setdefault(line.get("round", 0), [0, 0])
                if line["type"] in ("step", "round_end", "spent")
                else None
            )
            if line["type"] == "step":
                row[0], row[1] = row[0] + 1, row[1] + line["call"]["prompt_tokens"] + line["call"]["completion_tokens"]
            elif line["type"] == "round_end":
                call = line["reflection"]["call"]
                row[0], row[1] = row[0] + 1, row[1] + call["prompt_tokens"] + call["completion_tokens"]
            elif line["type"] == "spent":
                row[0], row[1] = row[0] + line["calls"], row[1] + line["prompt_tokens"] + line["completion_tokens"]
    return {n: tuple(v) for n, v in sorted(table.items())}


def normalise(store: Path, record: list[dict]) -> float:
    """A rollout's best score as the share of its env's gap from baseline to the best any rollout of
    any variant reached (baseline: recorded, else the lowest score reached)."""
    mine = [
        r
        for r in raw_records(store / "no-skills") + raw_records(store / "skills")
        if r[0]["env_id"] == record[0]["env_id"]
    ]
    every = [s for r in mine for s in held_out(r)]
    recorded = next((r[0]["baseline_score"] for r in mine if r[0]["baseline_score"] is not None), None)
    low = recorded if recorded is not None else min(every)
    high = max([*every, *([recorded] if recorded is not None else [])])
    return (max(held_out(record)) - low) / (high - low)


def by_env(records: list[list[dict]]) -> dict[str, list[list[dict]]]:
    out: dict[str, list] = {}
    for r in records:
        out.setdefault(r[0]["env_id"], []).append(r)
    return out


def cell(values: list[float]) -> str:
    return f"{fmean(values):.4g} ± {pstdev(values):.4g} (n={len(values)})"


class Tables(HTMLParser):
    """Each table's rows (cell texts), by the table's class."""

    def __init__(self, text: str):
        super().__init__()
        self.tables: dict[str, list[list[str]]] = {}
        self._table, self._row, self._cell = None, None, None
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self._table = self.tables.setdefault(dict(attrs).get("class", ""), [])
        elif tag == "tr" and self._table is not None:
            self._row = []
            self._table.append(self._row)
        elif tag in ("td", "th") and self._row is not None:
            self._cell = []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None:
            self._row.append("".join(self._cell).strip())
            self._cell = None
        elif tag == "table":
            self._table = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


def test_the_report_numbers_are_the_records_numbers(run_dir):
    base, result = run_dir
    report = json.loads(result.json.read_text())
    assert [v["name"] for v in report["variants"]] == ["no-skills", "skills"]  # variants.json's order
    tables = Tables(result.html.read_text())
    stagewise = {row[0]: row for row in tables.tables["stagewise"][1:]}
    header = ["variant", "overrides", "tally-a (tally score)", "tally-b (tally score)", "overall (normalised)"]
    assert tables.tables["stagewise"][0] == header
    for variant in report["variants"]:
        records = raw_records(base / "store" / variant["name"])
        assert variant["rollouts"] == len(records) == {"no-skills": 6, "skills": 4}[variant["name"]]
        for env in variant["envs"]:
            mine = by_env(records)[env["env"]]
            assert env["best_curve"] == pytest.approx(expected_curve(mine))
            assert env["improving"] == pytest.approx(expected_improving(mine))
            finals = [max(held_out(r)) for r in mine]
            assert (env["final"]["mean"], env["final"]["spread"]) == pytest.approx((fmean(finals), pstdev(finals)))
            assert stagewise[variant["name"]][2 + ["tally-a", "tally-b"].index(env["env"])].startswith(cell(finals))
        normalised = [normalise(base / "store", r) for r in records]
        assert stagewise[variant["name"]][4] == cell(normalised)
        spend = expected_spend(records)
        assert {s["round"]: (s["calls"], s["tokens"]) for s in variant["spend"]} == spend
        assert sum(t for _, t in spend.values()) == sum(r[-1]["tokens"] for r in records)  # each end line's total
        spend_rows = [row[1:4] for row in tables.tables["spend"][1:] if row[0] == variant["name"]]
        assert spend_rows == [[str(n), str(c), str(t)] for n, (c, t) in spend.items()]
        endings: dict[tuple[str, str], int] = {}
        for r in records:
            endings[(r[-1]["status"], r[-1]["reason"])] = endings.get((r[-1]["status"], r[-1]["reason"]), 0) + 1
        assert {(e["status"], e["reason"]): e["count"] for e in variant["endings"]} == endings
        assert sorted(row[1:] for row in tables.tables["endings"][1:] if row[0] == variant["name"]) == sorted(
            [s, why, str(n)] for (s, why), n in endings.items()
        )
    no_skills = report["variants"][0]
    assert {e["status"] for e in no_skills["endings"]} == {"done", "budget"}
    [a] = [e for e in no_skills["envs"] if e["env"] == "tally-a"]
    # the budget rollout stopped after round 1: it still counts, its best carried forward
    assert [(p["n"], p["ran"]) for p in a["best_curve"]] == [(3, 3), (3, 2), (3, 2)] and a["best_curve"][0][
        "spread"
    ] > 0
    # The PNG copies of the curves: one real image per env, drawn (not blank).
    from matplotlib.image import imread

    assert sorted(p.name for p in result.pngs) == ["tally-a.png", "tally-b.png", "test-time-scaling.png"]
    for png in result.pngs:
        pixels = imread(png)
        assert pixels.shape[0] > 200 and pixels.shape[1] > 500 and pixels[..., :3].std() > 0.05


def expected_cost(records: list[list[dict]], kept: int) -> dict:
    """Summed from the raw lines: every call priced here from its token counts."""
    calls = [line["call"] for r in records for line in r if line["type"] == "step"]
    reflections = [line["reflection"]["call"] for r in records for line in r if line["type"] == "round_end"]
    spent = [line for r in records for line in r if line["type"] == "spent"]
    paid = calls + reflections + spent
    prompt, cached = sum(c["prompt_tokens"] for c in paid), sum(c["cached_tokens"] for c in paid)
    usd = (
        sum(
            (c["prompt_tokens"] - c["cached_tokens"]) * PRICE.input
            + c["cached_tokens"] * PRICE.cached_input
            + c["completion_tokens"] * PRICE.output
            for c in paid
        )
        / 1e6
    )
    rounds = len(reflections)
    return {
        "rounds": rounds,
        "prompt": prompt,
        "cached_share": cached / prompt,
        "acting": sum(c["completion_tokens"] for c in calls),
        "reflection": sum(c["completion_tokens"] for c in reflections),
        "cost": usd,
        "per_round": usd / rounds,
        "per_kept": usd / kept,
    }


def test_cost_cached_share_and_output_are_the_records_numbers(run_dir):
    base, result = run_dir
    report = json.loads(result.json.read_text())
    rows = {row[0]: row for row in Tables(result.html.read_text()).tables["cost"][1:]}
    for variant in report["variants"]:
        records = raw_records(base / "store" / variant["name"])
        kept = json.loads((base / "sel" / variant["name"] / "selection.json").read_text())["kept"]
        want, c = expected_cost(records, kept), variant["cost"]
        assert kept > 0 and 0 < want["cached_share"] < 1  # the scripted server served cached prefixes
        got = (c["rounds"], c["prompt_tokens"], c["acting_output"], c["reflection_output"], c["kept"])
        assert got == (want["rounds"], want["prompt"], want["acting"], want["reflection"], kept)
        assert (c["cached_share"], c["cost_usd"], c["cost_per_round"], c["cost_per_kept"]) == pytest.approx(
            (want["cached_share"], want["cost"], want["per_round"], want["per_kept"])
        )
        # priced at the full input price, the bill would be higher: the cached price was used
        full = want["cost"] + want["cached_share"] * want["prompt"] * (PRICE.input - PRICE.cached_input) / 1e6
        assert c["cost_usd"] < full
        assert rows[variant["name"]][4] == f"{want['cached_share']:.1%}"
        assert rows[variant["name"]][5:7] == [
            f"{want['acting'] / want['rounds']:.1f}",
            f"{want['reflection'] / want['rounds']:.1f}",
        ]
        assert rows[variant["name"]][7] == "150 words / 1024 tokens"  # the defaults, as recorded
        assert rows[variant["name"]][8:] == [
            f"{want['cost']:.4f}",
            f"{want['per_round']:.4f}",
            str(kept),
            f"{want['per_kept']:.4f}",
        ]
        by_round = {s["round"]: s for s in variant["spend"]}
        for n, s in by_round.items():
            mine = [line for r in records for line in r if line.get("round") == n]
            acting = sum(line["call"]["completion_tokens"] for line in mine if line["type"] == "step")
            reflecting = sum(
                line["reflection"]["call"]["completion_tokens"] for line in mine if line["type"] == "round_end"
            )
            assert (s["acting_output"], s["reflection_output"]) == (acting, reflecting)


def test_selection_drops_are_the_selections(run_dir):
    base, result = run_dir
    report = json.loads(result.json.read_text())
    rows = Tables(result.html.read_text()).tables["drops"][1:]
    seen = []
    for s in report["selections"]:
        written = json.loads((base / "sel" / s["variant"] / "selection.json").read_text())
        assert (s["kept"], s["total"]) == (written["kept"], written["total"])
        assert {d["reason"]: d["count"] for d in s["drops"]} == {r: row["count"] for r, row in written["drops"].items()}
        seen += [[s["variant"], d["reason"], str(d["count"])] for d in s["drops"]]
    assert sorted(seen) == sorted(row[:3] for row in rows)
    assert sorted(s["variant"] for s in report["selections"]) == ["no-skills", "skills"]


# -- rendering -------------------------------------------------------------------------------------
def chromium(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    binary = shutil.which("chromium")
    assert binary, "chromium is not installed: run scripts/setup.sh (apt-get install chromium)"
    flags = [
        "--headless",
        "--disable-gpu",
        "--no-first-run",
        "--hide-scrollbars",
        "--virtual-time-budget=3000",
        f"--user-data-dir={tmp_path / 'chromium-profile'}",
    ]
    flags += ["--no-sandbox"] if os.geteuid() == 0 else []
    done = subprocess.run([binary, *flags, *args], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return done


def screenshot_spread(tmp_path: Path, page: Path, name: str) -> float:
    import matplotlib.image

    png = tmp_path / f"{name}.png"
    chromium(tmp_path, f"--screenshot={png}", "--window-size=1200,1400", page.as_uri())
    pixels = matplotlib.image.imread(png)[..., :3].mean(axis=2)
    return float(pixels.std())


class Elements(HTMLParser):
    """Every element of a DOM dump: (tag, attributes, its ancestors' attributes), and the text."""

    def __init__(self, text: str):
        super().__init__()
        self.found: list[tuple[str, dict, list[dict]]] = []
        self._open: list[tuple[str, dict]] = []
        self.text: list[str] = []
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.found.append((tag, attrs, [a for _, a in self._open]))
        if tag not in ("meta", "br", "img", "input", "link", "hr"):  # HTML's void elements
            self._open.append((tag, attrs))

    def handle_endtag(self, tag):
        if any(t == tag for t, _ in self._open):
            while self._open.pop()[0] != tag:
                pass

    def handle_data(self, data):
        self.text.append(data)


@pytest.mark.browser
def test_the_report_renders_with_its_curves(run_dir, tmp_path):
    base, result = run_dir
    report = json.loads(result.json.read_text())
    assert screenshot_spread(tmp_path, result.html, "report") > 0.02  # not a blank page
    dom = Elements(chromium(tmp_path, "--dump-dom", result.html.as_uri()).stdout)
    text = " ".join(dom.text)
    for title in (
        "arex run report",
        "Stage-wise results",
        "Best held-out score by round",
        "Tokens and cost per round",
        "Endings",
        "Selection",
        "Trajectories",
    ):
        assert title in text
    for variant in report["variants"]:
        for env in variant["envs"]:
            points = [
                (int(a["data-x"]), float(a["data-y"]))
                for tag, a, up in dom.found
                if tag == "circle"
                and a.get("data-series") == variant["name"]
                and any(u.get("class") == "curve" and u.get("data-env") == env["env"] for u in up)
            ]
            curve = expected_curve(by_env(raw_records(base / "store" / variant["name"]))[env["env"]])
            assert points == [(p["round"], pytest.approx(p["mean"])) for p in curve]
    # nothing runs, nothing loads
    assert not [a for tag, a, _ in dom.found if tag in ("script", "img", "link", "iframe")]


@pytest.mark.browser
def test_a_trajectory_page_shows_rounds_and_escapes_model_output(run_dir, tmp_path):
    base, result = run_dir
    [path] = [p for p in result.pages if "/skills/tally-a/" in p.as_posix() and "sample 0" in p.read_text()]
    [record] = [
        r for r in raw_records(base / "store" / "skills") if r[0]["env_id"] == "tally-a" and r[0]["sample"] == 0
    ]
    assert HOSTILE in json.dumps(record) and HOSTILE not in path.read_text()
    assert screenshot_spread(tmp_path, path, "viewer") > 0.02
    dump = chromium(tmp_path, "--dump-dom", path.as_uri()).stdout
    dom = Elements(dump)
    text = "".join(dom.text)
    assert "Trajectory tally-a · sample 0 · skills" in text
    rounds = [a for tag, a, _ in dom.found if tag == "details" and a.get("class") == "round"]
    assert [a["id"] for a in rounds] == ["round-1", "round-2", "round-3", "round-4"]
    spark = [float(a["data-value"]) for tag, a, _ in dom.found if tag == "circle" and "data-value" in a]
    assert spark == pytest.approx(held_out(record)) and spark == pytest.approx([0.2, 0.3, 0.4, 0.5])
    # the command and the reflection are text on the page, not elements
    assert f"echo '{HOSTILE}' >> notes.txt" in text and "&lt;script&gt;alert(1)&lt;/script&gt;" in dump
    assert '<img src=x onerror="alert(2)"> looked fine.' in text
    assert not [tag for tag, _, _ in dom.found if tag in ("script", "img")]
    assert "@@ -1 +1 @@-2+3" in text  # round 2's diff against round 1 (the spans are blocks)


def test_the_command_writes_the_report_and_a_plain_store_is_one_variant(run_dir, tmp_path):
    base, _ = run_dir
    out = tmp_path / "plain"
    done = CliRunner().invoke(app, ["report", str(base / "store" / "skills"), "--out", str(out), "--json"])
    assert done.exit_code == 0, done.output
    summary = json.loads(done.stdout)
    assert (
        summary["verb"] == "report"
        and summary["counts"]["trajectories"] == 4
        and summary["paths"]["report"] == str(out / "report.html")
    )
    assert [v["name"] for v in json.loads((out / "report.json").read_text())["variants"]] == ["skills"]
    missing = CliRunner().invoke(app, ["report", str(tmp_path / "nowhere"), "--out", str(out)])
    assert missing.exit_code == 2 and "does not exist" in missing.output
