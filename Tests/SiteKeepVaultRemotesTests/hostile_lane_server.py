"""A hostile vault server's append lane, for SiteKeep's lane client tests (issue 48, item 5): it
answers every /api/vault/append/VERB/VAULT with 200 and a body that is wrong the way the vault
id names (the vault id picks the lie):

  listmany1   list: 300 entries (more than the limit of 200 asked)
  listpath1   list: an entry whose file_id is a path ("../../x")
  listorder1  list: ids out of order (the second before the first)
  listhuge1   list: 2 MiB of entries (past the answer's bound)
  fetchnot1   fetch: a file that was not asked for
  fetchsize1  fetch: a size that is not the content's
  marknot1    mark-processed: an id moved that was not asked for
  garbage1    any verb: not JSON

argv: PORT_FILE. The port is written to PORT_FILE once it listens. Started by the tests on
loopback and stopped by process id.
"""
import base64, http.server, json, sys

PORT_FILE = sys.argv[1]
ID = "1796666150730_" + "a" * 24 + ".enc"
TOKEN = "ab" * 32


def entry(i):
    return {"inbox": TOKEN, "file_id": "%013d_%s.enc" % (1796666150730 + i, "%024x" % i), "received": 1796666150730 + i}


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        asked = json.loads(self.rfile.read(length) or b"{}")
        parts = self.path.strip("/").split("/")
        verb, vault = parts[3], parts[4]
        body = {"status": "ok"}
        if vault == "garbage1":
            raw = b"<html>not the api</html>"
        else:
            if vault == "listmany1":
                body.update(entries=[entry(i) for i in range(300)], truncated=False)
            elif vault == "listpath1":
                body.update(entries=[{"inbox": TOKEN, "file_id": "../../x", "received": 1}], truncated=False)
            elif vault == "listorder1":
                body.update(entries=[entry(2), entry(1)], truncated=False)
            elif vault == "listhuge1":
                body.update(entries=[entry(i) for i in range(20000)], truncated=False)
            elif vault == "fetchnot1":
                other = entry(7)["file_id"]
                body.update(files=[{"file_id": other, "size": 1, "content": base64.b64encode(b"x").decode()}], missing=[])
            elif vault == "fetchsize1":
                fid = asked["file_ids"][0]
                body.update(files=[{"file_id": fid, "size": 99, "content": base64.b64encode(b"x").decode()}],
                            missing=asked["file_ids"][1:])
            elif vault == "marknot1":
                body.update(moved=[entry(9)["file_id"]], missing=[])
            raw = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
with open(PORT_FILE + ".tmp", "w") as f:
    f.write(str(server.server_address[1]))
import os
os.rename(PORT_FILE + ".tmp", PORT_FILE)
server.serve_forever()
