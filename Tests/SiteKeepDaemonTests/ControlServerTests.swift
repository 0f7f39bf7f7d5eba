import Testing
import Foundation
import Glibc
import Synchronization
import SiteKeepJSON
import SiteKeepSocket
import SiteKeepBridgeProtocol
import SiteKeepDaemon

@Suite struct ControlServerTests {
    /// The control socket refuses malformed headers, unknown fields, oversized secrets and
    /// requests for another store before the handler runs, and hands a well-formed secret over
    /// exactly.
    @Test func badRequestsAreRefusedAndSecretsArriveExactly() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("sk-control-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let seen = Mutex<[String]>([])
        let sessions = Mutex<[String]>([])
        let server = try ControlServer(path: dir + "/control.sock", storeID: "store-a", storeLabel: "/home/a", handler: { request, secret in
            seen.withLock { $0.append("\(request.op) \(request.method ?? "-") \(secret.map { Array($0) } ?? [])") }
            return ["ok": true]
        }, session: { request, connection in
            sessions.withLock { $0.append(request.header["argv"]?.arrayValue?.first?.stringValue ?? "?") }
            _ = ControlFrame.send(connection.fd, ControlFrame(.exit, ControlFrame.number(7)))
        })
        server.start()
        defer { server.shutdown() }
        let path = dir + "/control.sock"
        #expect(try ControlClient.send(path: path, store: nil, op: "status")?["ok"] == .bool(true))
        #expect(try ControlClient.send(path: path, store: "store-a", op: "status")?["ok"] == .bool(true))
        let secret: [UInt8] = [1, 2, 3, 0, 255]
        _ = try secret.withUnsafeBytes { try ControlClient.send(path: path, store: "store-a", op: "unlock", method: "prf", secret: $0) }
        #expect(seen.withLock { $0 } == ["status - []", "status - []", "unlock prf [1, 2, 3, 0, 255]"])

        // Another store's secret never reaches this daemon's handler; unlock must name its store.
        let other = try secret.withUnsafeBytes { try ControlClient.send(path: path, store: "store-b", op: "unlock", method: "prf", secret: $0) }
        #expect(other?["code"] == .string("wrong_store"))
        #expect(other?["error"]?.stringValue?.contains("/home/a") == true)
        let unnamed = try secret.withUnsafeBytes { try ControlClient.send(path: path, store: nil, op: "unlock", method: "prf", secret: $0) }
        #expect(unnamed?["code"] == .string("bad_request"))
        #expect(try ControlClient.send(path: path, store: "store-b", op: "lock")?["code"] == .string("wrong_store"))

        // A run session goes to the session handler, which speaks frames.
        let fd = try #require(try ControlClient.connect(path: path))
        defer { close(fd) }
        #expect(UnixSocket.writeAll(fd, ControlClient.header(op: "run", store: "store-a", extra: [JSONMember(key: "argv", value: .array(["vault"]))])))
        let exit = try #require(ControlFrame.receive(fd))
        #expect(exit.kind == .exit && exit.number == 7)
        #expect(sessions.withLock { $0 } == ["vault"])

        // Raw frames: not JSON, an unknown field, a secret above the limit (64 KiB, the CLI's).
        let tooLong = ControlWire.maximumSecretLength + 1
        for header in ["not json", #"{"op":"status","extra":1}"#, #"{"op":"unlock","store":"store-a","method":"prf","length":\#(tooLong)}"#] {
            let fd = try UnixSocket.connectUnchecked(path: path)
            defer { close(fd) }
            _ = UnixSocket.writeAll(fd, Array((header + "\n").utf8))
            var reply = [UInt8](repeating: 0, count: 256)
            let n = recv(fd, &reply, reply.count, 0)
            #expect(n > 0 && String(decoding: reply.prefix(max(n, 0)), as: UTF8.self).contains("bad_request"), "\(header)")
        }
        #expect(seen.withLock { $0.count } == 3, "a refused request reached the handler")
    }
}
