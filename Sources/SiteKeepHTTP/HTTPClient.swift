// SiteKeep's one HTTP client: libcurl, loaded with dlopen on the first request (CCurlLoader).
//
// Why libcurl (issue 32): the vault remotes used URLSession (FoundationNetworking, in a dlopened
// Swift library) and the agenda fetch ran a `curl` child process; neither bounded an answer while
// reading it. URLSession hands over a body only once it is whole (an endless chunked answer grew
// `vault clone` past 1.5 GiB) and follows redirects with the request's headers (the access token
// and write key reached another origin); curl's --max-filesize holds only for a declared length.
// libcurl gives one client for both, a write callback that stops a body at its bound while it
// streams, no redirect unless asked, and the TLS stack every Debian already ships and tests. It
// is reached through dlopen so that no executable maps it and its ~30 libraries at start-up.
internal import SiteKeepSecureMemory
internal import CCurlLoader

/// One HTTP request.
public struct HTTPRequest: Sendable {
    /// `GET`, `POST`, `PUT` or `DELETE`.
    public var method: String
    /// An `https://` URL, or `http://` to a loopback host (127.0.0.1, localhost, [::1]); any
    /// other is refused before anything is sent.
    public var url: String
    /// Header fields (no CR, LF or other control characters). Credentials go in the secret
    /// header block of ``HTTPClient/send(_:secretHeaders:)`` instead.
    public var headers: [(String, String)]
    /// The body sent with `POST` and `PUT` (none with `GET`).
    public var body: [UInt8]
    /// The longest the exchange may stall (under 1 KiB/s), in milliseconds.
    public var timeoutMs: Int
    /// The longest the whole exchange may take, in milliseconds.
    public var totalTimeoutMs: Int
    /// The largest answer body accepted: the transfer is stopped as soon as more arrives, and
    /// the request fails with ``HTTPTransportError/Kind/tooLarge``.
    public var maxResponseBytes: Int
    /// A PEM file of certificate authorities to trust instead of the system's (tests and
    /// private vault servers); nil for the system's store.
    package var caFile: String?

    /// A request; the defaults stall out after 30 s, end after 10 minutes and accept 16 MiB of body.
    public init(method: String, url: String, headers: [(String, String)] = [], body: [UInt8] = [], timeoutMs: Int = 30_000,
                totalTimeoutMs: Int = 600_000, maxResponseBytes: Int = HTTPClient.defaultMaxResponseBytes) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
        self.timeoutMs = timeoutMs
        self.totalTimeoutMs = totalTimeoutMs
        self.maxResponseBytes = maxResponseBytes
    }
}

/// One HTTP answer. A redirect (3xx) is an answer like any other: it is never followed.
public struct HTTPResponse: Sendable {
    /// The status code.
    public let status: Int
    /// Header names lower-cased, values with surrounding spaces removed.
    public let headers: [(String, String)]
    /// The body (at most the request's ``HTTPRequest/maxResponseBytes``).
    public let body: [UInt8]
    /// The first value of the header `name` (lower-case).
    public func header(_ name: String) -> String? { headers.first { $0.0 == name }?.1 }

    /// An answer as given (tests and stand-ins; the client makes its own).
    public init(status: Int, headers: [(String, String)], body: [UInt8]) {
        self.status = status
        self.headers = headers
        self.body = body
    }
}

/// Why a request got no usable HTTP answer.
public struct HTTPTransportError: Error, Sendable, CustomStringConvertible {
    /// What kind of failure.
    public enum Kind: Sendable, Equatable {
        /// libcurl is missing or too old.
        case unavailable
        /// The URL (scheme, plain http to a non-loopback host, user information) or a header was
        /// refused before anything was sent.
        case refused
        /// The body passed ``HTTPRequest/maxResponseBytes``; reading stopped there.
        case tooLarge(limit: Int)
        /// The status line or headers passed their bounds.
        case headersTooLarge
        /// Connect, stall or total time-out.
        case timeout
        /// Refused connection, reset, DNS, TLS, a truncated answer.
        case network
    }

    /// What kind of failure.
    public let kind: Kind
    /// What went wrong, for a message: never a header's value.
    public let description: String

    /// An error of `kind` saying `description`.
    public init(kind: Kind, description: String) {
        self.kind = kind
        self.description = description
    }

    /// Whether trying again may help (time-outs and network failures).
    public var isTransient: Bool { kind == .timeout || kind == .network }
}

/// Header lines in guarded memory (`SecretBytes`): `Name: value` lines, each ending in NUL, for
/// credentials. libcurl reads them in place; the memory is wiped when the block is released.
public struct SecretHeaderBlock: ~Copyable {
    let bytes: SecretBytes
    let lineCount: Int

    /// Builds the block from `lines`, calling `write` once per line with a buffer of its length.
    ///
    /// - Parameter lines: each line's name and the byte count of its value.
    /// - Parameter value: writes line `i`'s value into the buffer it is given (exactly that many bytes).
    /// - Throws: ``HTTPTransportError/Kind/refused`` for a name or value with a control character.
    package init(lines: [(name: String, valueCount: Int)],
                 value: (Int, UnsafeMutableRawBufferPointer) throws(HTTPTransportError) -> Void) throws(HTTPTransportError) {
        var total = 0
        for l in lines {
            guard !l.name.isEmpty, l.name.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7f && $0 != UInt8(ascii: ":") }), l.valueCount > 0 else {
                throw HTTPTransportError(kind: .refused, description: "a credential header name is malformed")
            }
            total += l.name.utf8.count + 2 + l.valueCount + 1
        }
        bytes = try Self.fill(total: total, lines: lines, value: value)
        lineCount = lines.count
    }

    private static func fill(total: Int, lines: [(name: String, valueCount: Int)],
                             value: (Int, UnsafeMutableRawBufferPointer) throws(HTTPTransportError) -> Void) throws(HTTPTransportError) -> SecretBytes {
        var failure: HTTPTransportError?
        let made: SecretBytes
        do {
            made = try SecretBytes(count: max(total, 1)) { (buffer: UnsafeMutableRawBufferPointer) throws(CryptoError) in
                var at = 0
                for (i, l) in lines.enumerated() {
                    for b in l.name.utf8 { buffer[at] = b; at += 1 }
                    buffer[at] = UInt8(ascii: ":"); buffer[at + 1] = UInt8(ascii: " "); at += 2
                    let slice = UnsafeMutableRawBufferPointer(rebasing: buffer[at..<(at + l.valueCount)])
                    do throws(HTTPTransportError) { try value(i, slice) } catch { failure = error; return }
                    if slice.contains(where: { $0 < 0x20 || $0 == 0x7f }) {
                        failure = HTTPTransportError(kind: .refused, description: "the \(l.name) header holds a control character; refused")
                        return
                    }
                    at += l.valueCount
                    buffer[at] = 0; at += 1
                }
            }
        } catch {
            throw HTTPTransportError(kind: .unavailable, description: "no guarded memory for the credential headers (\(error))")
        }
        if let failure { throw failure }
        return made
    }
}

/// HTTP(S) through libcurl: no redirect followed, the body bounded while it streams, https or
/// loopback http checked on every request by libcurl's own URL parser, no proxy, time-outs.
///
/// Proxies: none is used, whatever `http_proxy`, `https_proxy` or `ALL_PROXY` say. The daemon
/// that sends the vault's token and write key inherits the environment of whoever started it;
/// a variable there must not route credentials through another host. SiteKeep has no proxy
/// setting yet (the `curl` child of the agenda fetch ran with an emptied environment, so it
/// used none either).
public enum HTTPClient {
    /// The body bound of a request that names none: 16 MiB.
    public static let defaultMaxResponseBytes = 16 << 20
    /// The bound on the status line and all header lines of an answer: 64 KiB.
    public static let maxHeaderBytes = 64 << 10

    /// libcurl's version text, or nil when it cannot be loaded (for `doctor`-style reports).
    public static var libraryVersion: String? {
        sk_http_library_version().map { String(cString: $0) }
    }

    /// Performs `request`; throws only when no usable HTTP answer came back.
    public static func send(_ request: HTTPRequest) throws(HTTPTransportError) -> HTTPResponse {
        try perform(request, secret: nil, secretLines: 0)
    }

    /// Performs `request` with the header lines of `secretHeaders` added, read from guarded
    /// memory in place (no Swift string holds them).
    public static func send(_ request: HTTPRequest, secretHeaders: borrowing SecretHeaderBlock) throws(HTTPTransportError) -> HTTPResponse {
        let count = secretHeaders.lineCount
        return try secretHeaders.bytes.withUnsafeBytes { (raw: UnsafeRawBufferPointer) throws(HTTPTransportError) -> HTTPResponse in
            try perform(request, secret: raw, secretLines: count)
        }
    }

    static func perform(_ request: HTTPRequest, secret: UnsafeRawBufferPointer?, secretLines: Int) throws(HTTPTransportError) -> HTTPResponse {
        guard request.maxResponseBytes > 0 else { throw HTTPTransportError(kind: .refused, description: "a request must accept some body bytes") }
        // The public header lines, NUL-separated in one buffer; the secret ones point into guarded memory.
        var plain: [UInt8] = []
        var offsets: [Int] = []
        for (name, value) in request.headers {
            guard !name.isEmpty, !(name + value).utf8.contains(where: { ($0 < 0x20 && $0 != 0x09) || $0 == 0x7f }) else {
                throw HTTPTransportError(kind: .refused, description: "the header \(String(name.prefix(40).unicodeScalars.filter { $0.value >= 0x20 }.map(Character.init))) holds a control character; refused")
            }
            offsets.append(plain.count)
            plain += Array(name.utf8) + [UInt8(ascii: ":"), UInt8(ascii: " ")] + Array(value.utf8) + [0]
        }
        var answer = sk_http_answer()
        defer { sk_http_answer_free(&answer) }
        let rc: Int32 = plain.withUnsafeBufferPointer { plainBytes in
            var lines: [UnsafePointer<CChar>?] = offsets.map { UnsafeRawPointer(plainBytes.baseAddress! + $0).assumingMemoryBound(to: CChar.self) }
            if let secret, secretLines > 0, let base = secret.baseAddress {
                var at = 0
                for _ in 0..<secretLines where at < secret.count {
                    lines.append((base + at).assumingMemoryBound(to: CChar.self))
                    while at < secret.count, secret[at] != 0 { at += 1 }
                    at += 1
                }
            }
            return request.method.withCString { method in
                request.url.withCString { url in
                    withOptionalCString(request.caFile) { ca in
                        request.body.withUnsafeBufferPointer { body in
                            lines.withUnsafeBufferPointer { lineBuffer in
                                var r = sk_http_request(
                                    method: method, url: url, headers: lineBuffer.baseAddress, header_count: lineBuffer.count,
                                    body: body.baseAddress, body_length: body.count,
                                    connect_timeout_ms: 10_000, idle_timeout_ms: request.timeoutMs, total_timeout_ms: request.totalTimeoutMs,
                                    max_body_bytes: request.maxResponseBytes, max_header_bytes: maxHeaderBytes, ca_file: ca)
                                return sk_http_perform(&r, &answer)
                            }
                        }
                    }
                }
            }
        }
        guard rc == 0 else {
            let message = withUnsafeBytes(of: answer.message) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            throw HTTPTransportError(kind: kind(rc, limit: request.maxResponseBytes), description: message)
        }
        var headers: [(String, String)] = []
        if let block = answer.header_block {
            let text = String(cString: block)
            for line in text.split(separator: "\n").dropFirst() {   // the first is the status line
                guard let colon = line.firstIndex(of: ":") else { continue }
                let name = line[..<colon].lowercased()
                let value = line[line.index(after: colon)...].trimmingCharacters(in: " \t")
                headers.append((name, value))
            }
        }
        let body = answer.body.map { Array(UnsafeBufferPointer(start: $0, count: answer.body_length)) } ?? []
        return HTTPResponse(status: Int(answer.status), headers: headers, body: body)
    }

    static func kind(_ rc: Int32, limit: Int) -> HTTPTransportError.Kind {
        switch Int(rc) {
        case Int(SK_HTTP_UNAVAILABLE): .unavailable
        case Int(SK_HTTP_REFUSED): .refused
        case Int(SK_HTTP_TOO_LARGE): .tooLarge(limit: limit)
        case Int(SK_HTTP_HEADERS_TOO_LARGE): .headersTooLarge
        case Int(SK_HTTP_TIMEOUT): .timeout
        default: .network
        }
    }

    /// Whether `url` is one this client sends to: `https://`, or `http://` to a loopback host.
    /// A quick check for configuration time (a remote being added); every request is checked
    /// again, by libcurl's own parser, before anything is sent.
    public static func isAllowedURL(_ url: String) -> Bool {
        let lower = url.lowercased()
        if lower.hasPrefix("https://") { return authority(of: url) != nil }
        guard lower.hasPrefix("http://"), let host = authority(of: url) else { return false }
        return host == "127.0.0.1" || host == "localhost" || host == "[::1]"
    }

    /// The host of an http(s) URL, nil when it carries user information or none.
    static func authority(of url: String) -> String? {
        let bytes = Array(url.utf8)
        guard let at = (0..<max(0, bytes.count - 2)).first(where: { bytes[$0] == 0x3a && bytes[$0 + 1] == 0x2f && bytes[$0 + 2] == 0x2f }) else { return nil }
        let rest = Substring(String(decoding: bytes[(at + 3)...], as: UTF8.self))
        let auth = rest.prefix { $0 != "/" && $0 != "?" && $0 != "#" }
        guard !auth.isEmpty, !auth.contains("@"), !auth.contains("\\") else { return nil }
        if auth.hasPrefix("[") {
            guard let close = auth.firstIndex(of: "]") else { return nil }
            return String(auth[...close]).lowercased()
        }
        return String(auth.prefix { $0 != ":" }).lowercased()
    }

    /// `%XX`-encodes everything but unreserved characters (`/` too: sgit's `quote(fid, safe='')`).
    public static func percentEncode(_ s: String) -> String {
        var out = ""
        for b in s.utf8 {
            if (0x30...0x39).contains(b) || (0x41...0x5a).contains(b) || (0x61...0x7a).contains(b) || b == 0x2d || b == 0x2e || b == 0x5f || b == 0x7e {
                out.unicodeScalars.append(Unicode.Scalar(b))
            } else {
                out += "%" + String(b, radix: 16, uppercase: true).leftPad(2)
            }
        }
        return out
    }
}

private func withOptionalCString<R>(_ s: String?, _ body: (UnsafePointer<CChar>?) -> R) -> R {
    guard let s else { return body(nil) }
    return s.withCString { body($0) }
}

extension Substring {
    func trimmingCharacters(in set: String) -> String {
        var s = self
        while let f = s.first, set.contains(f) { s.removeFirst() }
        while let l = s.last, set.contains(l) { s.removeLast() }
        return String(s)
    }
}

extension String {
    func leftPad(_ n: Int) -> String { count >= n ? self : String(repeating: "0", count: n - count) + self }
}
