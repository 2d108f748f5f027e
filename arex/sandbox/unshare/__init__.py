"""The `unshare` sandbox backend: sandboxes as namespaced process trees on this host (see sandbox.py)."""

from arex.sandbox.unshare.sandbox import UnshareSandbox

__all__ = ["UnshareSandbox"]
