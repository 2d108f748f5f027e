"""Config loading: stacking, overrides, and errors that name the key, the source and the type."""

import pytest
from repo_paths import REPO

from arex.config import ArexConfig, ConfigError, load_config

CONFIGS = REPO / "configs"


def test_default_yaml_matches_the_model_defaults():
    assert load_config([str(CONFIGS / "default.yaml")]) == ArexConfig()


def test_files_stack_and_overrides_win(tmp_path):
    second = tmp_path / "more.yaml"
    second.write_text("sandbox:\n  cpus: 2\n  memory: 3g\n")
    cfg = load_config([str(CONFIGS / "sandbox-small.yaml"), str(second), "sandbox.memory=256m", "sandbox.network=true"])
    assert cfg.sandbox.cpus == 2.0  # second file beats the first
    assert cfg.sandbox.pids_limit == 128  # untouched keys from the first file survive the merge
    assert cfg.sandbox.memory == 256 * 2**20  # the override beats both files
    assert cfg.sandbox.network is True  # override values are parsed as YAML


def test_list_override_is_parsed(tmp_path):
    cfg = load_config([f"sandbox.mounts=[{{source: {tmp_path}, target: /mnt/x}}]"])
    assert cfg.sandbox.mounts[0].target == "/mnt/x" and cfg.sandbox.mounts[0].read_only


def test_unknown_key_names_key_source_and_suggestion(tmp_path):
    bad = tmp_path / "typo.yaml"
    bad.write_text("sandbox:\n  memroy: 2g\n")
    with pytest.raises(ConfigError) as info:
        load_config([str(bad)])
    message = str(info.value)
    assert "sandbox.memroy" in message and str(bad) in message and "Did you mean 'sandbox.memory'" in message


def test_unknown_section():
    with pytest.raises(ConfigError, match=r"unknown key 'rollot' \(set by -c rollot.rounds=3\).*top level"):
        load_config(["rollot.rounds=3"])


def test_wrong_type_names_expected_type():
    with pytest.raises(ConfigError) as info:
        load_config(["sandbox.pids_limit=many"])
    message = str(info.value)
    assert "'sandbox.pids_limit'" in message and "expects an integer" in message and "'many'" in message
    assert "-c sandbox.pids_limit=many" in message


def test_bad_size_and_root_user_are_explained():
    with pytest.raises(ConfigError, match="sandbox.memory.*'lots'"):
        load_config(["sandbox.memory=lots"])
    with pytest.raises(ConfigError, match="never run commands as root"):
        load_config(["sandbox.user=0:0"])


def test_missing_file_and_bad_yaml(tmp_path):
    with pytest.raises(ConfigError, match="'nope.yaml' not found"):
        load_config(["nope.yaml"])
    broken = tmp_path / "broken.yaml"
    broken.write_text("sandbox:\n  cpus: [1\n")
    with pytest.raises(ConfigError, match=r"broken.yaml' is not valid YAML at line \d+"):
        load_config([str(broken)])
    listy = tmp_path / "list.yaml"
    listy.write_text("- a\n- b\n")
    with pytest.raises(ConfigError, match="must hold a mapping"):
        load_config([str(listy)])


def test_later_file_replacing_a_section_takes_the_blame(tmp_path):
    first, second = tmp_path / "a.yaml", tmp_path / "b.yaml"
    first.write_text("sandbox:\n  cpus: 1\n")
    second.write_text("sandbox:\n  cpus: fast\n")
    with pytest.raises(ConfigError, match="b.yaml"):
        load_config([str(first), str(second)])


def test_every_config_field_has_a_docstring():
    from arex.sandbox.base import Mount, SandboxConfig

    for model in (ArexConfig, SandboxConfig, Mount):
        for name, field in model.model_fields.items():
            assert field.description, f"{model.__name__}.{name} has no docstring"


def test_cross_key_rule_is_explained_without_a_dump():
    with pytest.raises(ConfigError) as info:
        load_config([str(CONFIGS / "teacher-openai.yaml"), "teacher.model=gpt-unknown"])
    message = str(info.value)
    assert "no price for model 'gpt-unknown'" in message and "teacher.track_cost=false" in message
    assert "{" not in message  # no raw dict dump
    assert load_config([str(CONFIGS / "teacher-openai.yaml"), "teacher.model=gpt-unknown", "teacher.track_cost=false"])
