"""A hostile HTTP server for SiteKeep's HTTP client tests (issue 32): it never forwards anything,
it only misbehaves, by the first path segment:

  /redirect/REST   307 to http://127.0.0.1:RECORDER/REST (another origin: another port)
  /endless/REST    200 with an endless chunked body (64 KiB chunks), up to CAP bytes in all
  /headers/REST    200 with header lines that never end (up to CAP bytes)

A second listener, the recorder, answers every request 200 `{}` and appends the request (method,
path, headers) to RECORD as one JSON line: a client that follows a redirect shows up there, with
whatever headers it sent along. For /endless/ and /headers/ the bytes sent before the client hung
up (or the cap was reached) are appended to RECORD too, as {"sent": N, "completed": bool}.

argv: PORTS_FILE RECORD [CERT KEY]. With CERT and KEY the main listener speaks TLS (the recorder
stays plain http). Once both listen, "MAIN RECORDER" (the two ports) is written to PORTS_FILE.
Started by the tests on loopback and stopped by process id.
"""
import http.server, json, ssl, sys, threading

PORTS_FILE, RECORD = sys.argv[1], sys.argv[2]
TLS = sys.argv[3:5] if len(sys.argv) >= 5 else None
CAP = 512 << 20
lock = threading.Lock()


def record(entry):
    with lock, open(RECORD, "a") as f:
        f.write(json.dumps(entry) + "\n")


class Recorder(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def answer(self):
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        record({"method": self.command, "path": self.path, "headers": [[k, v] for k, v in self.headers.items()]})
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    do_GET = do_POST = do_PUT = do_DELETE = answer


recorder = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Recorder)


class Hostile(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def answer(self):
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        mode, _, rest = self.path.lstrip("/").partition("/")
        if mode == "redirect":
            self.send_response(307)
            self.send_header("Location", "http://127.0.0.1:%d/%s" % (recorder.server_address[1], rest))
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if mode == "endless":
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            chunk = b"[" * (64 << 10)
            framed = b"%x\r\n" % len(chunk) + chunk + b"\r\n"
            sent, completed = 0, False
            try:
                while sent < CAP:
                    self.wfile.write(framed)
                    sent += len(chunk)
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()
                completed = True
            except OSError:
                pass
            record({"sent": sent, "completed": completed, "path": self.path})
            self.close_connection = True
            return
        if mode == "headers":
            sent, completed = 0, False
            try:
                self.wfile.write(b"HTTP/1.1 200 OK\r\n")
                line = b"X-Filler: " + b"a" * 1000 + b"\r\n"
                while sent < CAP:
                    self.wfile.write(line)
                    sent += len(line)
                completed = True
            except OSError:
                pass
            record({"sent": sent, "completed": completed, "path": self.path})
            self.close_connection = True
            return
        self.send_response(404)
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_GET = do_POST = do_PUT = do_DELETE = answer


hostile = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Hostile)
if TLS:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(TLS[0], TLS[1])
    hostile.socket = context.wrap_socket(hostile.socket, server_side=True)
threading.Thread(target=recorder.serve_forever, daemon=True).start()
with open(PORTS_FILE + ".tmp", "w") as f:
    f.write("%d %d" % (hostile.server_address[1], recorder.server_address[1]))
import os
os.rename(PORTS_FILE + ".tmp", PORTS_FILE)
hostile.serve_forever()
