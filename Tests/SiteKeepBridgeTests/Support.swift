import Testing
import Foundation
import Synchronization
import SiteKeepJSON
import SiteKeepCrypto
import SiteKeepCustody
@testable import SiteKeepBridge
@testable import SiteKeepWiring
import SiteKeepTestSupport

/// Test keys with known bytes, so every reply can be scanned for them.
enum TestKeys {
    static let ed25519Seed: [UInt8] = (0..<32).map { UInt8(truncatingIfNeeded: 0x40 + $0 * 7) }
    /// A P-256 key (PKCS#8 DER, made with openssl for these tests only).
    static let p256PKCS8 = try! Hex.decode("308187020100301306072a8648ce3d020106082a8648ce3d030107046d306b02010104207d2629d35ae04efff916e0cb2fc0b66e5ee196113afe63de3a0e273f99f15ab6a14403420004b87289e845db77fa01123fca5278c17be8b0b71976c9fa822dfa626aef91ba70f8c0c8f481ec08918ed78369fc199797e47baeee800af3648feb931ed6a8a004")
    static let p256Scalar = try! Hex.decode("7d2629d35ae04efff916e0cb2fc0b66e5ee196113afe63de3a0e273f99f15ab6")
    static let sealKeyBytes: [UInt8] = (0..<32).map { UInt8(truncatingIfNeeded: 0x91 + $0 * 3) }

    static func ed25519() throws -> SigningKeyHandle {
        SigningKeyHandle(ed25519: try Ed25519.PrivateKey(seed: SecretBytes(copying: ed25519Seed)))
    }
    static func p256() throws -> SigningKeyHandle {
        SigningKeyHandle(p256: try P256.Signing.PrivateKey(pkcs8: SecretBytes(copying: p256PKCS8)))
    }
    static func sealKey() throws -> SymmetricKeyHandle {
        try SymmetricKeyHandle(taking: SecretBytes(copying: sealKeyBytes))
    }

    /// Every secret the tests hold: a reply containing any of them, in any encoding, is a leak.
    static let secrets: [[UInt8]] = [ed25519Seed, p256Scalar, p256PKCS8, sealKeyBytes]

    /// The textual forms a secret could take in a reply: hex (both cases), Base64 and Base64url at
    /// every byte alignment (the characters that depend on the secret's bytes only).
    static let needles: [[UInt8]] = {
        var out: [[UInt8]] = []
        for s in secrets {
            out.append(s)
            out.append(Array(Hex.encode(s).utf8))
            out.append(Array(Hex.encode(s).uppercased().utf8))
            for k in 0..<3 {
                let enc = Array(Base64.encode([UInt8](repeating: 0, count: k) + s, variant: .standard).utf8)
                let first = (8 * k + 5) / 6, last = (8 * (k + s.count)) / 6
                let core = Array(enc[first..<last])
                out.append(core)
                out.append(core.map { $0 == UInt8(ascii: "+") ? UInt8(ascii: "-") : $0 == UInt8(ascii: "/") ? UInt8(ascii: "_") : $0 })
            }
        }
        return out
    }()

    static func leaks(in bytes: [UInt8]) -> Bool {
        needles.contains { n in
            guard bytes.count >= n.count else { return false }
            return (0...(bytes.count - n.count)).contains { i in bytes[i..<(i + n.count)].elementsEqual(n) }
        }
    }
}

/// Every reply a test sees passes through here: counted, and scanned for key material.
enum ReplyScan {
    static let scanned = Atomic<Int>(0)
    static func check(_ bytes: [UInt8], sourceLocation: SourceLocation = #_sourceLocation) {
        scanned.add(1, ordering: .relaxed)
        #expect(!TestKeys.leaks(in: bytes), "a reply contains test key material", sourceLocation: sourceLocation)
    }
}

/// An in-process bridge with every service, the test keys and the sealing key.
struct Bed {
    let dispatcher: BridgeDispatcher
    let presence: InMemoryPresence
    let audit: InMemoryAuditSink
    let sealed: TeamSealedContent
    let vault: InMemoryVault

    init(presence: InMemoryPresence = InMemoryPresence(), catalogue: OpCatalogue? = nil, withVault: Bool = true,
         withSealed: Bool = true) throws {
        let audit = InMemoryAuditSink()
        let signing = HandleSigningService(keys: ["team-ed": try TestKeys.ed25519(), "team-p256": try TestKeys.p256()], audit: audit,
                                           presence: presence)
        let sealed = TeamSealedContent(teamID: "team-nr", key: try TestKeys.sealKey()) { site throws(BridgeFailure) in
            _ = try presence.proof(for: site, op: "sealed.open", keyID: nil)
        }
        let vault = InMemoryVault()
        dispatcher = try BridgeDispatcher(catalogue: catalogue ?? .bundled(), sites: InMemoryBridge.resolver,
                                          modules: InMemoryBridge.modules(signing: signing, sealed: withSealed ? sealed : nil,
                                                                          vault: withVault ? vault : nil))
        self.presence = presence
        self.audit = audit
        self.sealed = sealed
        self.vault = vault
    }

    /// A connection bound to `site` by a successful hello.
    func connect(_ site: BridgeSite, events: (@Sendable ([UInt8]) -> Void)? = nil) async throws -> BridgeConnection {
        let c = BridgeConnection(onEvent: events ?? { _ in })
        let r = await send(c, op: "hello", args: ["origin": .string(site.origins[0])])
        guard case .success = r else { throw BridgeError.reply(BridgeFailure(.internal, "hello failed: \(r)")) }
        return c
    }

    func send(_ c: BridgeConnection, op: String, args: JSONValue = .object([]), origin: String? = nil) async -> BridgeMessage {
        await sendFrame(c, JSONSerializer.bytes(BridgeRequest(id: "t1", op: op, args: args, origin: origin).json))
    }

    func sendFrame(_ c: BridgeConnection, _ frame: [UInt8]) async -> BridgeMessage {
        let bytes = await dispatcher.handle(frame, connection: c)
        ReplyScan.check(bytes)
        return (try? BridgeMessage.parse(bytes)) ?? .failure(id: .null, BridgeFailure(.internal, "unparseable reply"))
    }
}

func code(_ m: BridgeMessage) -> BridgeErrorCode? {
    if case .failure(_, let f) = m { return f.code }
    return nil
}

func result(_ m: BridgeMessage) -> JSONValue? {
    if case .success(_, let r) = m { return r }
    return nil
}

/// A fresh private temp folder (short, for socket paths).
func tempDir() throws -> String {
    let path = "/tmp/skb-\(UInt32.random(in: 0...UInt32.max))"
    try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: false,
                                            attributes: [.posixPermissions: 0o700])
    return path
}

/// Args that make each op succeed against ``Bed`` (beyond the schema's own samples).
func workingArgs(_ op: String, bed: Bed) throws -> JSONValue {
    switch op {
    case "key.sign": return ["key": "team-ed", "data": .string(Base64.encode(Array("hello".utf8)))]
    case "sealed.open": return ["envelope": .string(try bed.sealed.seal(Array("sealed note".utf8)))]
    case "vault.load": return ["path": "notes/a.md"]
    case "vault.list": return ["path": "notes"]
    case "hello": return ["origin": "https://promptugal.news"]
    case "schedule.set": return ["v": 1, "picks": [["id": "ps26-cs-24-1000", "at": 1_793_000_000_000]]]
    case "workflow.show", "workflow.run", "workflow.next": return ["name": "morning"]
    case "inbox.list": return ["vault": "notes"]
    case "inbox.mark": return ["paths": ["inbox/briefs/today.md"], "ids": [.string(InMemoryLanes.notesIDs[0])]]
    default: return bed.dispatcher.catalogue[op]?.args.sample() ?? .object([])
    }
}

/// A site on `op`'s allow-list.
func allowedSite(_ op: String, _ d: BridgeDispatcher) -> BridgeSite? {
    InMemoryBridge.sites.first { $0.isAppBound && d.isAllowed(op, site: $0) }
}
