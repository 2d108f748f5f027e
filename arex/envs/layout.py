"""Where things are in a built env: written by the builders, read by the runtime."""

# Where env images keep the starting workspace: the sandbox's workdir is a fresh tmpfs, seeded
# from here at start (SandboxConfig.seed). Part of the env digest, so older images are rebuilt.
IMAGE_WORKSPACE = "/opt/arex/workspace"
# Written into an env's folder when it is accepted: its source hash, builder, gates and scores.
STAMP = ".build.json"
