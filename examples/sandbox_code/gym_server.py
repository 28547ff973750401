"""A stand-in gym server for the sandbox's long-lived example: answers 200 on every GET.

Run by nrl-k8s as the gym role's daemon (a Ray job): ``python3 gym_server.py PORT``. It binds
127.0.0.1 only (the sandbox listens on loopback) and serves until the job is stopped. The sandbox
runs every pod on this machine's one network, so it gives each container port a free port of its
own and says which in ``NRL_K8S_SANDBOX_PORT_<PORT>``: two sandboxes never collide.
"""

import os
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b"gym ok\n"
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def main() -> None:
    port = int(os.environ.get(f"NRL_K8S_SANDBOX_PORT_{sys.argv[1]}", sys.argv[1]))
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    print(f"gym server listening on 127.0.0.1:{port}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
