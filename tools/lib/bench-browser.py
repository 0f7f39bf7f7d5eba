#!/usr/bin/env python3
"""tools/bench browser: sitekeep-browser against a minimal WebKitGTK program (the floor).

Run by tools/bench inside `dbus-run-session -- xvfb-run -a` with GTK_A11Y=none and private
XDG_RUNTIME_DIR/XDG_CACHE_HOME. A throw-away store, `sitekeep serve`, and a test site on loopback
(python http.server) are started and stopped by pid. Measures, as medians over ROUNDS runs:
  - time to first page: `sitekeep open` to the first page's load-finished (the daemon checks
    and starts the browser in between);
  - memory: PSS of the program and every process under it (web, network processes, bwrap) with
    1 and with 5 views, each view on its own page;
  - a bridge round trip (150 after 20 to warm up: within storage.get's burst of 200) from the page (storage.get through the relay, the host and the daemon),
    against the same op from a plain socket client (the daemon's own floor).
usage: bench-browser.py BROWSER SITEKEEP FLOOR [--rounds N] [--markdown]
"""
import json, os, signal, socket, statistics, subprocess, sys, tempfile, time

browser, sitekeep, floor = sys.argv[1:4]
rounds = int(sys.argv[sys.argv.index("--rounds") + 1]) if "--rounds" in sys.argv else 5
markdown = "--markdown" in sys.argv
tmp = tempfile.mkdtemp(prefix="sitekeep-bench-browser.")
procs = []

def spawn(args, **kw):
    p = subprocess.Popen(args, start_new_session=True, **kw)
    procs.append(p)
    return p

def stop(p):
    if p.poll() is None:
        try: os.killpg(p.pid, signal.SIGTERM)
        except ProcessLookupError: pass
        try: p.wait(5)
        except subprocess.TimeoutExpired: os.killpg(p.pid, signal.SIGKILL); p.wait()

def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close(); return port

env = dict(os.environ, SITEKEEP_HOME=f"{tmp}/home", HOME=tmp, SITEKEEP_SOCK=f"{tmp}/run/bridge.sock", NO_COLOR="1")
os.mkdir(f"{tmp}/run", 0o700)
open(f"{tmp}/pass", "w").write("bench passphrase\n")
port = free_port()
origin = f"http://127.0.0.1:{port}"
def cli(*args):
    subprocess.run([sitekeep, *args], env=env, check=True, stdout=subprocess.DEVNULL)
cli("init", "--passphrase-file", f"{tmp}/pass", "--argon2-iterations", "2", "--argon2-memory", "19", "--keyring", "file")
cli("site", "add", "Bench", "--origin", origin, "--app-bound", "--keyring", "file", "--passphrase-file", f"{tmp}/pass")
os.mkdir(f"{tmp}/www")
article = "<!DOCTYPE html><title>Article</title><h1>Article</h1>" + "".join(f"<p>Paragraph {i}.</p>" for i in range(200))
for i in range(5):
    open(f"{tmp}/www/p{i}.html", "w").write(article)
open(f"{tmp}/www/rtt.html", "w").write("""<!DOCTYPE html><title>rtt</title><script>
window.__rtt = null;
(async () => {
  const pt = window.webkit.messageHandlers.pt;
  await pt.postMessage({op: "storage.set", key: "k", value: "v"});
  for (let i = 0; i < 20; i++) await pt.postMessage({op: "storage.get", key: "k"});
  // performance.now() is coarse in WebKit (1 ms): time the whole run and divide.
  const s = performance.now();
  for (let i = 0; i < 150; i++) await pt.postMessage({op: "storage.get", key: "k"});
  window.__rtt = (performance.now() - s) / 150;
})().catch((e) => { window.__rtt = "error: " + e.code; });
</script>""")
http = spawn([sys.executable, "-m", "http.server", "--bind", "127.0.0.1", str(port), "--directory", f"{tmp}/www"],
             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
serve = spawn([sitekeep, "serve", "--keyring", "file"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
for _ in range(100):
    if os.path.exists(f"{tmp}/run/control.sock"): break
    time.sleep(0.05)
cli("unlock", "--passphrase-file", f"{tmp}/pass", "--keyring", "file")
for _ in range(100):
    try: socket.create_connection(("127.0.0.1", port), 0.2).close(); break
    except OSError: time.sleep(0.05)

def descendants(pid):
    children = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try: ppid = int(open(f"/proc/{d}/stat").read().rsplit(")", 1)[1].split()[1])
            except OSError: continue
            children.setdefault(ppid, []).append(int(d))
    out, todo = [], [pid]
    while todo:
        p = todo.pop(); out.append(p); todo += children.get(p, [])
    return out

def pss_mb(pid, without_root=False):
    total = 0
    for p in descendants(pid)[1 if without_root else 0:]:
        try:
            for line in open(f"/proc/{p}/smaps_rollup"):
                if line.startswith("Pss:"): total += int(line.split()[1])
        except OSError: pass
    return total / 1024

def run_browser(urls, settle=1.5, rtt=False):
    """Start sitekeep-browser on urls (`sitekeep open`: the daemon starts it, so it is one of the
    daemon's children); (seconds to first load, PSS MB once all loaded, rtt ms)."""
    benv = dict(env, GTK_A11Y="none", XDG_RUNTIME_DIR=f"{tmp}/xdg", XDG_CACHE_HOME=f"{tmp}/cache")
    os.makedirs(f"{tmp}/xdg", 0o700, exist_ok=True)
    t0 = time.monotonic()
    p = spawn([sitekeep, "open", "--automation", "--passphrase-file", f"{tmp}/pass", *urls], env=benv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
              stderr=subprocess.DEVNULL, text=True, bufsize=1)
    first, loads, value = None, 0, None
    while loads < len(urls):
        line = p.stdout.readline()
        if not line: raise SystemExit("bench-browser: sitekeep-browser ended early")
        if '"event":"loaded"' in line:
            loads += 1
            if first is None: first = time.monotonic() - t0
    time.sleep(settle)
    # The browser and its web, network and bwrap processes: everything under the daemon but
    # the daemon itself (`sitekeep open` only waits).
    mem = pss_mb(serve.pid, without_root=True)
    if rtt:
        for i in range(100):
            p.stdin.write(json.dumps({"cmd": "eval", "id": i, "tab": 0, "js": "window.__rtt"}) + "\n"); p.stdin.flush()
            while True:
                e = json.loads(p.stdout.readline() or "{}")
                if e.get("event") == "result" and e.get("id") == i: break
            v = json.loads(e.get("value") or "null")
            if isinstance(v, str): raise SystemExit(f"bench-browser: the page's round trips failed ({v})")
            if v is not None: value = v; break
            time.sleep(0.2)
    p.stdin.write('{"cmd":"quit"}\n'); p.stdin.flush()
    try: p.wait(20)
    except subprocess.TimeoutExpired: stop(p)
    return first, mem, value

def run_floor(urls, settle=1.5):
    benv = dict(os.environ, GTK_A11Y="none", XDG_RUNTIME_DIR=f"{tmp}/xdg", XDG_CACHE_HOME=f"{tmp}/cache-floor", HOME=tmp)
    t0 = time.monotonic()
    p = spawn([floor, *urls], env=benv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    line = p.stdout.readline()
    if not line.startswith("loaded"): raise SystemExit("bench-browser: the floor program ended early")
    first = time.monotonic() - t0
    time.sleep(settle)
    mem = pss_mb(p.pid)
    p.stdin.close()
    try: p.wait(20)
    except subprocess.TimeoutExpired: stop(p)
    return first, mem

def socket_rtt_ms():
    s = socket.socket(socket.AF_UNIX); s.connect(env["SITEKEEP_SOCK"]); f = s.makefile("rwb", buffering=0)
    def call(i, op, args):
        f.write(json.dumps({"v": 1, "id": i, "op": op, "args": args}).encode() + b"\n")
        while True:
            m = json.loads(f.readline())
            if "event" not in m: return m
    call(0, "hello", {"origin": origin})
    for i in range(20): call(i + 1, "storage.get", {"key": "k"})
    s0 = time.perf_counter()
    for i in range(150):
        r = call(i + 100, "storage.get", {"key": "k"})
        if not r.get("ok"): raise SystemExit(f"bench-browser: storage.get failed: {r}")
    s.close()
    return (time.perf_counter() - s0) * 1000 / 150

try:
    one = [f"{origin}/p0.html"]
    five = [f"{origin}/p{i}.html" for i in range(5)]
    b1 = [run_browser(one) for _ in range(rounds)]
    f1 = [run_floor(one) for _ in range(rounds)]
    b5 = [run_browser(five) for _ in range(max(3, rounds - 2))]
    f5 = [run_floor(five) for _ in range(max(3, rounds - 2))]
    rtts = [run_browser([f"{origin}/rtt.html"], settle=0.2, rtt=True)[2] for _ in range(3)]
    sock = [socket_rtt_ms() for _ in range(3)]
    med = lambda xs: statistics.median(xs)
    rows = [
        ("time to first page (process start → load finished)", f"{med([x[0] for x in b1]) * 1000:.0f} ms", f"{med([x[0] for x in f1]) * 1000:.0f} ms", med([x[0] for x in b1]) / med([x[0] for x in f1])),
        ("PSS, 1 view (program + web, network processes)", f"{med([x[1] for x in b1]):.0f} MB", f"{med([x[1] for x in f1]):.0f} MB", med([x[1] for x in b1]) / med([x[1] for x in f1])),
        ("PSS, 5 views", f"{med([x[1] for x in b5]):.0f} MB", f"{med([x[1] for x in f5]):.0f} MB", med([x[1] for x in b5]) / med([x[1] for x in f5])),
        ("bridge round trip from the page (storage.get, mean of 150 in a row)", f"{med(rtts):.3f} ms", f"{med(sock):.3f} ms (socket client)", med(rtts) / med(sock)),
    ]
    if markdown:
        print("### browser\n\n| measurement | sitekeep-browser | floor (minimal WebKitGTK / plain socket) | ratio |\n|---|---|---|---|")
        for r in rows: print(f"| {r[0]} | {r[1]} | {r[2]} | {r[3]:.2f}× |")
        print(f"\nMedians of {rounds} runs (1 view), {max(3, rounds - 2)} (5 views), 3 (round trips; each the mean of 150 calls in a row, performance.now() being coarse in WebKit); Xvfb, software rendering.\n")
    else:
        print("== browser ==")
        for r in rows: print(f"  {r[0]}: {r[1]} vs {r[2]} ({r[3]:.2f}x)")
finally:
    for p in procs: stop(p)
    subprocess.run(["rm", "-rf", tmp])
