"""arex.yamltext: YAML texts parsed once per process, each caller getting its own copy."""

import pytest
import yaml

from arex import yamltext


def test_a_text_is_parsed_once_and_each_caller_gets_its_own_copy(monkeypatch):
    text = "name: yamltext-probe-7\nsteps: [read, write]\nnested: {depth: 2}\n"
    calls = []
    real = yaml.safe_load
    monkeypatch.setattr(yaml, "safe_load", lambda t: calls.append(t) or real(t))
    first = yamltext.safe_load(text)
    first["steps"].append("mutated")
    first["nested"]["depth"] = 99
    second = yamltext.safe_load(text)
    # the caller's change stayed its own
    assert second == {
        "name": "yamltext-probe-7",
        "steps": ["read", "write"],
        "nested": {"depth": 2},
    }
    assert calls == [text]  # parsed once


def test_a_broken_text_raises_every_time():
    broken = "key: [unclosed\n"
    for _ in range(2):
        with pytest.raises(yaml.YAMLError):
            yamltext.safe_load(broken)
