"""``python -m bench.price_path``: the price path beside bare forwarders (:mod:`.line_rate`)."""

import sys

from bench.price_path.line_rate import main

sys.argv[0] = "python -m bench.price_path"  # argparse names the command, not __main__.py
main()
