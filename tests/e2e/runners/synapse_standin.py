"""A stand-in for an Azure Synapse workspace's Spark batch API, for tests only (Synapse itself
cannot run here): ``python synapse_standin.py PORT LIVY_URL TOKEN LOG``.

It serves ``/livyApi/versions/{v}/sparkPools/{pool}/batches[/...]`` on 127.0.0.1:PORT, refuses
requests without ``Authorization: Bearer TOKEN`` (401, as Synapse does), appends each request
(method, path, headers of interest, body) to LOG as a JSON line, and forwards it to the real
Livy server at LIVY_URL (``/batches[/...]``), dropping the fields Livy does not know (``tags``,
``artifactId``). The answers are Livy's."""

import json
import re
import sys
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PORT, LIVY, TOKEN, LOG = int(sys.argv[1]), sys.argv[2].rstrip("/"), sys.argv[3], sys.argv[4]
PATH = re.compile(r"^/livyApi/versions/[^/]+/sparkPools/[^/]+(/batches.*)$")


class Handler(BaseHTTPRequestHandler):
    def _handle(self, method):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        with open(LOG, "a") as f:
            f.write(json.dumps({"method": method, "path": self.path,
                                "authorization": self.headers.get("Authorization"),
                                "body": json.loads(body) if body else None}) + "\n")
        match = PATH.match(self.path)
        if self.headers.get("Authorization") != f"Bearer {TOKEN}":
            return self._reply(401, b'{"code": "Unauthorized"}')
        if not match:
            return self._reply(404, b'{"code": "NotFound"}')
        if body:
            data = json.loads(body)
            data.pop("tags", None)
            data.pop("artifactId", None)
            body = json.dumps(data).encode()
        request = urllib.request.Request(LIVY + match.group(1), data=body or None, method=method,
                                         headers={"Content-Type": "application/json",
                                                  "X-Requested-By": "synapse-standin"})
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                self._reply(response.status, response.read())
        except urllib.error.HTTPError as error:
            self._reply(error.code, error.read())

    def _reply(self, status, payload):
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def do_GET(self):
        self._handle("GET")

    def do_POST(self):
        self._handle("POST")

    def do_DELETE(self):
        self._handle("DELETE")

    def log_message(self, *args):
        pass


ThreadingHTTPServer(("127.0.0.1", PORT), Handler).serve_forever()
