"""The teacher: any OpenAI-compatible chat endpoint, and the bundled local model."""
