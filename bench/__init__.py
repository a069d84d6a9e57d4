"""Benchmarks, one sub-package per claim, each run as ``python -m bench.<claim>`` from the
repository root (a claim with several scripts: ``python -m bench.<claim>.<script>``).

``common`` holds what several claims share (the pricing cluster under load, topic gaps, process
CPU, the JSON report); the polling and topic-tail helpers shared with the tests live in
:mod:`pricing_ha.local.waiting` and :mod:`pricing_ha.local.tails`. ``bench/README.md`` maps each
claim to its command, latest figure and run time.
"""

import os
from pathlib import Path

#: The repository root: on the ``PYTHONPATH`` of every process a benchmark starts, so that the
#: helpers it starts as ``python -m bench.<claim>.<module>`` (forwarders, probes, election
#: members) find this package although benchmarks run in a temporary working directory.
ROOT = str(Path(__file__).resolve().parent.parent)
_paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
if ROOT not in _paths:
    os.environ["PYTHONPATH"] = os.pathsep.join([ROOT, *_paths])
