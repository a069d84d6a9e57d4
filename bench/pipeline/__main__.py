"""``python -m bench.pipeline``: the pipeline ingest benchmark (:mod:`bench.pipeline.ingest`)."""

from bench.pipeline.ingest import main

main()
