"""A local HTTP listener that records every request it gets: proof that nothing was fetched."""

from __future__ import annotations

import http.server
import threading


class Listener:
    """Serves `{}` on 127.0.0.1 (a free port) and counts the paths it was asked for."""

    def __init__(self, delay_s: float = 0.0):
        hits = self.hits = []

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 - http.server's naming
                hits.append(self.path)
                threading.Event().wait(delay_s)
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.end_headers()
                self.wfile.write(b'{"type": "object"}')

            def log_message(self, *_args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> "Listener":
        self._thread.start()
        return self

    def __exit__(self, *_exc):
        self.server.shutdown()
        self.server.server_close()
