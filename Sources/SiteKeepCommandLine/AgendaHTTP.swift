import SiteKeepCore
import SiteKeepHTTP
import SiteKeepSystem

/// Fetches agenda URLs with `If-None-Match` through SiteKeep's one HTTP client (SiteKeepHTTP:
/// libcurl, loaded on the first fetch).
///
/// The only HTTP the native core needs, kept in this one file. It was a `curl` child process,
/// whose `--max-filesize` holds only for a declared length: a chunked answer ran on into
/// `$TMPDIR` (issue 32). Now the body is read into memory and the transfer is stopped as soon as
/// it passes ``maxBytes``, chunked or not; nothing is written to a temporary file. Only `https`
/// (and `http` to loopback) is fetched, and no redirect is followed: a 3xx names where it points,
/// to be loaded instead.
struct HTTPAgendaFetcher: AgendaFetcher {
    /// The largest agenda fetched (as the largest agenda file read).
    let maxBytes = 16 << 20

    func fetch(url: String, ifNoneMatch etag: String?) async throws(AgendaError) -> AgendaFetchResult {
        guard url.utf8.count <= 2048, !url.utf8.contains(where: { $0 <= 0x20 || $0 == 0x7f }), HTTPClient.isAllowedURL(url) else {
            throw .fetchFailed("\(Self.printable(url, 80)) is refused: give an https URL (plain http only to loopback)")
        }
        var headers = [("Accept", "application/json")]
        if let etag, !etag.utf8.contains(where: { $0 < 0x20 || $0 == 0x7f }) { headers.append(("If-None-Match", etag)) }
        let r: HTTPResponse
        do {
            r = try HTTPClient.send(HTTPRequest(method: "GET", url: url, headers: headers, timeoutMs: 30_000, totalTimeoutMs: 60_000, maxResponseBytes: maxBytes))
        } catch {
            switch error.kind {
            case .tooLarge: throw .fetchFailed("the agenda is larger than \(maxBytes >> 20) MiB; SiteKeep stopped reading it there")
            default: throw .fetchFailed(error.description)
            }
        }
        switch r.status {
        case 304: return .notModified
        case 200:
            let tag = r.header("etag")
            return .fetched(body: r.body, etag: tag?.isEmpty == false ? tag : nil)
        case 300...399:
            let to = r.header("location").map { " to " + Self.printable($0, 200) } ?? ""
            throw .fetchFailed("the server answered HTTP \(r.status), a redirect\(to); SiteKeep follows no redirects: load the URL it points to")
        default:
            throw .fetchFailed("the server answered HTTP \(r.status)")
        }
    }

    /// `text` cut to `limit` characters, hidden characters escaped by SiteKeep's one display
    /// escaper (``DisplayText``: it goes into a message).
    static func printable(_ text: String, _ limit: Int) -> String {
        DisplayText.escaped(text, limit: limit)
    }
}
