"""The rollout key: what a rollout was made with. Content (prompts, skills) is part of it, so an
edit in place never resumes old rollouts under a new text; the bundled content of the version that
added it is left out, so the checked-in version-1 store keeps its keys."""

from __future__ import annotations

import shutil

import yaml
from repo_paths import TESTS

from arex.envs.skills import bundled_skills
from arex.record.trajectory import load
from arex.rollout import config as config_module
from arex.rollout.batch import config_hash
from arex.rollout.config import BUNDLED, RolloutConfig
from arex.teacher.client import TeacherConfig

STORE = TESTS / "fixtures" / "v1" / "store"
PROMPTS_BEFORE = TESTS / "fixtures" / "prompts" / "before-stable-prefix.yaml"
TEACHER = TeacherConfig(model="scripted-teacher", track_cost=False)


def test_the_checked_in_store_keeps_its_keys_under_the_bundled_prompts_and_skills(tmp_path, monkeypatch):
    """Each v1 record's key, recomputed from its header by this version, is the one it was written
    under, given the prompts it was keyed with: a record that named a prompts file gets that file's
    text of then, and one on the bundled prompts gets the bundled text of then (the bundled prompts
    changed since, issue 33, and such keys changed with them: asserted below). If this fails after an
    edit of the bundled skills, that edit changed every rollout key, as it should."""
    records = [load(p) for p in sorted(STORE.glob("*/*.jsonl"))]
    assert len(records) == 6
    named = {r.header.config.get("prompts") for r in records} - {None}
    assert named == {"configs/prompts/default.yaml"}  # where the bundled prompts were, relative to the checkout
    for rel in named:  # the bundled prompts of then (they changed since: issue 33, keys changed with them)
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(PROMPTS_BEFORE, tmp_path / rel)
    folders = {r.header.config.get("skills_dir") for r in records} - {None}
    assert folders <= {"skills"}  # likewise the bundled skills
    for rel in folders:
        shutil.copytree(bundled_skills(), tmp_path / rel, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    monkeypatch.chdir(tmp_path)
    then = tmp_path / "bundled-then"
    (then / "prompts").mkdir(parents=True)
    shutil.copy(PROMPTS_BEFORE, then / "prompts" / "default.yaml")
    monkeypatch.setattr(config_module, "BUNDLED", then)
    on_bundled = [r for r in records if not r.header.config.get("prompts")]
    assert on_bundled  # the store has both kinds
    for record in records:
        h = record.header
        teacher = TeacherConfig(model=h.teacher.model, track_cost=False, **h.sampling)
        assert config_hash(teacher, RolloutConfig(**h.config)) == h.config_hash, record.path
    monkeypatch.undo()  # the bundled prompts of today: a default rollout of then is not resumed under them
    for record in on_bundled:
        h = record.header
        teacher = TeacherConfig(model=h.teacher.model, track_cost=False, **h.sampling)
        assert config_hash(teacher, RolloutConfig(**h.config)) != h.config_hash, record.path


def test_editing_the_reflection_prompt_in_place_changes_the_key(tmp_path):
    prompts = tmp_path / "prompts.yaml"
    shutil.copy(BUNDLED / "prompts" / "default.yaml", prompts)
    config = RolloutConfig(prompts=str(prompts))
    before = config_hash(TEACHER, config)
    data = yaml.safe_load(prompts.read_text())
    assert "Reflect, then write" in data["reflect"]
    data["reflect"] = data["reflect"].replace("Reflect, then write", "Reflect briefly, then write", 1)
    prompts.write_text(yaml.safe_dump(data))
    edited = config_hash(TEACHER, config)
    assert edited != before
    shutil.copy(BUNDLED / "prompts" / "default.yaml", prompts)
    assert config_hash(TEACHER, config) == before  # the key follows the content, not the file's history


def test_editing_a_skill_changes_the_key_and_bytecode_beside_it_does_not(tmp_path):
    skills = tmp_path / "skills"
    shutil.copytree(bundled_skills(), skills, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    config = RolloutConfig(skills_dir=str(skills))
    before = config_hash(TEACHER, config)
    cache = next(p for p in skills.rglob("*.py")).parent / "__pycache__"
    cache.mkdir(exist_ok=True)
    (cache / "x.cpython-311.pyc").write_bytes(b"\0" * 16)  # running a skill's script on the host
    assert config_hash(TEACHER, config) == before
    skill = next(skills.rglob("SKILL.md"))
    skill.write_text(skill.read_text() + "\nOne more hint.\n")
    assert config_hash(TEACHER, config) != before
    assert config_hash(TEACHER, RolloutConfig(skills_dir=str(skills), general_skills=False)) == config_hash(
        TEACHER, RolloutConfig(skills_dir=str(skills), general_skills=False)
    )


def test_the_bundled_prompts_changed_the_key_of_a_default_rollout():
    """Issue 33 reordered the bundled prompts (what never changes first): a default rollout's key is
    not the one it had under the prompts of before, so a store made then starts new rollouts instead
    of resuming old ones with requests of another layout."""
    from arex.rollout.batch import BUNDLED_CONTENT

    now = RolloutConfig().content()["prompts"]
    assert RolloutConfig(prompts=str(PROMPTS_BEFORE)).content()["prompts"] == BUNDLED_CONTENT["prompts"] != now
