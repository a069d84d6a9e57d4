"""``python -m bench.price_path``: the price path beside bare forwarders (:mod:`.line_rate`)."""

from bench.price_path.line_rate import main

main()
