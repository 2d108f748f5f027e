"""The one base of every error a user can cause and fix, and the exit code it ends the CLI with.

The CLI catches `ArexError` in one place (`arex.cli.main`) and prints its message, one paragraph,
no traceback. Anything else that escapes is a bug in arex and shows its traceback.
"""

from __future__ import annotations


class ArexError(Exception):
    """A problem the user can fix (bad input, missing setup, a service down). The message says
    what is wrong, naming the file or key, and what to do."""

    exit_code: int = 1
    """The CLI's exit status for this error."""


class UserInputError(ArexError):
    """A file, folder or option the user gave is missing or malformed."""

    exit_code = 2
