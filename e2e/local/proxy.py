"""A cuttable TCP proxy on loopback: the manager reaches a worker's kube-apiserver through it,
and a test or drill cuts the link to make a network partition.

``cut()`` closes every open connection at once and refuses new ones; ``blackhole()`` keeps
connections open but drops all traffic (a partition where packets vanish, not a reset);
``heal()`` restores normal forwarding. It runs on its own event-loop thread, so the
synchronous test bed and asynchronous tests can both drive it.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from typing import Literal

Mode = Literal["open", "cut", "blackhole"]


class CuttableProxy:
    def __init__(
        self, target_port: int, *, target_host: str = "127.0.0.1", listen_port: int = 0
    ) -> None:
        self.target = (target_host, target_port)
        self._listen_port = listen_port
        self.port = 0
        self.mode: Mode = "open"
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="proxy", daemon=True)
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self.connections_total = 0

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def start(self) -> CuttableProxy:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(timeout=10)
        return self

    async def _start(self) -> None:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", self._listen_port)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.mode == "cut":
            writer.close()
            return
        self.connections_total += 1
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.close()
            return
        self._writers.update((writer, up_writer))
        try:
            await asyncio.gather(self._pump(reader, up_writer), self._pump(up_reader, writer))
        finally:
            for w in (writer, up_writer):
                self._writers.discard(w)
                w.close()

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError, asyncio.IncompleteReadError):
            while data := await reader.read(65536):
                if self.mode == "open":
                    writer.write(data)
                    await writer.drain()
                elif self.mode == "cut":
                    break
                # blackhole: read and drop
        with contextlib.suppress(OSError):
            writer.close()

    def _set(self, mode: Mode) -> None:
        async def apply() -> None:
            self.mode = mode
            if mode == "cut":
                for w in list(self._writers):
                    w.close()

        asyncio.run_coroutine_threadsafe(apply(), self._loop).result(timeout=10)

    def cut(self) -> None:
        self._set("cut")

    def blackhole(self) -> None:
        self._set("blackhole")

    def heal(self) -> None:
        self._set("open")

    def stop(self) -> None:
        async def close() -> None:
            if self._server is not None:
                self._server.close()
            writers = list(self._writers)
            for w in writers:
                w.close()
            # Let every connection's handler finish and its sockets actually close before
            # the loop stops: a socket left to the garbage collector is a ResourceWarning
            # in whichever test happens to be running then.
            # (Closing both ends ends the pumps; a handler still opening its upstream
            # connection is cancelled.)
            handlers = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            if handlers:
                _, stuck = await asyncio.wait(handlers, timeout=5)
                for task in stuck:
                    task.cancel()
                await asyncio.gather(*stuck, return_exceptions=True)
            for w in writers:
                with contextlib.suppress(OSError, asyncio.CancelledError):
                    await w.wait_closed()

        if self._thread.is_alive():
            asyncio.run_coroutine_threadsafe(close(), self._loop).result(timeout=10)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=10)
        self._loop.close()
