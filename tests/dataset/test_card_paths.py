"""The dataset card publishes each rollout config, but never a path of the machine that ran the
rollouts: a prompts file or a skills folder appears by its name only. No Docker: version-1 fixture
records whose headers name files by absolute paths, exported."""

import json

from tokenizer_kit import STORE

from arex.dataset.export import ExportConfig, export

LOCAL = {"prompts": "/home/alice/work/secret-project/prompts.yaml", "skills_dir": "/home/alice/work/my-skills"}


def test_the_card_names_a_runs_prompts_file_and_skills_folder_by_name_only(tmp_path):
    records = []
    for source in sorted(STORE.glob("*/*.jsonl"))[:2]:
        lines = [json.loads(line) for line in source.read_text(encoding="utf-8").splitlines()]
        lines[0]["config"].update(LOCAL)
        target = tmp_path / "store" / source.parent.name / source.name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text("".join(json.dumps(r) + "\n" for r in lines), encoding="utf-8")
        records.append(target)
    export(iter(records), tmp_path / "ds", ExportConfig(), None)
    card = (tmp_path / "ds" / "README.md").read_text(encoding="utf-8")
    assert "/home/alice" not in card and "secret-project" not in card
    assert "prompts: prompts.yaml" in card and "skills_dir: my-skills" in card
