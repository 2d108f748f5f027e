"""An ML task's facts as the skill-drafting teacher is told them (arex.envs.skills_draft)."""


def facts(raw: dict) -> str:
    """The task's metric, run command and files, as the build resolved them."""
    metric, sub, data = raw.get("metric", {}), raw.get("submission", {}), raw.get("data", {})
    protected = ", ".join(raw.get("protected") or []) or "none"
    return (
        f"Metric: {metric.get('name')} ({metric.get('direction')}); run command: {raw.get('run')}; "
        f"time limit {raw.get('time_limit_s')}s.\n"
        f"Submission: {sub.get('file')} with columns {sub.get('id_column')}, {sub.get('prediction_column')}; "
        f"training rows in {data.get('train_file')}, evaluation rows (no labels) in {data.get('test_file')}. "
        f"Baseline score: {raw.get('baseline_score')}. Files the agent must not change: {protected}."
    )
