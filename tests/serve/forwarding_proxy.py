"""A small reverse proxy for the tests: ``python forwarding_proxy.py UPSTREAM_PORT``.

It listens on a free loopback port (printed as ``ready PORT``), forwards each GET or HEAD to
``127.0.0.1:UPSTREAM_PORT`` with every header the client sent, and adds the client's address to
``X-Forwarded-For`` the way nginx's ``$proxy_add_x_forwarded_for`` does (appended to what the
client claimed), plus ``X-Forwarded-Proto: http``. Standard library only; one process, as a
proxy in front of `gpuyield serve` would be.
"""

from __future__ import annotations

import http.client
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

_HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "upgrade", "proxy-connection"}


def _handler(upstream_port: int) -> type[BaseHTTPRequestHandler]:
    class Forward(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self._forward()

        def do_HEAD(self) -> None:
            self._forward()

        def _forward(self) -> None:
            headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP_BY_HOP}
            claimed = headers.pop("X-Forwarded-For", None)
            client = self.client_address[0]
            headers["X-Forwarded-For"] = f"{claimed}, {client}" if claimed else client
            headers["X-Forwarded-Proto"] = "http"
            upstream = http.client.HTTPConnection("127.0.0.1", upstream_port, timeout=120)
            try:
                upstream.request(self.command, self.path, headers=headers)
                response = upstream.getresponse()
                body = response.read()
            finally:
                upstream.close()
            self.send_response(response.status)
            for name, value in response.getheaders():
                if name.lower() not in _HOP_BY_HOP and name.lower() != "content-length":
                    self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass  # quiet: the tests read the responses, not a log

    return Forward


def main() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(int(sys.argv[1])))
    print(f"ready {server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
