"""Fixtures shared by test modules live here."""
