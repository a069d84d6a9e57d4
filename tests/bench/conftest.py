"""Tests of the benchmarks' own measuring code (``bench/``): its modules are top-level scripts
without a package, imported here as the benchmarks import one another."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
