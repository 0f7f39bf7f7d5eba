import SiteKeepAgent
import SiteKeepWiring
import SiteKeepCustody

/// A key source with one fixed Ed25519 identity whose "signature" is a fixed blob: the fuzzer
/// exercises the protocol (framing, decoding, classification, session binding), not custody.
struct FixedKeys: AgentKeySource {
    var cryptography: any SSHCryptography { CryptoSSHCryptography() }
    static let key = SSHPublicKey.ed25519([UInt8](repeating: 0x2a, count: 32))
    static let identity = AgentIdentity(keyID: "fuzz", name: "Fuzz", version: 1, algorithm: .ed25519, publicKey: key,
                                        policy: SSHAgentPolicy(namespaces: ["git"]))
    static let signature: [UInt8] = (try? SSHSignatureBlob.make(algorithm: .ed25519, raw: [UInt8](repeating: 7, count: 64))) ?? []
    func identities() -> [AgentIdentity] { [Self.identity] }
    /// Signs whatever reaches it: the SSH policy is custody's gate's (`Custodian+Gate.swift`),
    /// which the fuzzer does not stand in for.
    func sign(_ request: AgentSignRequest) throws(AgentRefusal) -> [UInt8] {
        Self.signature
    }
}

/// libFuzzer entry point. The input is an agent byte stream (uint32-length-prefixed messages),
/// fed in two chunks cut where the first byte says, to one connection's ``AgentSession``. Every
/// message must get exactly one reply of a type the protocol allows for it; a signature only for
/// the one offered key; a length over 256 KiB must end the stream. Each message is also handed
/// to the key, SSHSIG and login parsers, whose successful parses must re-encode to the input.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzAgent(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    guard let data, size > 0 else { return 0 }
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    let session = AgentSession(keys: FixedKeys(), peer: AgentPeer(pid: 1, uid: 0, command: "fuzz"))
    var reader = AgentFrameReader()
    let cut = min(Int(bytes[0]), bytes.count - 1)
    var events: [AgentFrameReader.Event] = []
    for part in [bytes[1..<(1 + cut)], bytes[(1 + cut)...]] {
        events += Array(part).withUnsafeBytes { reader.feed($0) }
    }
    var sawTooLong = false
    for event in events.prefix(64) {
        guard case .message(let payload) = event else {
            if sawTooLong { trap("a second event after a length over the limit") }
            sawTooLong = true
            continue
        }
        if sawTooLong { trap("a message after a length over the limit") }
        check(session.reply(to: payload).payload, for: payload)
        parsers(payload)
    }
    return 0
}

/// The reply must be one the request type allows.
func check(_ reply: [UInt8], for request: [UInt8]) {
    guard let type = reply.first else { trap("an empty reply") }
    switch type {
    case 5: break                                           // failure: allowed for anything
    case 6:
        // Success: to an extension, and to protocol 1's remove-all (there are none to remove,
        // as OpenSSH answers); the fixed keys refuse ssh-add's add and remove.
        if request.first != 27 && request.first != 9 { trap("success to something that is not an extension or protocol 1's remove-all") }
    case 12:
        if request != [11] { trap("identities to something else") }
        if reply != AgentReply.identities([(FixedKeys.key.blob, FixedKeys.identity.comment)]).payload { trap("wrong identities") }
    case 14:
        guard request.first == 13, case .sign(let blob, _, _)? = try? AgentRequest.decode(request), blob == FixedKeys.key.blob else {
            trap("a signature for something that is not a sign request for the offered key")
        }
    case 28, 29: if request.first != 27 { trap("an extension reply to something else") }
    default: trap("a reply type the agent never sends")
    }
}

/// The parsers an agent runs on request contents, fed the payload directly.
func parsers(_ payload: [UInt8]) {
    if let key = try? SSHPublicKey(blob: payload), key.blob != payload { trap("a key blob that does not re-encode to itself") }
    _ = try? SSHPublicKey(blob: payload, acceptingCertificates: true)
    if let sig = try? SSHSIG.Signature(blob: payload) {
        let again = SSHSIG.blob(publicKey: sig.publicKey.blob, namespace: sig.namespace, hash: sig.hash, signature: sig.signature)
        if (try? SSHSIG.Signature(blob: again)) != sig { trap("an SSHSIG that does not round-trip") }
    }
    _ = try? SSHSIG.SignedData(parsing: payload)
    _ = SSHUserAuthRequest(parsing: payload)
    var bindings = SessionBindings()
    try? bindings.bind(payload)
}

func trap(_ why: StaticString) -> Never {
    fatalError("FuzzAgent invariant broken: \(why)")
}
