#if canImport(Glibc)
@preconcurrency import Glibc
#endif
import Foundation
internal import SiteKeepCore
internal import SiteKeepSystem

/// Fetches agenda URLs with `If-None-Match` by running `curl` (`/usr/bin/curl`, or `$SITEKEEP_CURL`).
///
/// The only HTTP the native core needs, kept in this one file. curl rather than URLSession:
/// linking FoundationNetworking (and libcurl with it) would load into every `sitekeep` process,
/// the many that never fetch included; a child process costs only the commands that fetch. The
/// URL goes as `--url` after a fixed argument list (no shell, nothing read as an option), only
/// `http` and `https` are allowed, redirects stay on those, and the body is bounded.
struct CurlAgendaFetcher: AgendaFetcher {
    let curl: String
    let maxBytes = 16 << 20

    init(environment: [String: String]) {
        curl = environment["SITEKEEP_CURL"] ?? "/usr/bin/curl"
    }

    func fetch(url: String, ifNoneMatch etag: String?) async throws(AgendaError) -> AgendaFetchResult {
        guard url.hasPrefix("https://") || url.hasPrefix("http://"), url.utf8.count <= 2048,
              !url.utf8.contains(where: { $0 <= 0x20 || $0 == 0x7f }) else {
            throw .fetchFailed("\(url.prefix(80)) is not an http or https URL")
        }
        guard FileManager.default.isExecutableFile(atPath: curl) else { throw .fetchFailed("\(curl) is missing; install curl") }
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("sitekeep-fetch-\(UUID().uuidString)")
        do { try PrivateFolder.make(dir.path) } catch {
            throw .fetchFailed("cannot make a temporary folder")
        }
        defer { try? FileManager.default.removeItem(at: dir) }
        let body = dir.appendingPathComponent("body").path, headers = dir.appendingPathComponent("headers").path
        var args = ["--silent", "--show-error", "--location", "--proto", "=http,https", "--proto-redir", "=http,https",
                    "--max-time", "30", "--max-filesize", String(maxBytes), "--output", body, "--dump-header", headers,
                    "--write-out", "%{http_code}", "--header", "Accept: application/json"]
        if let etag, !etag.utf8.contains(where: { $0 < 0x20 || $0 == 0x7f }) { args += ["--header", "If-None-Match: \(etag)"] }
        args += ["--url", url]
        let (status, out) = Self.run(curl, args)
        guard status == 0 else { throw .fetchFailed("curl exited with \(status)\(out.isEmpty ? "" : ": " + out.prefix(200))") }
        let code = Int(out.trimmingCharacters(in: .whitespacesAndNewlines).suffix(3)) ?? 0
        switch code {
        case 304: return .notModified
        case 200:
            guard case .bytes(let bytes)? = try? FileIO.readRegularFile(body, limit: maxBytes) else { throw .fetchFailed("no body was received") }
            let head = (try? FileIO.readRegularFile(headers, limit: 1 << 20)).flatMap { r -> String? in
                if case .bytes(let b) = r { return String(decoding: b, as: UTF8.self) }
                return nil
            } ?? ""
            // The last response's headers (after redirects): its ETag, if any.
            let last = head.components(separatedBy: "\r\n\r\n").filter { !$0.isEmpty }.last ?? ""
            let tag = last.components(separatedBy: "\r\n").first { $0.lowercased().hasPrefix("etag:") }
                .map { String($0.dropFirst(5)).trimmingCharacters(in: .whitespaces) }
            return .fetched(body: [UInt8](bytes), etag: tag?.isEmpty == false ? tag : nil)
        default:
            throw .fetchFailed("the server answered HTTP \(code)")
        }
    }

    /// Runs `path` with `args` (no shell, a fixed environment, in this process's group so an
    /// interrupt reaches it too), standard output and error captured (at most 64 KiB).
    static func run(_ path: String, _ args: [String]) -> (Int32, String) {
        do {
            let (ended, out) = try ChildProcess.capture(path, arguments: args, environment: ["PATH=/usr/bin:/bin", "LC_ALL=C"],
                                                        streams: .both, ownProcessGroup: false)
            return (ended.status, String(decoding: out, as: UTF8.self))
        } catch {
            return (127, "cannot run \(path): \(error.cause)")
        }
    }
}
