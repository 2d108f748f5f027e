"""YAML texts parsed once per process.

Every rollout of a batch reads the same skills' front matter and the same prompts file, and
PyYAML's pure-Python parser takes ~1-2 ms a text: ~20 ms a rollout, spent on the event loop the
other rollouts' teacher calls run on. Callers get a copy, never the cached object.
"""

from __future__ import annotations

import copy
import functools
from typing import Any

import yaml


@functools.lru_cache(maxsize=1024)
def _parsed(text: str) -> Any:
    return yaml.safe_load(text)


def safe_load(text: str) -> Any:
    """`yaml.safe_load(text)`, from the cache for a text parsed before; a YAMLError is raised (and
    not cached) as yaml raises it."""
    return copy.deepcopy(_parsed(text))
