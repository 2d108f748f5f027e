"""A judge task's facts as the skill-drafting teacher is told them (arex.envs.skills_draft)."""


def facts(raw: dict) -> str:
    """The task's limits, checker and tests, as the build resolved them."""
    tests = raw.get("tests") or []
    samples = sum(1 for t in tests if isinstance(t, dict) and t.get("sample"))
    return (
        f"Submission: the file {raw.get('starter')} (its language from its extension); "
        f"time limit {raw.get('time_limit_s')}s, memory {raw.get('memory_mb')} MB; "
        f"checker {raw.get('checker', {}).get('kind')}, scoring {raw.get('scoring')}; "
        f"{len(tests) - samples} hidden tests, "
        f"{samples} sample tests (in samples/ of the working folder when there are any)."
    )
