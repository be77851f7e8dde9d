"""A TCP relay that delays one direction: stands in for `tc netem`, which this kernel lacks.

Each chunk from the client is forwarded ``delay`` seconds after it arrived (arrival times are
kept, so back-to-back chunks are not delayed twice); answers flow back at once. The round trip
through the relay therefore grows by ``delay``, as with netem on one side of a link. Threads and
blocking sockets keep the added jitter near the OS timer resolution (an event loop would round
every wait up to a whole millisecond).
"""

import contextlib
import queue
import socket
import threading
import time


class DelayProxy:
    def __init__(self, listen: str, upstream: str, ports: list[int], delay: float) -> None:
        self.listen = listen
        self.upstream = upstream
        self.ports = ports
        self.delay = delay
        self._listeners: list[socket.socket] = []
        self._stopping = threading.Event()

    def start(self) -> None:
        for port in self.ports:
            listener = socket.create_server((self.listen, port), reuse_port=False)
            listener.settimeout(0.2)
            self._listeners.append(listener)
            threading.Thread(target=self._accept, args=(listener, port), daemon=True).start()

    def close(self) -> None:
        self._stopping.set()
        for listener in self._listeners:
            listener.close()

    def _accept(self, listener: socket.socket, port: int) -> None:
        while not self._stopping.is_set():
            try:
                client, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            try:
                upstream = socket.create_connection((self.upstream, port), timeout=5)
            except OSError:
                client.close()
                continue
            for s in (client, upstream):
                s.settimeout(None)
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            chunks: queue.Queue[tuple[float, bytes]] = queue.Queue()
            threading.Thread(target=self._receive, args=(client, chunks), daemon=True).start()
            threading.Thread(target=self._forward_delayed, args=(chunks, upstream), daemon=True).start()
            threading.Thread(target=self._back, args=(upstream, client), daemon=True).start()

    @staticmethod
    def _receive(client: socket.socket, chunks: "queue.Queue[tuple[float, bytes]]") -> None:
        with contextlib.suppress(OSError):
            while data := client.recv(65536):
                chunks.put((time.monotonic(), data))
        chunks.put((time.monotonic(), b""))

    def _forward_delayed(self, chunks: "queue.Queue[tuple[float, bytes]]", upstream: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while True:
                arrived, data = chunks.get()
                wait = arrived + self.delay - time.monotonic()
                if wait > 0:
                    time.sleep(wait)
                if not data:
                    upstream.shutdown(socket.SHUT_WR)
                    return
                upstream.sendall(data)

    @staticmethod
    def _back(upstream: socket.socket, client: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := upstream.recv(65536):
                client.sendall(data)
            client.shutdown(socket.SHUT_WR)
        upstream.close()
        client.close()
