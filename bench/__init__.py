"""Benchmarks, one sub-package per claim, each run as ``python -m bench.<claim>`` from the
repository root (a claim with several scripts: ``python -m bench.<claim>.<script>``).

``common`` holds what several claims share (the pricing cluster under load, topic gaps, process
CPU, the JSON report); the polling and topic-tail helpers shared with the tests live in
:mod:`pricing_ha.local.waiting` and :mod:`pricing_ha.local.tails`. ``bench/README.md`` maps each
claim to its command, latest figure and run time.
"""
