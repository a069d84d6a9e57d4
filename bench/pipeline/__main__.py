"""``python -m bench.pipeline``: the pipeline ingest benchmark (:mod:`bench.pipeline.ingest`)."""

import sys

from bench.pipeline.ingest import main

sys.argv[0] = "python -m bench.pipeline"  # argparse names the command, not __main__.py
main()
