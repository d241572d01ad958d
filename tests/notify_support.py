"""A loopback HTTP server standing in for a webhook receiver (Slack's or anyone's) in tests."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class Receiver:
    """What the server received (``requests``: path and parsed JSON body, in order) and the statuses
    it answers with next (``statuses``, popped per request; 200 once they run out)."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.statuses: list[int] = []
        self.url = ""
        self.lock = threading.Lock()

    def bodies(self, path: str | None = None) -> list[Any]:
        return [request["body"] for request in self.requests if path is None or request["path"] == path]


@contextmanager
def webhook_receiver() -> Iterator[Receiver]:
    """A server on 127.0.0.1 (an ephemeral port) recording every POST; ``url`` is its base address."""
    receiver = Receiver()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length)
            with receiver.lock:
                receiver.requests.append({"path": self.path, "body": json.loads(raw or b"null"), "type": self.headers.get("Content-Type")})
                status = receiver.statuses.pop(0) if receiver.statuses else 200
            self.send_response(status)
            self.send_header("Content-Type", "text/plain")
            self.end_headers()
            self.wfile.write(b"ok" if status < 400 else b"no thanks")

        def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    receiver.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
