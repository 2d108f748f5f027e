"""Tool-call trajectories (`rollout.action_format: tools`, issue 17): the teacher is offered OpenAI
tool definitions and acts through `tool_calls`; each call is answered by a `tool` message; the
record rebuilds every request; a rollout SIGKILLed mid-round resumes; selection and export work as
in the text format; rows keep the tool calls and a `tools` column, load with `datasets`, pass TRL's
conversational check and render under a tool-aware template (qwen2.5's) with the tool-call turns
trained and the tool results not. No Docker: the `tally` kind of tests/loop_kit.py on the
`process` test backend, the scripted server over real HTTP."""

import asyncio
import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from loop_kit import TEACHER, climbing, process_sandbox, register_tally_kind, rollout
from reliability_kit import make_tally_env, notes_commands, rollout_args, run_child
from tokenizer_kit import CHATML, TEMPLATES, bpe_tokenizer, sft_args, supervised_runs

from arex.dataset.export import ExportConfig, export, kept_records
from arex.dataset.masks import Masker, TemplateError
from arex.envs.runtime import load_env
from arex.errors import UserInputError
from arex.record.snapshots import SnapshotStore, read_member
from arex.record.trajectory import load
from arex.rollout.batch import config_hash
from arex.rollout.config import RolloutConfig
from arex.selection.selector import SelectConfig, select
from arex.teacher.client import TeacherClient
from arex.teacher.scripted import Reply, RoundScript, ScriptedServer, tool_call

TOOLS = RolloutConfig(rounds=3, action_format="tools")
REFLECT = "Reflect, then write"


pytestmark = pytest.mark.usefixtures("tally_kind")  # the tally kind and the process backend registered


@pytest.fixture
def env(tmp_path):
    return load_env(make_tally_env(tmp_path / "envs", "tally"))


@pytest.fixture
def skills(tmp_path) -> Path:
    folder = tmp_path / "skills" / "tidy-notes"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(
        "---\nname: tidy-notes\ndescription: Keep notes short.\n---\nWrite one line per round.\n"
    )
    return folder.parent


def rebuilt(t) -> list[str]:
    return sorted(json.dumps(r.messages(i)) for r in t.rounds for i in [*range(len(r.steps)), None])


def answered(messages: list[dict]) -> bool:
    """Every assistant turn with tool calls is followed by one `tool` message per call, in order."""
    for i, m in enumerate(messages):
        if m["role"] == "assistant" and m.get("tool_calls"):
            ids = [c["id"] for c in m["tool_calls"]]
            after = messages[i + 1 : i + 1 + len(ids)]
            if [(x["role"], x.get("tool_call_id")) for x in after] != [("tool", j) for j in ids]:
                return False
    return True


# -- the loop ----------------------------------------------------------------------------------------
def test_the_teacher_acts_through_tool_calls_and_every_request_is_rebuilt(env, skills, tmp_path):
    def commands(n):
        read = [Reply(tool_calls=(tool_call("read_skill", {"name": "tidy-notes"}),))] if n == 1 else []
        return read + climbing(n)

    # relative: the process backend has no /
    config = RolloutConfig(rounds=2, action_format="tools", skills_dir=str(skills), skills_target="skills")
    summary, [t], requests = rollout(env, RoundScript(commands), tmp_path / "store", config)
    assert summary["endings"] == {"done": 1} and t.held_out == [0.2, 0.3]
    assert t.header.action_format == "tools" and [x["function"]["name"] for x in t.header.tools] == [
        "bash",
        "submit",
        "read_skill",
    ]
    assert t.header.schema_version == 3  # an arex that predates tool calls says "upgrade arex"
    assert t.header.tools[2]["function"]["parameters"]["properties"]["name"]["enum"] == ["tidy-notes"]
    assert all(r["tools"] == t.header.tools for r in requests)  # every call, the reflection's too
    acting = [r for r in requests if REFLECT not in r["messages"][-1]["content"]]
    assert [r.get("tool_choice") for r in requests if r not in acting] == ["none", "none"]  # reflections: plain replies
    assert "tool_choice" not in acting[0] and "exactly one tool call" in acting[0]["messages"][0]["content"].lower()
    assert sorted(json.dumps(r["messages"]) for r in requests) == rebuilt(t)
    assert all(answered(r["messages"]) for r in requests)
    first = t.rounds[0].steps
    assert first[0].action.command == "cat skills/tidy-notes/SKILL.md" and "one line per round" in first[0].shown
    assert [s.action.kind for s in first] == ["command", "command", "command", "submit"]
    assert first[-1].tool_results == ["Submitted for grading."] and all(s.observation is None for s in first)
    assert all(r.end.reflection.complete and r.end.ending == "submitted" for r in t.rounds)


def test_full_history_carries_tool_turns_into_the_next_rounds_context(env, tmp_path):
    config = RolloutConfig(rounds=2, action_format="tools", context="full-history")
    _, [t], requests = rollout(env, RoundScript(climbing), tmp_path / "store", config)
    context = t.rounds[1].start.context
    assert any(m.tool_calls for m in context) and any(m.role == "tool" and m.tool_call_id for m in context)
    assert sorted(json.dumps(r["messages"]) for r in requests) == rebuilt(t)
    assert all(answered(r["messages"]) for r in requests)


def test_malformed_tool_calls_are_format_errors_and_every_call_is_answered(env, tmp_path):
    bad = [
        Reply(content="I will look around first."),  # no tool call
        Reply(tool_calls=(tool_call("rm_everything", {}),)),
        Reply(tool_calls=(tool_call("bash", '{"command": "ls"'),)),  # arguments not JSON
        Reply(tool_calls=(tool_call("bash", {"cmd": "ls"}),)),  # no `command`
    ]
    two = Reply(
        tool_calls=(
            tool_call("bash", {"command": "echo 5 > answer.txt"}),
            tool_call("bash", {"command": "echo 9 > answer.txt"}),
        )
    )
    script = RoundScript(lambda n: bad if n == 1 else [two])
    _, [t], requests = rollout(
        env, script, tmp_path / "store", RolloutConfig(rounds=2, action_format="tools", format_error_streak=4)
    )
    one, two_ = t.rounds
    assert one.end.ending == "format_errors" and [s.action.kind for s in one.steps] == ["invalid"] * 4
    assert [s.action.error for s in one.steps] == [
        "no tool call", "unknown tool 'rm_everything'", "the arguments of `bash` are not a JSON object",
        "`bash` needs a non-empty `command` string",
    ]  # fmt: skip
    assert not any(s.usable or s.exec for s in one.steps)
    # nothing to answer: a user message
    assert one.steps[0].tool_results is None and "no tool call" in one.steps[0].observation
    assert all(
        s.observation is None and len(s.tool_results) == 1 and s.action.error in s.tool_results[0]
        for s in one.steps[1:]
    )
    # the malformed arguments are recorded as sent, and repeated to the teacher as an empty object
    assert one.steps[2].call.tool_calls[0].function.arguments == '{"command": "ls"'
    assert one.messages(3)[-2]["tool_calls"][0]["function"]["arguments"] == "{}"
    # several calls: the first runs, the others are answered as not run
    assert two_.held_out == 0.5 and two_.steps[0].tool_results[1].startswith("Not run")
    assert sorted(json.dumps(r["messages"]) for r in requests) == rebuilt(t) and all(
        answered(r["messages"]) for r in requests
    )
    selection = select(tmp_path / "store", env.dir.parent, tmp_path / "sel", SelectConfig(), process_sandbox())
    # as in text: round 1 ended without submit, on four unusable actions in a row
    assert [v.reasons for v in selection.dropped] == [["protocol", "repeated_actions"]]


@pytest.mark.parametrize("fmt", ["text", "tools"])
def test_unusable_replies_and_budgets_count_alike_in_both_formats(env, tmp_path, fmt):
    def babble(request, index):
        return (
            "I will think about it."
            if REFLECT not in request["messages"][-1]["content"]
            else "REVIEW: a\nDIAGNOSE: b\nPLAN: c\nSTATE: d"
        )

    _, [t], _ = rollout(env, babble, tmp_path / "a", RolloutConfig(rounds=2, format_error_streak=3, action_format=fmt))
    assert [r.end.ending for r in t.rounds] == ["format_errors", "format_errors"]
    assert [[s.usable for s in r.steps] for r in t.rounds] == [[False] * 3] * 2 and all(
        s.shown for r in t.rounds for s in r.steps
    )
    _, [b], _ = rollout(
        env, RoundScript(climbing), tmp_path / "b", RolloutConfig(rounds=5, max_tokens=1, action_format=fmt)
    )
    assert b.end.status == "budget" and [r.end.ending for r in b.rounds] == ["budget"] and len(b.rounds[0].steps) == 1


def test_a_text_record_is_written_as_before(env, tmp_path):
    _, [t], _ = rollout(env, RoundScript(climbing), tmp_path / "store", RolloutConfig(rounds=1))
    lines = [json.loads(line) for line in t.path.read_text().splitlines()]
    assert not {"action_format", "tools"} & set(lines[0]) and t.header.action_format == "text"
    assert t.header.schema_version == 2  # every reader knows it
    steps = [line for line in lines if line["type"] == "step"]
    assert steps and not any("tool_results" in s or "tool_calls" in s["call"] for s in steps)
    assert config_hash(TEACHER, RolloutConfig(rounds=1)) != config_hash(
        TEACHER, RolloutConfig(rounds=1, action_format="tools")
    )


def test_tool_prompts_missing_from_a_prompts_file_are_named(tmp_path):
    from arex.rollout.config import BUNDLED

    text = (BUNDLED / "prompts" / "default.yaml").read_text().split("# The `tools` action format")[0]
    (tmp_path / "p.yaml").write_text(text)
    assert RolloutConfig(prompts=str(tmp_path / "p.yaml")).load_prompts()  # enough for text
    with pytest.raises(UserInputError, match=r"lacks: format_error_tools, system_tools, .*action_format: tools"):
        RolloutConfig(prompts=str(tmp_path / "p.yaml"), action_format="tools").load_prompts()


def test_the_client_sends_tools_and_reads_tool_calls():
    calls = (tool_call("bash", {"command": "ls"}, id="c1"),)
    with ScriptedServer([Reply(tool_calls=calls), Reply(tool_calls=calls)] * 2) as server:

        async def ask():
            client = TeacherClient(TEACHER.model_copy(update={"retry_empty": False}), base_url=server.base_url)
            tools = [
                {"type": "function", "function": {"name": "bash", "parameters": {"type": "object", "properties": {}}}}
            ]
            acting = await client.chat([{"role": "user", "content": "go"}], tools=tools)
            told_not_to = await client.chat([{"role": "user", "content": "reflect"}], tools=tools, tool_choice="none")
            await client.close()
            return acting, told_not_to

        acting, told_not_to = asyncio.run(ask())
        assert (
            server.requests[0]["tools"][0]["function"]["name"] == "bash" and server.requests[1]["tool_choice"] == "none"
        )
    assert (
        acting.status == "ok"
        and acting.content == ""
        and acting.tool_calls
        == [{"id": "c1", "type": "function", "function": {"name": "bash", "arguments": '{"command": "ls"}'}}]
    )
    assert acting.finish_reason == "tool_calls"
    # a call it was told not to make is no reply
    assert told_not_to.status == "empty" and told_not_to.sampling["tool_choice"] == "none"


# -- killed, resumed, selected, exported -------------------------------------------------------------
@pytest.fixture(scope="module")
def qwen(tmp_path_factory) -> Path:
    """A tokenizer with TRL's qwen2.5 chat template (tool-aware), saved as a folder."""
    folder = tmp_path_factory.mktemp("qwen")
    bpe_tokenizer(
        (TEMPLATES / "qwen2_5.jinja").read_text(encoding="utf-8"), ["<|im_start|>", "<|im_end|>"]
    ).save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def killed_and_resumed(tmp_path_factory, zygote) -> dict:
    """A tools rollout SIGKILLed mid-round (its 5th command has run, its step line not written), then
    run again to the end; then selected and exported with every granularity."""
    root = tmp_path_factory.mktemp("killed")
    envs = root / "envs"
    make_tally_env(envs, "tally")
    with ScriptedServer(RoundScript(notes_commands), model="scripted-teacher") as server:
        spec = {
            "envs": [str(envs / "tally")], "store": str(root / "store"), "base_url": server.base_url,
            "samples": 1, "concurrency": 1, "backend": "process",
            "teacher": {"model": "scripted-teacher", "track_cost": False, "backoff_base_s": 0.01},
            "rollout": {"rounds": 3, "action_format": "tools"},
        }  # fmt: skip
        killed = run_child(rollout_args(spec), root / "events.log", pause="step:5", zygote=zygote)
        [path] = sorted((root / "store").glob("*/*.jsonl"))
        cut = load(path)
        finished = run_child(rollout_args(spec), root / "events.log", zygote=zygote)
        requests = list(server.requests)
    register_tally_kind()  # select and export run here (the `tally_kind` fixture is per test)
    selection = select(root / "store", envs, root / "sel", SelectConfig(), process_sandbox())
    config = ExportConfig(granularities=("rounds", "trajectories", "calls"), tokenizer=None)
    stats = export(kept_records(root / "sel"), root / "dataset", config, envs)
    return {
        "root": root,
        "path": path,
        "killed": killed,
        "cut": cut,
        "finished": finished,
        "requests": requests,
        "selection": selection,
        "stats": stats,
    }


def test_a_tools_rollout_killed_mid_round_resumes_to_the_same_record(killed_and_resumed):
    k = killed_and_resumed
    assert k["killed"].killed and k["killed"].where == "step" and not k["finished"].killed
    assert [r.number for r in k["cut"].rounds] == [1] and k["cut"].end is None
    t = load(k["path"])
    assert t.end.status == "done" and [r.number for r in t.rounds] == [1, 2, 3] and t.held_out == [0.2, 0.3, 0.4]
    assert [s.round for s in t.spent] == [2] and t.spent[0].calls == 1  # the cut round's paid call
    assert all(s.call.tool_calls for r in t.rounds for s in r.steps)
    # every request of the final record was sent exactly as rebuilt (the killed run's too)
    sent = {json.dumps(r["messages"]) for r in k["requests"]}
    assert set(rebuilt(t)) <= sent and all(answered(r["messages"]) for r in k["requests"])
    archive = SnapshotStore(k["path"].with_suffix("") / "snapshots").path(t.rounds[-1].end.snapshot)
    # round 2 played once
    assert read_member(archive, "notes.txt", 1000).decode() == "round-1 ✓\nround-2 ✓\nround-3 ✓\n"


@pytest.mark.heavy
def test_the_resumed_tools_rollout_is_selected_and_exported_with_its_tool_calls(killed_and_resumed):
    from datasets import load_dataset
    from trl.data_utils import is_conversational

    k = killed_and_resumed
    assert len(k["selection"].kept) == 1 and k["selection"].kept[0].scores["regraded_last"] == 0.4
    assert k["stats"].tool_trajectories == 1 and k["stats"].rows == {"rounds": 3, "trajectories": 1, "calls": 15}
    header = load(k["path"]).header
    for config in ("rounds", "trajectories", "calls"):
        rows = load_dataset("parquet", data_files=str(k["root"] / "dataset" / config / "*.parquet"), split="train")
        assert all(is_conversational(row) for row in rows)
        assert {json.dumps(json.loads(row["tools"])) for row in rows} == {json.dumps(header.tools)}
    rounds = load_dataset("parquet", data_files=str(k["root"] / "dataset" / "rounds" / "*.parquet"), split="train")
    messages = rounds[0]["messages"]
    calls = [m for m in messages if m["tool_calls"]]
    # objects, as templates take them
    assert [c["tool_calls"][0]["function"]["arguments"] for c in calls] == [
        {"command": c} for c in notes_commands(1)
    ] + [{}]
    assert [m["tool_call_id"] for m in messages if m["role"] == "tool"] == [c["tool_calls"][0]["id"] for c in calls]
    assert rounds[0]["weights"] == [1.0 if m["role"] == "assistant" else 0.0 for m in messages]
    card = (k["root"] / "dataset" / "README.md").read_text()
    assert "1 of 1 trajectories acted through tool calls" in card


@pytest.mark.heavy
def test_tool_rows_render_under_a_tool_aware_template_through_trl(killed_and_resumed, qwen):
    from datasets import load_dataset
    from transformers import AutoTokenizer
    from trl.data_utils import apply_chat_template

    k = killed_and_resumed
    tokenizer = AutoTokenizer.from_pretrained(str(qwen), local_files_only=True)
    row = load_dataset("parquet", data_files=str(k["root"] / "dataset" / "calls" / "*.parquet"), split="train")[1]
    rendered = apply_chat_template(
        {"prompt": row["prompt"], "completion": row["completion"]}, tokenizer, tools=json.loads(row["tools"])
    )
    # the definitions, in the system turn
    assert '"name": "bash"' in rendered["prompt"] and "<tools>" in rendered["prompt"]
    assert (
        '<tool_call>\n{"name": "bash", "arguments": {"command": "echo \\"round-1 ✓\\" >> notes.txt"}}\n</tool_call>'
        in rendered["prompt"]
    )
    assert "<tool_response>\nexit code 0" in rendered["prompt"]
    assert rendered["completion"].startswith(
        '<tool_call>\n{"name": "bash", "arguments": {"command": "echo 2 > answer.txt"}}'
    )


def test_ready_masks_train_the_tool_calls_and_not_the_tool_results(killed_and_resumed, qwen, tmp_path):
    k = killed_and_resumed
    stats = export(
        kept_records(k["root"] / "sel"), tmp_path / "dataset", ExportConfig(tokenizer=str(qwen)), k["root"] / "envs"
    )
    assert stats.rows["rounds-tokens"] == 3
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(qwen), local_files_only=True)
    t = load(k["path"])
    for row in sorted(pq.read_table(tmp_path / "dataset" / "tokens" / "rounds").to_pylist(), key=lambda r: r["round"]):
        runs = supervised_runs(tokenizer, row["input_ids"], row["weights"])
        commands = notes_commands(row["round"])
        expected = [
            '<tool_call>\n{"name": "bash", "arguments": '
            f"{json.dumps({'command': c}, ensure_ascii=False)}}}\n</tool_call><|im_end|>"
            for c in commands
        ]
        expected += [
            '<tool_call>\n{"name": "submit", "arguments": {}}\n</tool_call><|im_end|>',
            t.rounds[row["round"] - 1].end.reflection.call.content + "<|im_end|>",
        ]
        assert runs == expected  # the tool-call turns and the reflection; no header, no tool result
    plain = Masker(bpe_tokenizer(CHATML, ["<|im_start|>", "<|im_end|>"]))
    with pytest.raises(
        TemplateError, match=r"drops an assistant turn.s tool_calls.*tool-aware template"
    ):
        plain.encode(t.rounds[0].messages(1)[:3], [0.0, 0.0, 1.0])


def test_train_check_reads_tool_rows_through_the_template_with_their_tools(killed_and_resumed, qwen):
    from transformers import AutoTokenizer

    from arex.dataset.train_check import TrainCheckFailed, check

    tokenizer = AutoTokenizer.from_pretrained(str(qwen), local_files_only=True)
    for config in ("calls", "rounds"):
        report = check(killed_and_resumed["root"] / "dataset", tokenizer, config)
        assert report.rows and report.problems == []
        text = tokenizer.decode(report.rows[-1].input_ids)
        assert "<tools>" in text and '"name": "submit"' in text  # rendered with the row's tools
    plain = Masker(bpe_tokenizer(CHATML, ["<|im_start|>", "<|im_end|>"])).tokenizer
    with pytest.raises(TrainCheckFailed, match="these rows hold tool calls.*tool-aware template"):
        check(killed_and_resumed["root"] / "dataset", plain, "rounds")


@pytest.mark.local_model
def test_stock_sft_trainer_trains_tool_call_rows_with_their_tools(killed_and_resumed, smol, tmp_path):
    """SmolLM2-135M under qwen2.5's template (the same <|im_start|>/<|im_end|> tokens): TRL renders
    the calls rows with their `tools` and trains exactly the tool-call completion."""
    from datasets import load_dataset
    from trl import SFTTrainer

    from arex.dataset.masks import load_tokenizer
    from arex.dataset.train import load_model

    tokenizer = load_tokenizer(smol["tokenizer"])
    tokenizer.chat_template = (TEMPLATES / "qwen2_5.jinja").read_text(encoding="utf-8")
    rows = load_dataset(
        "parquet",
        data_files=str(killed_and_resumed["root"] / "dataset" / "calls" / "*.parquet"),
        split="train",
        cache_dir=str(tmp_path / "hf"),
    )
    rows = rows.select([1])  # round 1's second command
    args = sft_args(tmp_path)
    args.max_length = 2048  # the system prompt and the tool definitions come first
    trainer = SFTTrainer(model=load_model(smol["model"]), args=args, train_dataset=rows, processing_class=tokenizer)
    example = trainer.train_dataset[0]
    supervised = supervised_runs(tokenizer, example["input_ids"], [float(label != -100) for label in example["labels"]])
    assert supervised == [
        '<tool_call>\n{"name": "bash", "arguments": {"command": "echo 2 > answer.txt"}}\n</tool_call><|im_end|>\n'
    ]
    assert "<tools>" in tokenizer.decode(example["input_ids"])
    trainer.train()
    losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    assert len(losses) == 3 and losses[-1] < losses[0], losses
