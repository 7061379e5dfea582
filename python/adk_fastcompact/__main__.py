"""`python -m adk_fastcompact`: see `adk_fastcompact._tooling.cli`."""

from __future__ import annotations

from ._tooling.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
