"""One candidate of a leader election, for ``bench/election/peers.py``: NELI, ZooKeeper or etcd.

``python -m bench.election.member {neli,zookeeper,etcd} --out FILE --name NAME [options]``
campaigns in one election and appends JSON lines to ``FILE``, each with ``t_ns``
(``time.time_ns()``, comparable across the processes of one machine):

* ``{"k": "ready"}`` once connected (NELI: started; ZooKeeper: session open; etcd: lease
  granted and candidacy key written);
* ``{"k": "lead"}`` the moment it believes it leads: its first act of leadership;
* ``{"k": "lost", "why": ...}`` when it stops believing so (session suspended or lost,
  revoked, fenced, lease gone).

Only the standard library is imported at the top: NELI runs with the project's interpreter
(``.venv``), ZooKeeper (kazoo) and etcd (python-etcd3) with the benchmark's own venv
(``.venv-bench-peers``), which has no ``neli``.

What each one counts as leading:

* **NELI**: a ``gains`` event (ACQUIRED or RESUMED) for the election's role, which the member
  emits within ``check_interval_ms`` (25 ms) of :meth:`neli.Neli.leads` turning true; a
  REVOKED or FENCED event ends it.
* **ZooKeeper**: kazoo's ``Election.run`` calling the leader function (its lock's ephemeral
  sequential node is the lowest). The state listener ends it at SUSPENDED (kazoo's advice: a
  leader can no longer trust its lock once the connection is in doubt) and campaigns again.
* **etcd**: the recipe of etcd's ``concurrency.Election`` (what ``etcdctl elect`` runs): a
  key ``PREFIX/<lease id>`` written with the member's lease; the candidate whose key has the
  lowest create revision leads; the others wait for the deletion of the key just before theirs.
  The lease is kept alive every TTL/3; a keep-alive that fails or finds the lease gone ends it.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import threading
import time
from pathlib import Path
from typing import IO, Any


class Recorder:
    """Appends records to the output file, flushed each, so that SIGKILL loses nothing."""

    def __init__(self, out: IO[str]) -> None:
        self._out = out
        self._lock = threading.Lock()

    def __call__(self, kind: str, **fields: Any) -> None:
        rec = {"k": kind, "t_ns": time.time_ns(), **fields}
        with self._lock:
            self._out.write(json.dumps(rec) + "\n")
            self._out.flush()


def run_neli(args: argparse.Namespace, rec: Recorder) -> None:
    """A NELI member of a group on a one-partition topic: leading partition 0 is leading."""
    import asyncio

    from neli import Neli
    from pricing_ha.local.probe import neli_config

    async def main() -> None:
        neli = Neli(neli_config(args))
        await neli.start()
        rec("ready", pid=os.getpid())
        async for ev in neli.events():
            if ev.kind.gains:
                rec("lead", p=ev.partition)
            else:
                rec("lost", p=ev.partition, why=ev.kind.value)

    asyncio.run(main())


def run_zookeeper(args: argparse.Namespace, rec: Recorder) -> None:
    """A kazoo ``Election`` candidate; ``--session-ms`` is the session timeout asked for."""
    # kazoo and etcd3 live only in the peers' venv (see bench.election.servers.PEERS_PIP).
    from kazoo.client import KazooClient, KazooState  # type: ignore[import-not-found]
    from kazoo.exceptions import KazooException  # type: ignore[import-not-found]

    zk = KazooClient(hosts=args.hosts, timeout=args.session_ms / 1000)
    in_doubt = threading.Event()

    def listener(state: str) -> None:
        if state in (KazooState.SUSPENDED, KazooState.LOST):
            in_doubt.set()

    zk.add_listener(listener)
    zk.start(timeout=30)
    rec("ready", pid=os.getpid())
    election = zk.Election(args.path, args.name)

    def lead() -> None:
        rec("lead")
        in_doubt.wait()
        rec("lost", why="suspended")

    while True:
        in_doubt.clear()
        # Releasing the lock over a broken connection fails: campaign again.
        with contextlib.suppress(KazooException):
            election.run(lead)
        while not zk.connected:  # campaign again once the connection is back
            time.sleep(0.05)


def run_etcd(args: argparse.Namespace, rec: Recorder) -> None:
    """An etcd candidate (``concurrency.Election``'s recipe) with a lease of ``--ttl-s``."""
    import etcd3  # type: ignore[import-not-found]  # only in the peers' venv, as kazoo
    from etcd3 import exceptions

    host, _, port = args.endpoint.rpartition(":")
    client = etcd3.client(host=host, port=int(port))
    lease = client.lease(args.ttl_s)
    key = f"{args.prefix}/{lease.id:x}"
    gone = threading.Event()

    def keep_alive() -> None:
        while not gone.is_set():
            time.sleep(max(0.1, args.ttl_s / 3))
            try:
                answers = list(client.refresh_lease(lease.id))
            except Exception:  # noqa: BLE001 - any failure means the lease is in doubt
                answers = []
            if not answers or answers[0].TTL <= 0:
                gone.set()

    client.transaction(
        compare=[client.transactions.create(key) == 0],
        success=[client.transactions.put(key, args.name, lease)],
        failure=[],
    )
    _, meta = client.get(key)
    mine = meta.create_revision
    threading.Thread(target=keep_alive, daemon=True).start()
    rec("ready", pid=os.getpid(), granted_ttl_s=lease.granted_ttl)
    while not gone.is_set():
        resp = client.get_prefix_response(args.prefix, sort_order="ascend", sort_target="create")
        before = [kv for kv in resp.kvs if kv.create_revision < mine]
        if not before:
            rec("lead")
            gone.wait()
            rec("lost", why="lease")
            return
        # Wait for the deletion of the key just before ours, from the revision just read on,
        # so a deletion between the read and the watch counts. Any other answer (a timeout, a
        # cancelled watch): read again.
        with contextlib.suppress(exceptions.WatchTimedOut):
            client.watch_once_response(
                before[-1].key,
                timeout=max(5.0, 2 * args.ttl_s),
                start_revision=resp.header.revision + 1,
            )


def main() -> None:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("peer", choices=["neli", "zookeeper", "etcd"])
    parser.add_argument("--out", required=True)
    parser.add_argument("--name", required=True)
    parser.add_argument("--bootstrap", help="NELI: Kafka bootstrap servers")
    parser.add_argument("--topic", help="NELI: the one-partition NELI topic")
    parser.add_argument("--group", help="NELI: the consumer group")
    parser.add_argument("--variant", default="full")
    parser.add_argument("--mode", default="non-exclusive")
    parser.add_argument("--session-ms", type=int, default=3000, help="NELI S; ZooKeeper session")
    parser.add_argument("--threshold-ms", type=int, default=None)
    parser.add_argument("--pulse-ms", type=int, default=300)
    parser.add_argument("--hosts", help="ZooKeeper: host:port")
    parser.add_argument("--path", default="/bench/election", help="ZooKeeper: election path")
    parser.add_argument("--endpoint", help="etcd: host:port of the client URL")
    parser.add_argument("--prefix", default="/bench/election", help="etcd: election prefix")
    parser.add_argument("--ttl-s", type=int, default=60, help="etcd: lease TTL")
    args = parser.parse_args()
    # SIGTERM ends the process at once (no hand-over): the benchmark only uses it to clean up.
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    with Path(args.out).open("a", encoding="utf-8") as out:
        rec = Recorder(out)
        rec("start", pid=os.getpid())
        {"neli": run_neli, "zookeeper": run_zookeeper, "etcd": run_etcd}[args.peer](args, rec)


if __name__ == "__main__":
    main()
