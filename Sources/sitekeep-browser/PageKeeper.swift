import CWebKitGTK
import Foundation
import SiteKeepBrowserCore
import SiteKeepJSON

/// Makes the kept copy of a page a view has just loaded: its HTML as the server sent it, with
/// figures, style sheets and scripts inlined from what WebKit loaded, into the site's kept-page
/// cache. Shared by a tab (every page the reader opens) and the prefetcher (the reading list).
@MainActor
enum PageKeeper {
    enum Outcome {
        /// Kept.
        case kept
        /// The page is not an HTML page that loaded (a 404, an image): nothing to keep.
        case notAPage
        /// The view moved on before the copy was made.
        case dropped
        /// The cache refused it (budget, storage).
        case failed(KeptPageError)
    }

    /// The biggest figure, style sheet or script inlined, and all of them together.
    static let maximumResource = 8 << 20
    static let maximumResources = 32 << 20

    /// Keeps what `view` shows at `url` (`resources`: what it loaded, main resource included).
    /// - Parameters:
    ///   - makeRoom: whether older pages may be dropped to stay within the budget (false for a prefetch).
    ///   - current: whether the view still shows that load (checked before each step).
    static func keep(view: UnsafeMutablePointer<WebKitWebView>, url: String, title: String?, resources: [OpaquePointer],
                     into cache: KeptPageCache, makeRoom: Bool = true, current: @escaping @MainActor () -> Bool,
                     done: @escaping @MainActor (Outcome) -> Void) {
        guard let main = webkit_web_view_get_main_resource(view) else { done(.notAPage); return }
        if let response = webkit_web_resource_get_response(main) {
            let status = webkit_uri_response_get_status_code(response)
            let mime = string(webkit_uri_response_get_mime_type(response)) ?? ""
            guard status == 200, mime == "text/html" else { done(.notAPage); return }
        }
        let subresources = resources.filter { $0 != main }
        let collector = ResourceCollector(count: subresources.count + 1) { parts in
            guard current() else { done(.dropped); return }
            PageKeeper.compose(view: view, url: url, title: title, parts: parts, into: cache, makeRoom: makeRoom, current: current, done: done)
        }
        fetch(main, index: 0, into: collector)
        for (i, r) in subresources.enumerated() { fetch(r, index: i + 1, into: collector) }
    }

    private static func fetch(_ resource: OpaquePointer, index: Int, into collector: ResourceCollector) {
        let uri = string(webkit_web_resource_get_uri(resource)) ?? ""
        let mime = webkit_web_resource_get_response(resource).flatMap { string(webkit_uri_response_get_mime_type($0)) } ?? ""
        typealias Done = @MainActor (UnsafeMutablePointer<GObject>?, OpaquePointer?) -> Void
        let done: Done = { source, result in
            var length: gsize = 0
            var error: UnsafeMutablePointer<GError>?
            let bytes: [UInt8]
            if let data = webkit_web_resource_get_data_finish(OpaquePointer(source), result, &length, &error) {
                bytes = Array(UnsafeBufferPointer(start: data, count: Int(length)))
                g_free(data)
            } else {
                if let error { g_error_free(error) }
                bytes = []
            }
            collector.add(index: index, part: ResourcePart(url: uri, mime: mime, bytes: bytes))
        }
        skb_resource_data(resource, { source, result, ctx in
            let b = Unmanaged<Callback<Done>>.fromOpaque(ctx!).takeRetainedValue()
            MainActor.assumeIsolated { b.fn(source, result) }
        }, Callback(done).retained)
    }

    private static func compose(view: UnsafeMutablePointer<WebKitWebView>, url: String, title: String?, parts: [ResourcePart],
                                into cache: KeptPageCache, makeRoom: Bool, current: @escaping @MainActor () -> Bool,
                                done: @escaping @MainActor (Outcome) -> Void) {
        guard let main = parts.first, !main.bytes.isEmpty else { done(.notAPage); return }
        var map: [JSONMember] = []
        var total = main.bytes.count
        for p in parts.dropFirst() where !p.bytes.isEmpty && p.bytes.count <= maximumResource {
            total += p.bytes.count
            if total > maximumResources { break }
            let type = p.mime.lowercased()
            if type == "text/css" || type.hasSuffix("javascript") || type == "text/ecmascript" {
                map.append(JSONMember(key: p.url, value: ["text": .string(String(decoding: p.bytes, as: UTF8.self))]))
            } else if type.hasPrefix("image/") {
                map.append(JSONMember(key: p.url, value: ["data": .string("data:\(type);base64," + Data(p.bytes).base64EncodedString())]))
            }
        }
        let script = PageScripts.inlineDocument(html: String(decoding: main.bytes, as: UTF8.self), url: url, resources: .object(map))
        runAsyncScript(in: view, script, world: PageScripts.worldName) { value in
            guard current() else { done(.dropped); return }
            guard let document = text(value) else { done(.notAPage); return }
            do throws(KeptPageError) {
                try cache.keep(url: url, title: title, document: Array(document.utf8), makeRoom: makeRoom)
                done(.kept)
            } catch {
                done(.failed(error))
            }
        }
    }
}

struct ResourcePart {
    var url: String
    var mime: String
    var bytes: [UInt8]
}

/// Gathers the asynchronous reads of a page's resources; calls `done` once all have answered.
@MainActor
final class ResourceCollector {
    private var parts: [ResourcePart?]
    private var left: Int
    private let done: @MainActor ([ResourcePart]) -> Void

    init(count: Int, done: @escaping @MainActor ([ResourcePart]) -> Void) {
        parts = Array(repeating: nil, count: count)
        left = count
        self.done = done
    }

    func add(index: Int, part: ResourcePart) {
        guard parts.indices.contains(index), parts[index].map({ _ in false }) ?? true else { return }
        parts[index] = part
        left -= 1
        if left == 0 { done(parts.compactMap { $0 }) }
    }
}

/// Evaluates `script` in `view` (`world` nil: the page's own) and passes the value (nil on an
/// error) to `done`, which must not keep it.
@MainActor
func runScript(in view: UnsafeMutablePointer<WebKitWebView>, _ script: String, world: String?, done: @escaping @MainActor (OpaquePointer?) -> Void) {
    typealias Done = @MainActor (UnsafeMutablePointer<GObject>?, OpaquePointer?) -> Void
    let cb: Done = { source, result in
        var error: UnsafeMutablePointer<GError>?
        let value = webkit_web_view_evaluate_javascript_finish(UnsafeMutableRawPointer(source)?.assumingMemoryBound(to: WebKitWebView.self), result, &error)
        if let error { g_error_free(error) }
        done(value)
        if let value { g_object_unref(UnsafeMutableRawPointer(value)) }
    }
    skb_evaluate(view, script, world, { source, result, ctx in
        let b = Unmanaged<Callback<Done>>.fromOpaque(ctx!).takeRetainedValue()
        MainActor.assumeIsolated { b.fn(source, result) }
    }, Callback(cb).retained)
}

/// Calls `body` as the body of an async function in `view` (`world` nil: the page's own),
/// awaiting a promise it returns, and passes the value (nil on an error) to `done`, which must
/// not keep it.
@MainActor
func runAsyncScript(in view: UnsafeMutablePointer<WebKitWebView>, _ body: String, world: String?, done: @escaping @MainActor (OpaquePointer?) -> Void) {
    typealias Done = @MainActor (UnsafeMutablePointer<GObject>?, OpaquePointer?) -> Void
    let cb: Done = { source, result in
        var error: UnsafeMutablePointer<GError>?
        let value = webkit_web_view_call_async_javascript_function_finish(UnsafeMutableRawPointer(source)?.assumingMemoryBound(to: WebKitWebView.self), result, &error)
        if let error { g_error_free(error) }
        done(value)
        if let value { g_object_unref(UnsafeMutableRawPointer(value)) }
    }
    skb_call_async(view, body, world, { source, result, ctx in
        let b = Unmanaged<Callback<Done>>.fromOpaque(ctx!).takeRetainedValue()
        MainActor.assumeIsolated { b.fn(source, result) }
    }, Callback(cb).retained)
}
