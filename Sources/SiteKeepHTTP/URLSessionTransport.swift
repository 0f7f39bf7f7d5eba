// libSiteKeepHTTP.so: HTTP(S) through FoundationNetworking's URLSession (libcurl), behind a
// two-function C ABI. SiteKeep's remotes load it with dlopen on first use, so no SiteKeep
// executable links FoundationNetworking, libcurl and their TLS and GSSAPI stacks at start-up
// (measured: they double the start-up of a Foundation program; the CLI's `vault cat` through
// the daemon must stay lean). This target depends on nothing of SiteKeep's.
//
// Request:  u32 LE length of a JSON header || header || body
//           header = {"method": "GET", "url": "...", "headers": [["k", "v"], ...], "timeout_ms": 30000}
// Response: u32 LE status (0: no HTTP answer) || u32 LE length of a JSON header || header || body
//           header = {"headers": [["k", "v"], ...], "error": "..." (only without an answer)}
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

private let session: URLSession = {
    let config = URLSessionConfiguration.ephemeral
    config.httpMaximumConnectionsPerHost = 6
    config.requestCachePolicy = .reloadIgnoringLocalCacheData
    config.urlCache = nil
    config.httpCookieStorage = nil
    config.httpShouldSetCookies = false
    return URLSession(configuration: config)
}()

private func u32(_ v: Int) -> [UInt8] { (0..<4).map { UInt8((v >> (8 * $0)) & 0xff) } }

private func readU32(_ p: UnsafeBufferPointer<UInt8>, _ at: Int) -> Int {
    (0..<4).reduce(0) { $0 | Int(p[at + $1]) << (8 * $1) }
}

private final class Box: @unchecked Sendable {
    var data: Data?
    var response: HTTPURLResponse?
    var error: String?
}

private func answer(status: Int, headers: [[String]], error: String?, body: Data?) -> [UInt8] {
    var h: [String: Any] = ["headers": headers]
    if let error { h["error"] = error }
    let header = (try? JSONSerialization.data(withJSONObject: h)) ?? Data("{}".utf8)
    return u32(status) + u32(header.count) + [UInt8](header) + [UInt8](body ?? Data())
}

private func perform(_ request: UnsafeBufferPointer<UInt8>) -> [UInt8] {
    guard request.count >= 4 else { return answer(status: 0, headers: [], error: "malformed request", body: nil) }
    let hlen = readU32(request, 0)
    guard hlen <= request.count - 4,
          let header = try? JSONSerialization.jsonObject(with: Data(request[4..<(4 + hlen)])) as? [String: Any],
          let method = header["method"] as? String, let urlText = header["url"] as? String, let url = URL(string: urlText) else {
        return answer(status: 0, headers: [], error: "malformed request", body: nil)
    }
    var req = URLRequest(url: url)
    req.httpMethod = method
    req.timeoutInterval = Double((header["timeout_ms"] as? Int) ?? 30_000) / 1000
    for pair in (header["headers"] as? [[String]]) ?? [] where pair.count == 2 {
        req.setValue(pair[1], forHTTPHeaderField: pair[0])
    }
    let body = Data(request[(4 + hlen)...])
    if !body.isEmpty || method == "PUT" || method == "POST" { req.httpBody = body }
    let box = Box()
    let done = DispatchSemaphore(value: 0)
    session.dataTask(with: req) { data, response, error in
        box.data = data
        box.response = response as? HTTPURLResponse
        box.error = error.map { "\($0.localizedDescription)" }
        done.signal()
    }.resume()
    done.wait()
    guard let response = box.response else {
        return answer(status: 0, headers: [], error: box.error ?? "no answer", body: nil)
    }
    let headers = response.allHeaderFields.compactMap { k, v -> [String]? in
        guard let k = k as? String, let v = v as? String else { return nil }
        return [k.lowercased(), v]
    }
    return answer(status: response.statusCode, headers: headers, error: nil, body: box.data)
}

/// Performs one HTTP request (see the file comment for the framing). The answer is allocated
/// with malloc; release it with `sitekeep_http_free`.
@_cdecl("sitekeep_http_perform")
public func sitekeep_http_perform(_ request: UnsafePointer<UInt8>?, _ length: Int,
                                  _ out: UnsafeMutablePointer<UnsafeMutablePointer<UInt8>?>?,
                                  _ outLength: UnsafeMutablePointer<Int>?) -> Int32 {
    guard let request, let out, let outLength else { return -1 }
    let reply = perform(UnsafeBufferPointer(start: request, count: length))
    guard let mem = malloc(max(reply.count, 1))?.assumingMemoryBound(to: UInt8.self) else { return -1 }
    reply.withUnsafeBufferPointer { mem.update(from: $0.baseAddress!, count: reply.count) }
    out.pointee = mem
    outLength.pointee = reply.count
    return 0
}

/// Releases an answer of `sitekeep_http_perform`.
@_cdecl("sitekeep_http_free")
public func sitekeep_http_free(_ p: UnsafeMutablePointer<UInt8>?) { free(p) }
