"""pricing-ha: continuously available price distribution built on NELI.

Two disjoint NELI groups publish every instrument's prices; a relay deduplicates them into the
topic subscribers read. See README.md for the architecture and the commands.
"""

from __future__ import annotations

__all__ = ["__version__"]

#: The one place the version is written: pyproject.toml reads it (``dynamic = ["version"]``).
__version__ = "0.1.0"
