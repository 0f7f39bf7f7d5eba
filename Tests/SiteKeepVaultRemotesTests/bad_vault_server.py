"""A misbehaving vault server for SiteKeep's bad-remote tests: it forwards every request to
the real vault server (UPSTREAM) and spoils the answers by the first path segment:

  /garbage/...    200 with bytes that are not JSON
  /truncated/...  the real answer cut in half (Content-Length still the full length)
  /mismatch/...   batch reads answer with one byte of every object flipped
  /mismatch-big/...  batch reads of more than 20 objects (a pull's blobs) answer with one
                  byte of their last object flipped; smaller ones are left alone
  /401/... /403/... /500/...   that status, always
  /429/...        429 with Retry-After: 1 on the first request, then the real answers
  /rl-N-AFTER-TAG/...   rate limiting: the first N requests under this prefix (N "all": every
                  one) answer 429 with Retry-After: AFTER (seconds as given; "date": an HTTP-date
                  two seconds ahead; "none": no header), then the real answers. TAG keeps
                  counts of different tests apart.
  /counts         the requests each rl- and applied502- prefix has seen, as a JSON object
  /applied502-TAG/...   the first write-if-match of a ref (bare/refs/) under this prefix is
                  carried out by the real server, then answered 502 (a gateway that lost the
                  answer); everything else is forwarded

Started by the tests on a loopback port (argv: PORT UPSTREAM) and stopped by process id.
"""
import base64, email.utils, http.server, json, sys, threading, time, urllib.request, urllib.error

PORT, UPSTREAM = int(sys.argv[1]), sys.argv[2].rstrip("/")
seen_429 = set()
counts = {}
lock = threading.Lock()


def bump(mode):
    with lock:
        counts[mode] = counts.get(mode, 0) + 1
        return counts[mode]


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def forward(self):
        mode, _, rest = self.path.lstrip("/").partition("/")
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else None
        if mode == "counts":
            with lock:
                return self.answer(200, json.dumps(counts).encode())
        if mode in ("401", "403", "500"):
            return self.answer(int(mode), b'{"detail": "spoiled"}')
        if mode == "429" and "429" not in seen_429:
            seen_429.add("429")
            return self.answer(429, b'{"detail": "slow down"}', {"Retry-After": "1"})
        if mode.startswith("rl-"):
            _, limit, after, _tag = mode.split("-", 3)
            n = bump(mode)
            if limit == "all" or n <= int(limit):
                extra = {}
                if after == "date":
                    extra["Retry-After"] = email.utils.formatdate(time.time() + 2, usegmt=True)
                elif after != "none":
                    extra["Retry-After"] = after
                return self.answer(429, b'{"detail": "slow down"}', extra)
        headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "content-length", "connection")}
        req = urllib.request.Request(UPSTREAM + "/" + rest, data=body, method=self.command, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=60) as r:
                status, data = r.status, r.read()
        except urllib.error.HTTPError as e:
            status, data = e.code, e.read()
        if mode.startswith("applied502-") and body and "/batch/" in rest:
            ops = json.loads(body).get("operations", [])
            if any(o.get("op") == "write-if-match" and o.get("file_id", "").startswith("bare/refs/") for o in ops) and bump(mode) == 1:
                return self.answer(502, b'{"detail": "bad gateway"}')
        if mode == "garbage":
            return self.answer(200, b"\x00\xffnot json at all" * 10)
        if mode == "truncated":
            self.send_response(status)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data[: len(data) // 2])
            self.wfile.flush()
            self.close_connection = True
            return
        if mode == "mismatch" and "/batch/" in rest and status == 200:
            doc = json.loads(data)
            for r in doc.get("results", []):
                if r.get("status") == "ok" and r.get("file_id", "").startswith("bare/data/"):
                    raw = bytearray(base64.b64decode(r["data"]))
                    raw[-1] ^= 1
                    r["data"] = base64.b64encode(bytes(raw)).decode()
            data = json.dumps(doc).encode()
        if mode == "mismatch-big" and "/batch/" in rest and status == 200:
            doc = json.loads(data)
            objects = [r for r in doc.get("results", []) if r.get("status") == "ok" and r.get("file_id", "").startswith("bare/data/")]
            if len(objects) > 20:
                raw = bytearray(base64.b64decode(objects[-1]["data"]))
                raw[-1] ^= 1
                objects[-1]["data"] = base64.b64encode(bytes(raw)).decode()
            data = json.dumps(doc).encode()
        self.answer(status, data)

    def answer(self, status, data, extra=None):
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_PUT = do_DELETE = forward


http.server.ThreadingHTTPServer(("127.0.0.1", PORT), Handler).serve_forever()
