#!/usr/bin/env python3
"""A stand-in for the SG/Send vault API on loopback, for tests that need a real `sgit push`.

    sgit-standin-server.py DATA_DIR PORT_FILE

Binds 127.0.0.1 on a free port, writes the port number to PORT_FILE, and serves until killed.
It speaks the routes sgit-ai 0.26.0's client uses (SGIT-FORMAT.md section 7.1): write, read,
delete, batch (read / write / write-if-match / delete), list; the presigned routes answer
"presigned_not_available", as the in-memory host in sgit's own tests does. Files live in
DATA_DIR/<vault id>/<file id>. Like the real server it holds only ciphertext, and it enforces
the write key: the first write to a vault records the key it carried, every later write must
carry the same one (HTTP 403 otherwise). A test uses it to show that what reaches a vault
through a push needed the write key.

Test support only (started and stopped by pid by the tests); never part of SiteKeep.
"""
import base64
import json
import os
import re
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlsplit, parse_qs

FILE_ID = re.compile(r'^bare/(data|refs|indexes|keys|branches|pending|cache/value|cache/pointer)/[A-Za-z0-9_.-]{1,200}$')
VAULT_ID = re.compile(r'^[a-z0-9]{4,24}$')
LOCK = threading.Lock()


class Store:
    def __init__(self, root):
        self.root = root

    def path(self, vault_id, file_id):
        if not VAULT_ID.match(vault_id) or not FILE_ID.match(file_id) or '..' in file_id:
            raise ValueError(f'refused id {vault_id}/{file_id}')
        return os.path.join(self.root, vault_id, file_id)

    def read(self, vault_id, file_id):
        p = self.path(vault_id, file_id)
        if not os.path.isfile(p):
            return None
        with open(p, 'rb') as f:
            return f.read()

    def write(self, vault_id, file_id, data):
        p = self.path(vault_id, file_id)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        tmp = p + '.tmp'
        with open(tmp, 'wb') as f:
            f.write(data)
        os.replace(tmp, p)

    def delete(self, vault_id, file_id):
        p = self.path(vault_id, file_id)
        if os.path.isfile(p):
            os.unlink(p)

    def list(self, vault_id, prefix):
        base = os.path.join(self.root, vault_id)
        out = []
        for folder, _, files in os.walk(base):
            for name in files:
                rel = os.path.relpath(os.path.join(folder, name), base)
                if rel.startswith(prefix) and not rel.endswith('.tmp'):
                    out.append(rel)
        return sorted(out)

    def check_write_key(self, vault_id, key):
        """The first write key a vault sees is its key; later writes must carry it."""
        if not VAULT_ID.match(vault_id) or not key:
            return False
        p = os.path.join(self.root, vault_id + '.write-key')
        if not os.path.isfile(p):
            os.makedirs(self.root, exist_ok=True)
            with open(p, 'w') as f:
                f.write(key)
            return True
        with open(p) as f:
            return f.read() == key


class Handler(BaseHTTPRequestHandler):
    protocol_version = 'HTTP/1.1'
    store = None

    def log_message(self, fmt, *args):
        sys.stderr.write('standin: ' + (fmt % args) + '\n')

    def reply(self, status, body=b'', content_type='application/json'):
        if isinstance(body, (dict, list)):
            body = json.dumps(body).encode()
        self.send_response(status)
        self.send_header('Content-Type', content_type)
        self.send_header('Content-Length', str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def body(self):
        n = int(self.headers.get('Content-Length') or 0)
        return self.rfile.read(n) if n else b''

    def route(self):
        parts = urlsplit(self.path)
        segments = parts.path.split('/')
        # ['', 'api', 'vault', action, vault_id, file_id?]
        if len(segments) < 5 or segments[1] != 'api' or segments[2] != 'vault':
            return None, None, None, parts
        action = segments[3]
        vault_id = segments[4]
        file_id = unquote('/'.join(segments[5:])) if len(segments) > 5 else None
        return action, vault_id, file_id, parts

    def authorised(self, vault_id):
        return self.store.check_write_key(vault_id, self.headers.get('x-sgraph-vault-write-key', ''))

    def do_GET(self):
        action, vault_id, file_id, parts = self.route()
        try:
            with LOCK:
                if action == 'read' and file_id:
                    data = self.store.read(vault_id, file_id)
                    return self.reply(404, {'detail': 'not found'}) if data is None else self.reply(200, data, 'application/octet-stream')
                if action == 'list':
                    prefix = parse_qs(parts.query).get('prefix', [''])[0]
                    return self.reply(200, {'files': self.store.list(vault_id, prefix)})
                if action == 'presigned':
                    return self.reply(400, {'detail': 'presigned_not_available'})
        except ValueError as e:
            return self.reply(400, {'detail': str(e)})
        self.reply(404, {'detail': 'no such route'})

    def do_PUT(self):
        action, vault_id, file_id, _ = self.route()
        data = self.body()
        if action != 'write' or not file_id:
            return self.reply(404, {'detail': 'no such route'})
        try:
            with LOCK:
                if not self.authorised(vault_id):
                    return self.reply(403, {'detail': 'wrong write key'})
                self.store.write(vault_id, file_id, data)
        except ValueError as e:
            return self.reply(400, {'detail': str(e)})
        self.reply(200, {'status': 'ok'})

    def do_DELETE(self):
        action, vault_id, file_id, _ = self.route()
        self.body()
        if action != 'delete' or not file_id:
            return self.reply(404, {'detail': 'no such route'})
        try:
            with LOCK:
                if not self.authorised(vault_id):
                    return self.reply(403, {'detail': 'wrong write key'})
                self.store.delete(vault_id, file_id)
        except ValueError as e:
            return self.reply(400, {'detail': str(e)})
        self.reply(200, {'status': 'ok'})

    def do_POST(self):
        action, vault_id, _, _ = self.route()
        raw = self.body()
        if action == 'presigned':
            return self.reply(400, {'detail': 'presigned_not_available'})
        if action != 'batch':
            return self.reply(404, {'detail': 'no such route'})
        try:
            ops = json.loads(raw or b'{}').get('operations', [])
        except json.JSONDecodeError:
            return self.reply(400, {'detail': 'not JSON'})
        try:
            with LOCK:
                writes = [op for op in ops if op.get('op', 'write') != 'read']
                if writes and not self.authorised(vault_id):
                    return self.reply(403, {'detail': 'wrong write key'})
                for op in writes:                       # compare first: a lost race writes nothing
                    if op.get('op') == 'write-if-match' and op.get('match'):
                        if self.store.read(vault_id, op['file_id']) != base64.b64decode(op['match']):
                            return self.reply(200, {'status': 'conflict', 'message': f'CAS mismatch on {op["file_id"]}'})
                results = []
                for op in ops:
                    kind, file_id = op.get('op', 'write'), op['file_id']
                    if kind == 'read':
                        data = self.store.read(vault_id, file_id)
                        results.append({'status': 'not_found', 'file_id': file_id} if data is None else
                                       {'status': 'ok', 'file_id': file_id, 'data': base64.b64encode(data).decode()})
                    elif kind == 'delete':
                        self.store.delete(vault_id, file_id)
                        results.append({'status': 'ok', 'file_id': file_id})
                    else:
                        self.store.write(vault_id, file_id, base64.b64decode(op['data']))
                        results.append({'status': 'ok', 'file_id': file_id})
        except (ValueError, KeyError) as e:
            return self.reply(400, {'detail': str(e)})
        self.reply(200, {'status': 'ok', 'results': results})


def main():
    if len(sys.argv) != 3:
        sys.exit('usage: sgit-standin-server.py DATA_DIR PORT_FILE')
    Handler.store = Store(sys.argv[1])
    server = ThreadingHTTPServer(('127.0.0.1', 0), Handler)
    tmp = sys.argv[2] + '.tmp'
    with open(tmp, 'w') as f:
        f.write(str(server.server_address[1]))
    os.replace(tmp, sys.argv[2])
    server.serve_forever()


if __name__ == '__main__':
    main()
