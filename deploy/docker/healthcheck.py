"""Container HEALTHCHECK: exit 0 when ``/healthz`` on the local health port answers 200.

Standard library only (the slim image has no curl). The port is the one the image gives every
role (``PRICING_HA__HEALTH__PUBLISHER_PORT``, 8080 by default); ``PRICING_HA_HEALTHCHECK_URL``
overrides the whole URL.
"""

from __future__ import annotations

import os
import sys
import urllib.request


def main() -> int:
    """Returns the exit status Docker reads: 0 healthy, 1 unhealthy."""
    port = os.environ.get("PRICING_HA__HEALTH__PUBLISHER_PORT", "8080")
    url = os.environ.get("PRICING_HA_HEALTHCHECK_URL", f"http://127.0.0.1:{port}/healthz")
    try:
        with urllib.request.urlopen(url, timeout=2) as response:  # noqa: S310 (fixed local URL)
            return 0 if response.status == 200 else 1
    except OSError as exc:
        print(f"unhealthy: {url}: {exc}", file=sys.stderr)  # noqa: T201 (docker inspect shows it)
        return 1


if __name__ == "__main__":
    sys.exit(main())
