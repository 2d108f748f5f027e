"""Environments: sources → validated, sandboxed tasks."""
