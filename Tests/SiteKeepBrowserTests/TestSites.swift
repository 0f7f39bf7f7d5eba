/// The pages the two loopback test sites serve.
enum TestSites {
    /// Site One's page: calls the bridge (schedule.get, storage.set/get, key.sign), writes
    /// localStorage and IndexedDB, embeds a frame from Site Two's origin, and records what the
    /// frame found in `window.__results.frame`. Results land in `window.__results` (`done` last).
    static func bridgePage(frameOrigin: String) -> String {
        """
        <!DOCTYPE html>
        <html><head><title>Site One: the bridge</title><link rel="stylesheet" href="style.css">
        <script>
        window.__results = {};
        window.__events = [];
        window.addEventListener("nr:schedule", (e) => window.__events.push(e.detail));
        window.addEventListener("message", (e) => { if (e.data && e.data.frame) window.__results.frame = e.data; });
        </script></head>
        <body><h1>Site One</h1><p>A page of an app-bound site, calling SiteKeep through <code>window.webkit.messageHandlers.pt</code>.</p>
        <img src="fig.svg" width="160" height="60" alt="figure">
        <p id="out" style="font: 13px monospace; white-space: pre-wrap; background: #fff; padding: 6px">…</p>
        <p>A frame from another origin (it finds no bridge):</p>
        <iframe id="f" src="\(frameOrigin)/frame.html" width="520" height="70"></iframe>
        <script>
        (async () => {
          const r = window.__results;
          r.ptApp = window.ptApp || null;
          const pt = window.webkit && window.webkit.messageHandlers && window.webkit.messageHandlers.pt;
          async function call(name, msg) {
            try { r[name] = { ok: await pt.postMessage(msg) }; } catch (e) { r[name] = { error: e.code, message: e.message }; }
          }
          await call("schedule", { op: "schedule.get" });
          await call("set", { op: "storage.set", key: "theme", value: "dark" });
          await call("get", { op: "storage.get", key: "theme" });
          await call("sign", { op: "key.sign", key: "summit", data: "aGk=" });
          await call("hello", { op: "hello", origin: "http://evil.example" });
          localStorage.setItem("secret", "site-one-local-7f3a");
          await new Promise((done) => {
            const o = indexedDB.open("db", 1);
            o.onupgradeneeded = () => o.result.createObjectStore("s");
            o.onsuccess = () => { const t = o.result.transaction("s", "readwrite"); t.objectStore("s").put("site-one-idb-7f3a", "secret"); t.oncomplete = done; t.onerror = done; };
            o.onerror = done;
          });
          const show = Object.assign({}, r); delete show.ptApp;
          document.getElementById("out").textContent = Object.entries(show).map(([k, v]) => k + ": " + JSON.stringify(v)).join("\\n");
          r.done = true;
        })();
        </script></body></html>
        """
    }

    /// Site Two's frame page, embedded cross-origin in Site One: reports whether it can see the bridge.
    static let framePage = """
        <!DOCTYPE html><title>frame</title><body style="font: 13px sans-serif; background: #fee">
        <script>
        const h = window.webkit && window.webkit.messageHandlers;
        const found = { frame: true, webkit: typeof window.webkit, pt: !!(h && h.pt), ptApp: typeof window.ptApp, local: localStorage.getItem("secret") };
        document.body.textContent = "cross-origin frame: " + JSON.stringify(found);
        parent.postMessage(found, "*");
        </script></body>
        """

    /// Site Two's page: looks for Site One's localStorage and IndexedDB values.
    static let isolationPage = """
        <!DOCTYPE html><html><head><title>Site Two</title></head><body style="font-family: sans-serif">
        <h1>Site Two</h1><pre id="out">…</pre>
        <script>
        window.__results = {};
        (async () => {
          const r = window.__results;
          r.ptApp = window.ptApp || null;
          r.local = localStorage.getItem("secret");
          r.idb = await new Promise((done) => {
            const o = indexedDB.open("db", 1);
            o.onupgradeneeded = () => o.result.createObjectStore("s");
            o.onsuccess = () => { const q = o.result.transaction("s").objectStore("s").get("secret"); q.onsuccess = () => done(q.result === undefined ? null : q.result); q.onerror = () => done("error"); };
            o.onerror = () => done("error");
          });
          localStorage.setItem("mine", "site-two-local-9c1e");
          document.getElementById("out").textContent = "Site One's values seen here: " + JSON.stringify({ local: r.local, idb: r.idb });
          r.done = true;
        })();
        </script></body></html>
        """

    /// A long article, with a figure and a style sheet (both kept inline with it).
    static func article(_ name: String) -> String {
        let paragraphs = (1...120).map { "<p>Paragraph \($0) of article \(name). The reader left off somewhere in here; SiteKeep keeps the place.</p>" }.joined(separator: "\n")
        return """
        <!DOCTYPE html><html><head><title>Article \(name)</title><link rel="stylesheet" href="style.css"></head>
        <body><h1>Article \(name)</h1><img src="fig.svg" width="160" height="60" alt="figure">
        \(paragraphs)
        <p><a id="away" href="http://localhost:9/elsewhere">A link to another site</a></p>
        </body></html>
        """
    }

    /// A short page that counts how many times it ran in its tab (`sessionStorage.loads`, kept
    /// across reloads of the tab and nowhere else).
    static func countingPage(_ name: String) -> String {
        """
        <!DOCTYPE html><title>Counting \(name)</title><h1>Page \(name)</h1>
        <script>sessionStorage.loads = String(Number(sessionStorage.loads || 0) + 1);</script>
        """
    }

    /// A page of links to `foreign` (another host): a plain link, a `target=_blank` one, a form,
    /// and `/away.html` (the endless server's redirect, pointed at `foreign`).
    static func foreignLinksPage(foreign: String) -> String {
        """
        <!DOCTYPE html><title>Links out</title><h1>Links out</h1>
        <p><a id="out" href="\(foreign)/clicked.html">a link to another host</a></p>
        <p><a id="blank" target="_blank" href="\(foreign)/blank.html">the same, in a new window</a></p>
        <p><a id="away" href="/away.html">a link here that redirects there</a></p>
        <form id="form" method="get" action="\(foreign)/form.html"><input name="q" value="x"></form>
        """
    }

    /// A page that, once loaded, navigates itself (no user gesture) to the URL after its `#`.
    static let selfNavigatingPage = """
        <!DOCTYPE html><title>Leaving</title><h1>This page tries to leave its site</h1>
        <script>setTimeout(() => { window.__tried = true; location.href = decodeURIComponent(location.hash.slice(1)); }, 300);</script>
        """

    /// A loopback server (python3 -c, arguments PORT FOLDER AWAY): the folder's files as
    /// http.server serves them; `/endless.html`, a page that starts and never ends (a paragraph
    /// every 200 ms, no length), logging `endless: reader gone` when the reader closes the
    /// connection; and `/away.html`, a redirect (302) to AWAY.
    static let endlessServer = #"""
        import functools, http.server, sys, time
        port, folder, away = int(sys.argv[1]), sys.argv[2], sys.argv[3]
        class Handler(http.server.SimpleHTTPRequestHandler):
            def do_GET(self):
                if self.path == "/away.html":
                    self.send_response(302)
                    self.send_header("Location", away)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                if self.path != "/endless.html":
                    return super().do_GET()
                self.send_response(200)
                self.send_header("Content-Type", "text/html")
                self.end_headers()
                try:
                    self.wfile.write(b"<!DOCTYPE html><title>Endless</title><h1>Endless</h1>")
                    while True:
                        self.wfile.write(b"<p>more</p>" * 50)
                        self.wfile.flush()
                        time.sleep(0.2)
                except OSError:
                    sys.stderr.write("endless: reader gone\n")
                    sys.stderr.flush()
        server = http.server.ThreadingHTTPServer(("127.0.0.1", port), functools.partial(Handler, directory=folder))
        server.serve_forever()
        """#

    /// What every file the download server hands out contains: found on disk, it was saved.
    static let downloadMarker = "sitekeep-download-marker-5d1c"

    /// Site One's page that tries to have files saved with no click (issue 32, defect 6): a
    /// cross-origin iframe (`frameOrigin`) whose document is an attachment named `.profile`, a
    /// same-origin iframe whose document is an attachment, and a same-origin iframe whose
    /// document is `application/octet-stream` with no disposition. The test drives the rest: a
    /// script's `<a download>` click and main-frame navigations to an attachment.
    static func downloadsPage(frameOrigin: String) -> String {
        """
        <!DOCTYPE html><html><head><title>Site One: downloads</title></head>
        <body><h1>Downloads</h1><p>Three frames whose documents are files, not pages.</p>
        <iframe id="cross" src="\(frameOrigin)/attach/cross?name=.profile" width="300" height="60"></iframe>
        <iframe id="same" src="/attach/same?name=same-origin-report.txt" width="300" height="60"></iframe>
        <iframe id="octet" src="/octet/blob.bin" width="300" height="60"></iframe>
        </body></html>
        """
    }

    /// A loopback server (python3 -c, arguments PORT FOLDER) for ``downloadsPage(frameOrigin:)``:
    /// the folder's files as http.server serves them; `/attach/ID?name=NAME`, a `text/plain`
    /// answer with `Content-Disposition: attachment; filename="NAME"`; `/octet/NAME`,
    /// `application/octet-stream` with no disposition; `/plain/NAME`, `text/plain`. Each body
    /// holds ``downloadMarker`` and the path, and says `Cache-Control: no-store` (kept by no cache).
    static let downloadServer = #"""
        import functools, http.server, sys, urllib.parse
        port, folder = int(sys.argv[1]), sys.argv[2]
        MARK = b"sitekeep-download-marker-5d1c"
        class Handler(http.server.SimpleHTTPRequestHandler):
            def do_GET(self):
                url = urllib.parse.urlsplit(self.path)
                kind = url.path.split("/")[1] if url.path.count("/") >= 2 else ""
                if kind not in ("attach", "octet", "plain"):
                    return super().do_GET()
                body = MARK + b" " + self.path.encode() + b"\n"
                self.send_response(200)
                if kind == "attach":
                    name = urllib.parse.parse_qs(url.query).get("name", ["file.txt"])[0]
                    self.send_header("Content-Type", "text/plain")
                    self.send_header("Content-Disposition", 'attachment; filename="%s"' % name)
                elif kind == "octet":
                    self.send_header("Content-Type", "application/octet-stream")
                else:
                    self.send_header("Content-Type", "text/plain")
                self.send_header("Cache-Control", "no-store")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
        server = http.server.ThreadingHTTPServer(("127.0.0.1", port), functools.partial(Handler, directory=folder))
        server.serve_forever()
        """#

    /// Serves a folder (argv: PORT FOLDER) with `Cache-Control: no-cache` and an ETag on every
    /// file, answering a matching `If-None-Match` with 304 and no body: what makes WebKit
    /// revalidate a style sheet or figure a page shares with the page before it. Every request
    /// is logged (stderr) as http.server logs it.
    static let revalidatingServer = #"""
        import functools, hashlib, http.server, mimetypes, os, sys, urllib.parse
        port, folder = int(sys.argv[1]), sys.argv[2]
        class Handler(http.server.SimpleHTTPRequestHandler):
            def do_GET(self):
                name = os.path.join(folder, urllib.parse.urlsplit(self.path).path.lstrip("/"))
                if not os.path.isfile(name):
                    return self.send_error(404)
                body = open(name, "rb").read()
                tag = '"%s"' % hashlib.sha256(body).hexdigest()[:16]
                if self.headers.get("If-None-Match") == tag:
                    self.send_response(304)
                    self.send_header("ETag", tag)
                    self.send_header("Cache-Control", "no-cache")
                    self.end_headers()
                    return
                self.send_response(200)
                self.send_header("Content-Type", mimetypes.guess_type(name)[0] or "application/octet-stream")
                self.send_header("Content-Length", str(len(body)))
                self.send_header("ETag", tag)
                self.send_header("Cache-Control", "no-cache")
                self.end_headers()
                self.wfile.write(body)
        server = http.server.ThreadingHTTPServer(("127.0.0.1", port), functools.partial(Handler, directory=folder))
        server.serve_forever()
        """#

    static let style = "body { background: #f4f1ea; color: #222; font: 16px/1.5 serif; max-width: 44em; margin: 1em auto } h1 { color: #5a3d1e }"
    static let figure = ##"<svg xmlns="http://www.w3.org/2000/svg" width="160" height="60"><rect width="160" height="60" rx="8" fill="#b5452f"/><text x="80" y="38" font-size="20" text-anchor="middle" fill="#fff" font-family="sans-serif">figure</text></svg>"##
}
