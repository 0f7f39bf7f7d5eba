public import SiteKeepJSON
import Foundation

/// The scripts a site's views run, and the names they share with the host.
///
/// WebKitGTK delivers a script message from every frame that can reach the handler, cross-origin
/// iframes included, and the signal carries no origin. So the handler that reaches the host is
/// registered only in an isolated script world (``worldName``), where page scripts cannot run, and
/// only one script runs in that world: ``relay``, injected into the top frame only, which checks
/// `location.origin` against the site's origins before it relays anything. The page's own world
/// gets ``pageShim``, also top frame only: `window.webkit.messageHandlers.pt.postMessage({op, ...})`
/// and the `window.ptApp = {version, ops}` flag. The two worlds share only the DOM; they talk
/// through events on `document` whose details are JSON strings.
public enum PageScripts {
    /// The isolated world of the relay (WebKit's script world name).
    public static let worldName = "sitekeep-relay"
    /// The handler with replies (in ``worldName``): one page request, answered with a JSON string.
    public static let bridgeHandler = "pt"
    /// The handler without replies (in ``worldName``): scroll position and direction for the chrome.
    public static let hostHandler = "ptHost"
    /// DOM event the page shim sends a request with (detail: `{"id": n, "msg": {...}}` as JSON).
    static let requestEvent = "sitekeep:request"
    /// DOM event the relay answers with (detail: `{"id": n, "reply": {...}}` as JSON).
    static let replyEvent = "sitekeep:reply"

    /// A JavaScript literal of `value` (JSON is a subset of JavaScript; U+2028/2029 escaped).
    static func literal(_ value: JSONValue) -> String {
        JSONSerializer.string(value, style: .compact)
            .replacingOccurrences(of: "\u{2028}", with: "\\u2028")
            .replacingOccurrences(of: "\u{2029}", with: "\\u2029")
    }

    static func originsLiteral(_ site: BrowserSite) -> String {
        literal(.array(site.pageOrigins.map { .string($0) }))
    }

    /// The page-world script: the `pt` handler's stand-in and `window.ptApp`.
    /// - Parameters:
    ///   - version: the protocol version `hello` returned.
    ///   - ops: the ops `hello` listed for the site, less `hello` (the host binds the connection).
    public static func pageShim(site: BrowserSite, version: Int, ops: [String]) -> String {
        let opsLiteral = literal(.array(ops.filter { $0 != "hello" }.map { .string($0) }))
        return """
        (() => {
          "use strict";
          if (window.top !== window || !\(originsLiteral(site)).includes(location.origin)) return;
          let next = 1;
          const pending = new Map();
          document.addEventListener("\(replyEvent)", (e) => {
            let d;
            try { d = JSON.parse(e.detail); } catch (_) { return; }
            const p = pending.get(d.id);
            if (!p) return;
            pending.delete(d.id);
            const r = d.reply || {};
            if (r.ok) { p.resolve(r.result); return; }
            const err = new Error((r.error && r.error.message) || "the bridge failed");
            err.code = (r.error && r.error.code) || "internal";
            p.reject(err);
          });
          const pt = Object.freeze({
            postMessage(msg) {
              return new Promise((resolve, reject) => {
                let text;
                try { text = JSON.stringify(msg); } catch (x) { reject(x); return; }
                const id = next++;
                pending.set(id, { resolve, reject });
                document.dispatchEvent(new CustomEvent("\(requestEvent)", { detail: JSON.stringify({ id, msg: JSON.parse(text) }) }));
              });
            }
          });
          const handlers = Object.freeze({ pt });
          if (window.webkit && typeof window.webkit === "object") {
            try { Object.defineProperty(window.webkit, "messageHandlers", { value: handlers }); } catch (_) {}
          } else {
            Object.defineProperty(window, "webkit", { value: Object.freeze({ messageHandlers: handlers }) });
          }
          Object.defineProperty(window, "ptApp", { value: Object.freeze({ version: \(version), ops: Object.freeze(\(opsLiteral)) }), enumerable: true });
        })();
        """
    }

    /// The relay, run in ``worldName`` in the top frame only: it takes the page shim's requests
    /// off the DOM, passes them to the host's `pt` handler and hands the replies back; it also
    /// reports scroll position (0…1) and direction to `ptHost`.
    public static func relay(site: BrowserSite) -> String {
        """
        (() => {
          "use strict";
          const ORIGINS = \(originsLiteral(site));
          if (window.top !== window || !ORIGINS.includes(location.origin)) return;
          const handlers = window.webkit.messageHandlers;
          document.addEventListener("\(requestEvent)", async (e) => {
            let d;
            try { d = JSON.parse(e.detail); } catch (_) { return; }
            if (!d || typeof d.id !== "number") return;
            let reply;
            try {
              reply = JSON.parse(await handlers.\(bridgeHandler).postMessage(JSON.stringify(d.msg)));
            } catch (x) {
              reply = { ok: false, error: { code: "internal", message: String(x && x.message || x) } };
            }
            document.dispatchEvent(new CustomEvent("\(replyEvent)", { detail: JSON.stringify({ id: d.id, reply }) }));
          });
          // The last position seen, in this world's global: the host's own scrolls (a restored
          // position) set it too, so they are not taken for the reader's.
          window.__sitekeepLastY = window.scrollY;
          let timer = 0;
          const report = () => {
            timer = 0;
            const room = Math.max(0, document.documentElement.scrollHeight - window.innerHeight);
            const y = window.scrollY;
            const lastY = window.__sitekeepLastY;
            const dir = y > lastY ? "down" : (y < lastY ? "up" : "none");
            window.__sitekeepLastY = y;
            handlers.\(hostHandler).postMessage(JSON.stringify({ scroll: room > 0 ? Math.min(1, y / room) : 0, dir }));
          };
          window.addEventListener("scroll", () => { if (!timer) timer = setTimeout(report, 150); }, { passive: true });
          // A link the user clicks to a page off this site leaves through the host before any
          // request is made (the host opens it in the site's own view or the system browser).
          document.addEventListener("click", (e) => {
            if (!e.isTrusted || e.defaultPrevented || e.button !== 0) return;
            const a = e.target && e.target.closest ? e.target.closest("a[href]") : null;
            if (!a) return;
            let u;
            try { u = new URL(a.href, location.href); } catch (_) { return; }
            if ((u.protocol !== "http:" && u.protocol !== "https:") || ORIGINS.includes(u.origin)) return;
            e.preventDefault();
            handlers.\(hostHandler).postMessage(JSON.stringify({ open: u.href }));
          }, true);
        })();
        """
    }

    /// Host script (isolated world), the body of an async function
    /// (`webkit_web_view_call_async_javascript_function`): the kept copy of a page. Parses the
    /// page's own HTML as the server sent it (an inert document: nothing in it runs), puts the
    /// figures (`img`) in as `data:` URLs and the style sheets and scripts in as inline text, from
    /// `resources` (`{absolute URL: {"data": "data:…"} | {"text": "…"}}`), and returns the whole
    /// document. A figure, style sheet or script on the page's origin that `resources` lacks
    /// (WebKit hands over no body for one the session revalidated, HTTP 304, or served from its
    /// memory cache: a page followed by a link in the same tab) is taken from the body the
    /// session already has, its HTTP cache (`fetch` with `force-cache`: the network only for
    /// what the cache lacks), 8 MiB at most each. Shown later at the page's real URL, it runs as
    /// the page did: same origin, same storage, the bridge still there.
    public static func inlineDocument(html: String, url: String, resources: JSONValue) -> String {
        """
        return (async (raw, base, map) => {
          "use strict";
          const doc = new DOMParser().parseFromString(raw, "text/html");
          const abs = (v) => { try { return new URL(v, base).href; } catch (_) { return null; } };
          const origin = new URL(base).origin;
          const cached = async (k, asText) => {
            try {
              if (new URL(k).origin !== origin) return null;
              const res = await fetch(k, { cache: "force-cache", credentials: "same-origin" });
              if (!res.ok) return null;
              const blob = await res.blob();
              if (blob.size === 0 || blob.size > 8388608) return null;
              if (asText) return { text: await blob.text() };
              if (!(blob.type || "").startsWith("image/")) return null;
              const data = await new Promise((done) => {
                const reader = new FileReader();
                reader.onload = () => done(reader.result);
                reader.onerror = () => done(null);
                reader.readAsDataURL(blob);
              });
              return typeof data === "string" ? { data } : null;
            } catch (_) { return null; }
          };
          const get = async (v, asText) => {
            const k = v && abs(v);
            if (!k) return null;
            return Object.prototype.hasOwnProperty.call(map, k) ? map[k] : await cached(k, asText);
          };
          for (const img of doc.querySelectorAll("img[src]")) {
            const r = await get(img.getAttribute("src"), false);
            if (r && r.data) { img.setAttribute("src", r.data); img.removeAttribute("srcset"); img.removeAttribute("loading"); }
          }
          for (const link of doc.querySelectorAll("link[href]")) {
            if (!/(^|\\s)stylesheet(\\s|$)/i.test(link.getAttribute("rel") || "")) continue;
            const r = await get(link.getAttribute("href"), true);
            if (r && typeof r.text === "string") {
              const style = doc.createElement("style");
              if (link.media) style.media = link.media;
              style.textContent = r.text;
              link.replaceWith(style);
            }
          }
          for (const script of doc.querySelectorAll("script[src]")) {
            const r = await get(script.getAttribute("src"), true);
            if (r && typeof r.text === "string" && !/<\\/script/i.test(r.text)) {
              script.removeAttribute("src");
              script.removeAttribute("integrity");
              script.textContent = r.text;
            }
          }
          const doctype = doc.doctype ? "<!DOCTYPE " + doc.doctype.name + ">\\n" : "";
          return doctype + doc.documentElement.outerHTML;
        })(\(literal(.string(html))), \(literal(.string(url))), \(literal(resources)))
        """
    }

    /// Host script (isolated world): the scroll position, 0…1.
    public static let scrollPosition = """
        (() => { const room = Math.max(0, document.documentElement.scrollHeight - window.innerHeight);
                 return room > 0 ? Math.min(1, window.scrollY / room) : 0; })()
        """

    /// Host script (isolated world): scroll to `fraction` (0…1) of the page; the fraction
    /// reached, or -1 while the page has no layout to scroll in yet.
    public static func scroll(to fraction: Double) -> String {
        let f = fraction.isFinite ? min(1, max(0, fraction)) : 0
        return """
        (() => { const room = Math.max(0, document.documentElement.scrollHeight - window.innerHeight);
                 if (window.innerHeight === 0 || (room === 0 && \(f) > 0)) return -1;
                 window.scrollTo(0, Math.round(room * \(f))); window.__sitekeepLastY = window.scrollY;
                 return room > 0 ? window.scrollY / room : 0; })()
        """
    }

    /// Host script (page world): dispatch a daemon event as the page's own event, e.g.
    /// `schedule.changed` → `nr:schedule` with the event's data as `detail`.
    public static func dispatch(event name: String, data: JSONValue) -> String? {
        guard let eventName = pageEventName(for: name) else { return nil }
        return "window.dispatchEvent(new CustomEvent(\(literal(.string(eventName))), { detail: \(literal(data)) }));"
    }

    /// The page event a daemon event becomes: `schedule.changed` → `nr:schedule`,
    /// `vault.changed` → `nr:vault`; nil for a name that is not `<group>.changed`.
    public static func pageEventName(for event: String) -> String? {
        let parts = event.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 2, parts[1] == "changed", !parts[0].isEmpty,
              parts[0].allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber) }) else { return nil }
        return "nr:\(parts[0])"
    }
}
