"""The trajectory store: typed, resumable records (`trajectory`), their workspace snapshots
(`snapshots`), crash-safe writes and locks (`storage`), stores at an fsspec URL (`url_store`),
and the canary strings that mark private data (`canary`). See README.md beside this file."""
