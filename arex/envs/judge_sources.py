"""Judge problem sources: the loaders live in `arex.envs.sources` (one module per format); this
module keeps their names importable from where they used to be."""

from arex.envs.sources import (
    PROVISIONAL_TIME_LIMIT_S,
    TESTLIB_HEADER,
    Problem,
    SourceError,
    content_hash,
    detect,
    load,
    load_arex,
    load_codecontests,
    load_frontier,
    load_kattis,
    slug,
    source_files,
)

__all__ = [
    "PROVISIONAL_TIME_LIMIT_S",
    "TESTLIB_HEADER",
    "Problem",
    "SourceError",
    "content_hash",
    "detect",
    "load",
    "load_arex",
    "load_codecontests",
    "load_frontier",
    "load_kattis",
    "slug",
    "source_files",
]
