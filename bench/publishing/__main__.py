"""``python -m bench.publishing``: the publish-silence benchmark (:mod:`.silence`)."""

import sys

from bench.publishing.silence import main

sys.argv[0] = "python -m bench.publishing"  # argparse names the command, not __main__.py
main()
