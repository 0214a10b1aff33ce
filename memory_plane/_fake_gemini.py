"""A fake Gemini endpoint on 127.0.0.1 for tests and the benchmark: scripted answers, recorded requests."""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Reply = tuple[int, Any, float]  # (HTTP status (0: drop the connection), body or text, delay seconds)
_STATUS = {429: "RESOURCE_EXHAUSTED", 404: "NOT_FOUND", 408: "DEADLINE_EXCEEDED", 401: "UNAUTHENTICATED",
           403: "PERMISSION_DENIED"}


class FakeGemini:
    """Answers ``POST .../models/<model>:generateContent`` on loopback only."""

    def __init__(self, default: Callable[[str, dict[str, Any]], Reply] | None = None) -> None:
        self.requests: list[dict[str, Any]] = []
        self.scripts: dict[str, deque[Reply]] = {}
        self.default = default or (lambda model, body: (200, "The screen shows a list with a search field.", 0.0))
        self._lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # keep test output quiet
                return

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(length) or b"{}")
                model = self.path.split("/models/", 1)[-1].split(":", 1)[0]
                with fake._lock:
                    fake.requests.append({"path": self.path, "model": model, "body": body, "at": time.monotonic()})
                    queue = fake.scripts.get(model)
                    reply = queue.popleft() if queue else fake.default(model, body)
                status, payload, delay = reply
                if delay:
                    time.sleep(delay)
                if status == 0:  # a dropped connection: no answer at all
                    self.close_connection = True
                    try:
                        self.connection.shutdown(2)
                    except OSError:
                        pass
                    return
                if status != 200:
                    err: dict[str, Any] = {"code": status, "message": f"fake {status}",
                                           "status": _STATUS.get(status, "UNAVAILABLE" if status >= 500
                                                                 else "INVALID_ARGUMENT")}
                    if status == 429 and isinstance(payload, (int, float)):
                        # The server's own retry delay, as the Gemini API sends it.
                        err["details"] = [{"@type": "type.googleapis.com/google.rpc.RetryInfo",
                                           "retryDelay": f"{payload}s"}]
                    data = json.dumps({"error": err})
                else:
                    if isinstance(payload, dict) and isinstance(payload.get("parts"), list):
                        parts = payload["parts"]  # e.g. a functionCall part: the model asks for a tool
                    else:
                        parts = [{"text": payload if isinstance(payload, str) else json.dumps(payload,
                                                                                              ensure_ascii=False)}]
                    finish = payload.get("finishReason", "STOP") if isinstance(payload, dict) else "STOP"
                    data = json.dumps({"candidates": [{"content": {"role": "model", "parts": parts},
                                                       "finishReason": finish}],
                                       "usageMetadata": {"promptTokenCount": 1200, "cachedContentTokenCount": 300,
                                                         "candidatesTokenCount": 60, "totalTokenCount": 1260}})
                raw = data.encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(raw)))
                    self.end_headers()
                    self.wfile.write(raw)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a timeout test)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        """The base URL to give the SDK."""
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def script(self, model: str, *replies: Reply) -> None:
        """Queue replies for a model (then the default answers)."""
        with self._lock:
            self.scripts.setdefault(model, deque()).extend(replies)

    def __enter__(self) -> FakeGemini:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()
