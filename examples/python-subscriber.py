"""Prices from pricing-ha in Python: each instrument's last price on connect, then live.

python examples/python-subscriber.py localhost:9092 prices EURUSD GBPUSD
"""

import asyncio
import sys

from pricing_ha.subscribing import Gap, PriceClient


def on_gap(gap: Gap) -> None:
    print("gap:", gap.instrument, gap.missing, "missing", file=sys.stderr)


async def main(bootstrap: str, topic: str = "prices", *instruments: str) -> None:
    async with PriceClient(bootstrap, topic, instruments=instruments or None, on_gap=on_gap) as c:
        async for p in c:
            print(p.instrument, p.seq, p.bid, p.ask, "last value" if p.last_value else "live")


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:]))
