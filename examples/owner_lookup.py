"""Which member of group G owns key K now, and since when: answered from NELI heartbeats.

The lookup itself is :class:`neli.OwnerLookup` (and its pure part,
:class:`neli.wire.OwnerDirectory`): every NELI heartbeat names the partitions its sender leads, so a
process that is not a member of any group can read the NELI topic and say who leads what, with no
extra topic and no extra traffic. Its staleness bound and what "since" means are in
:mod:`neli._owners`; pricing-ha's own use is ``pricing-ha status --instrument SYM``.

Run ``python -m examples.owner_lookup BOOTSTRAP TOPIC GROUP KEY`` to print the owners once.
"""

from __future__ import annotations

import asyncio
import sys
import time

from neli import OwnerLookup


async def _main(bootstrap: str, topic: str, group: str, key: str) -> None:
    lookup = OwnerLookup(bootstrap, topic)
    await lookup.start()
    try:
        await asyncio.sleep(2.0)  # a few pulses
        now = time.time()
        for o in lookup.owners(group, key):
            sys.stdout.write(
                f"{o.member_name} ({o.member_id}) since {now - o.since_wall:.1f} s, "
                f"last heartbeat {now - o.last_seen_wall:.2f} s ago\n"
            )
    finally:
        await lookup.close()


if __name__ == "__main__":
    asyncio.run(_main(*sys.argv[1:5]))
