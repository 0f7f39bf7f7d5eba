import Foundation
import Testing
import SiteKeepCrypto
import SiteKeepCustody
import SiteKeepJSON
import SiteKeepVault
@testable import SiteKeepVaultRemotes

/// Issue 48, must show: the web client's own append transport (SGAppend of sg-append.js, web
/// vault UI v0.2.3, run unmodified under Node by tools/web-append from the installed package)
/// and SiteKeep's lane client on one lane of the real vault server. The web client configures
/// the lane with its own enumeration key (SGAppend.deriveEnumKey of its own read key), so
/// SiteKeep listing it at all shows the two derivations agree.
@Suite("Append lanes with the web client's SGAppend", .serialized, .enabled(if: !VaultServer.skip, "SITEKEEP_SKIP_INTEROP=1"))
struct AppendLaneWebClientTests {
    static let tool = VaultServer.packageRoot + "/tools/web-append"

    struct Web {
        let dir: Scratch
        let url: String
        func run(_ args: [String]) throws -> JSONValue {
            let p = Process()
            p.executableURL = URL(fileURLWithPath: AppendLaneWebClientTests.tool)
            p.arguments = [args[0], "--server", url, "--token-file", dir.path + "/token"] + args.dropFirst()
            let out = Pipe(), err = Pipe()
            p.standardOutput = out
            p.standardError = err
            try p.run()
            let o = out.fileHandleForReading.readDataToEndOfFile(), e = err.fileHandleForReading.readDataToEndOfFile()
            p.waitUntilExit()
            guard p.terminationStatus == 0 else { throw SetupFailure(description: "web-append \(args[0]) failed: \(String(decoding: e, as: UTF8.self))") }
            return try JSONParser.parse(Array(o))
        }
        /// The ids SGAppend.list answers (pending only).
        func pending() throws -> [String] {
            try run(["list", "--key-file", dir.path + "/key"])["entries"]?.arrayValue?.compactMap { $0["file_id"]?.stringValue } ?? []
        }
    }

    @Test func messagesFlowBothWaysAndMarksAgree() throws {
        let dir = try Scratch("web-append")
        let keyText = "web append phrase \(UUID().uuidString):\(VaultServer.freshVaultID())"
        let k = try AppendLaneTests.serverVault(keyText: keyText)
        try dir.write("key", keyText)
        try dir.write("token", try VaultServer.token())
        let t = AppendLaneTests.freshToken()
        try dir.write("append-token", t)
        let web = Web(dir: dir, url: try VaultServer.url())

        // The web client opens the lane: its anchors, its enumeration key's hash.
        #expect(try web.run(["configure", "--key-file", dir.path + "/key", "--anchor", AppendLane.anchor(of: t)])["status"]?.stringValue == "configured")

        // SGAppend.write → SiteKeep lists, fetches and marks it.
        let fromWeb = Array(#"{"type":"note","title":"from the web client","body":"hello"}"#.utf8)
        try Data(fromWeb).write(to: URL(fileURLWithPath: dir.path + "/payload"))
        #expect(try web.run(["write", "--vault", k.vaultID, "--append-token-file", dir.path + "/append-token", "--payload-file", dir.path + "/payload"])["ok"]?.boolValue == true)
        let lane = try AppendLaneTests.owner(k)
        let listed = try lane.listAll()
        #expect(listed.count == 1 && listed.first?.inbox == t)
        let id = try #require(listed.first?.id)
        #expect(try lane.fetch(inbox: t, ids: [id]).messages.first?.bytes == fromWeb)
        #expect(try lane.markProcessed(inbox: t, ids: [id]).moved == [id])
        #expect(try web.pending().isEmpty, "SGAppend.list no longer shows what SiteKeep marked")

        // SiteKeep writes with the token alone → SGAppend.list shows it; after SiteKeep marks
        // it, SGAppend.list agrees it is processed.
        try AppendLaneTests.agent(k.vaultID).write(appendToken: t, payload: Array("from SiteKeep".utf8))
        let seen = try web.pending()
        #expect(seen.count == 1)
        let mine = try lane.listAll().map(\.id)
        #expect(mine == seen)
        _ = try lane.markProcessed(inbox: t, ids: mine)
        #expect(try web.pending().isEmpty)
    }
}
