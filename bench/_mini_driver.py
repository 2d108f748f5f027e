"""mini-swe-agent's side of bench/agent_overhead.py, run by the bench's own virtualenv's python
(never by arex's: mini-swe-agent is not a dependency of arex).

    python _mini_driver.py BASE_URL MODEL IMAGE LABEL WORKDIR TRAJECTORY

Its text-based setup as shipped (config/mini_textbased.yaml: templates, environment variables,
observation format; the ```mswea_bash_command action block), with LiteLLM's `openai/<model>`
pointed at the scripted server and cost tracking off; DockerEnvironment (`docker run`, then one
`docker exec` per command) on the given image, labelled so the bench can find its container, with
no network (the engine here has no bridge). The trajectory is saved after every step, as the
`mini` command does. Prints whether it ended by its submit command, its exit status and its model
calls as one JSON line.
"""

import json
import subprocess
import sys
from pathlib import Path

from minisweagent.agents.default import DefaultAgent
from minisweagent.config import get_config_from_spec
from minisweagent.environments.docker import DockerEnvironment
from minisweagent.models.litellm_textbased_model import LitellmTextbasedModel


def main() -> None:
    base_url, model_name, image, label, workdir, trajectory = sys.argv[1:7]
    config = get_config_from_spec("mini_textbased")
    model = LitellmTextbasedModel(
        model_name=f"openai/{model_name}",
        model_kwargs={**config["model"].get("model_kwargs", {}), "api_base": base_url, "api_key": "not-needed"},
        observation_template=config["model"]["observation_template"],
        format_error_template=config["model"]["format_error_template"],
        cost_tracking="ignore_errors",
    )
    env = DockerEnvironment(
        image=image,
        cwd=workdir,
        env=config["environment"]["env"],
        run_args=["--rm", "--network", "none", "--label", label],
    )
    agent_config = {k: v for k, v in config["agent"].items() if k != "mode"}  # mode: the interactive agent's
    agent = DefaultAgent(
        model, env, **{**agent_config, "step_limit": 0, "cost_limit": 0, "output_path": Path(trajectory)}
    )
    try:
        result = agent.run(task="Read two integers a and b; print a + b. Write the program to solution.py.")
    finally:
        # Removed now, not by mini's own cleanup (a `docker stop` left running in the background that
        # waits 10 s for `sleep` to die): the bench's next run must not measure this teardown.
        subprocess.run(["docker", "rm", "-f", env.container_id], capture_output=True)
        env.container_id = None
    print(
        json.dumps(
            {
                "ok": result.get("exit_status") == "Submitted",
                "exit_status": result.get("exit_status"),
                "calls": agent.n_calls,
            }
        )
    )


if __name__ == "__main__":
    main()
