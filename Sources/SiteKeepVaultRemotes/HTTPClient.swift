public import SiteKeepVault
import SiteKeepJSON
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// One HTTP request.
public struct HTTPRequest: Sendable {
    public var method: String
    public var url: String
    public var headers: [(String, String)]
    public var body: [UInt8]
    public var timeoutMs: Int
    public init(method: String, url: String, headers: [(String, String)] = [], body: [UInt8] = [], timeoutMs: Int = 30_000) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
        self.timeoutMs = timeoutMs
    }
}

/// One HTTP answer.
public struct HTTPResponse: Sendable {
    /// The status code.
    public let status: Int
    /// Header names lower-cased.
    public let headers: [(String, String)]
    public let body: [UInt8]
    public func header(_ name: String) -> String? { headers.first { $0.0 == name }?.1 }
}

/// Why a request got no HTTP answer (connection refused, reset, timeout, bad URL).
public struct HTTPTransportError: Error, Sendable, CustomStringConvertible {
    public let description: String
}

/// HTTP through `libSiteKeepHTTP.so` (URLSession, libcurl), loaded with dlopen on first use:
/// a program that never talks to a remote never maps FoundationNetworking or libcurl.
///
/// The library is looked for at `$SITEKEEP_HTTP_LIBRARY`, beside the running executable, and in
/// `../lib/sitekeep/` from it.
public enum HTTPClient {
    typealias Perform = @convention(c) (UnsafePointer<UInt8>?, Int, UnsafeMutablePointer<UnsafeMutablePointer<UInt8>?>?, UnsafeMutablePointer<Int>?) -> Int32
    typealias Free = @convention(c) (UnsafeMutablePointer<UInt8>?) -> Void

    struct Loaded: @unchecked Sendable {
        let perform: Perform
        let free: Free
    }

    private static let loaded = Mutex<Result<Loaded, HTTPTransportError>?>(nil)

    static func candidates() -> [String] {
        var out: [String] = []
        if let env = getenv("SITEKEEP_HTTP_LIBRARY") { out.append(String(cString: env)) }
        var buf = [CChar](repeating: 0, count: 4096)
        let n = readlink("/proc/self/exe", &buf, buf.count - 1)
        if n > 0 {
            let exe = String(decoding: buf[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
            let dir = exe.split(separator: "/", omittingEmptySubsequences: false).dropLast().joined(separator: "/")
            out.append(dir + "/libSiteKeepHTTP.so")
            out.append(dir + "/../lib/sitekeep/libSiteKeepHTTP.so")
        }
        return out
    }

    static func load() throws(HTTPTransportError) -> Loaded {
        let result = loaded.withLock { state -> Result<Loaded, HTTPTransportError> in
            if let state { return state }
            var tried: [String] = []
            for path in candidates() {
                guard let handle = dlopen(path, RTLD_NOW | RTLD_LOCAL) else {
                    // A file that is there but does not load (a missing dependency, an undefined
                    // symbol) says why: "not found" sent people looking for a file they had.
                    let why = dlerror().map { String(cString: $0) } ?? ""
                    tried.append(access(path, F_OK) == 0 ? path + " (present but not loadable: " + why + ")" : path)
                    continue
                }
                guard let p = dlsym(handle, "sitekeep_http_perform"), let f = dlsym(handle, "sitekeep_http_free") else {
                    tried.append(path + " (no sitekeep_http_perform)")
                    continue
                }
                let r = Result<Loaded, HTTPTransportError>.success(Loaded(perform: unsafeBitCast(p, to: Perform.self), free: unsafeBitCast(f, to: Free.self)))
                state = r
                return r
            }
            let r = Result<Loaded, HTTPTransportError>.failure(HTTPTransportError(
                description: "the HTTP library libSiteKeepHTTP.so was not found or did not load (looked at \(tried.joined(separator: ", "))); reinstall SiteKeep or set SITEKEEP_HTTP_LIBRARY"))
            state = r
            return r
        }
        return try result.get()
    }

    /// Performs `request`; throws only when no HTTP answer came back.
    public static func send(_ request: HTTPRequest) throws(HTTPTransportError) -> HTTPResponse {
        let lib = try load()
        let header = JSONSerializer.bytes(.object([
            JSONMember(key: "method", value: .string(request.method)),
            JSONMember(key: "url", value: .string(request.url)),
            JSONMember(key: "headers", value: .array(request.headers.map { .array([.string($0.0), .string($0.1)]) })),
            JSONMember(key: "timeout_ms", value: .integer(request.timeoutMs)),
        ]))
        var frame = le32(header.count) + header + request.body
        defer { for i in frame.indices { frame[i] = 0 } }   // headers carry the token and write key
        var out: UnsafeMutablePointer<UInt8>? = nil
        var outLength = 0
        let rc = frame.withUnsafeBufferPointer { lib.perform($0.baseAddress, $0.count, &out, &outLength) }
        guard rc == 0, let out else { throw HTTPTransportError(description: "the HTTP library refused the request") }
        defer { lib.free(out) }
        let answer = UnsafeBufferPointer(start: out, count: outLength)
        guard outLength >= 8 else { throw HTTPTransportError(description: "the HTTP library answered nothing") }
        let status = readLE32(answer, 0), hlen = readLE32(answer, 4)
        guard hlen <= outLength - 8, let meta = try? JSONParser.parse(Array(answer[8..<(8 + hlen)])) else {
            throw HTTPTransportError(description: "the HTTP library answered a malformed frame")
        }
        if status == 0 { throw HTTPTransportError(description: meta["error"]?.stringValue ?? "no answer") }
        let headers = (meta["headers"]?.arrayValue ?? []).compactMap { pair -> (String, String)? in
            guard let a = pair.arrayValue, a.count == 2, let k = a[0].stringValue, let v = a[1].stringValue else { return nil }
            return (k, v)
        }
        return HTTPResponse(status: status, headers: headers, body: Array(answer[(8 + hlen)...]))
    }

    static func le32(_ v: Int) -> [UInt8] { (0..<4).map { UInt8((v >> (8 * $0)) & 0xff) } }
    static func readLE32(_ p: UnsafeBufferPointer<UInt8>, _ at: Int) -> Int { (0..<4).reduce(0) { $0 | Int(p[at + $1]) << (8 * $1) } }

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

extension String {
    func leftPad(_ n: Int) -> String { count >= n ? self : String(repeating: "0", count: n - count) + self }
}
