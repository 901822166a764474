"""`from socketify import static_files`: `serve(root, mount, ...)` and `spa(root, index)`.

The implementation lives in socketify.middleware.static_files (with its helpers
`conditional` and `listing` beside it).
"""

from __future__ import annotations

from socketify.middleware.static_files import serve, spa

__all__ = ["serve", "spa"]
