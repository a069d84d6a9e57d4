"""``python -m bench.publishing``: the publish-silence benchmark (:mod:`.silence`)."""

from bench.publishing.silence import main

main()
