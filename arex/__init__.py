"""arex: synthesize long-horizon self-improvement trajectories for training LLM agents."""

__version__ = "0.1.0"
