"""The rollout engine: the many-round reflective loop and the batch runner."""
