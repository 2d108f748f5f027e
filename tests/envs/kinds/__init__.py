"""Env kinds defined by tests: each one folder, registered by a test as one row of arex.specs.KINDS."""
