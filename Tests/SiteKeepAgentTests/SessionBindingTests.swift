import Foundation
import Testing
@testable import SiteKeepAgent
import SiteKeepWiring
import SiteKeepCrypto
import SiteKeepTestSupport

/// `session-bind@openssh.com` checked as OpenSSH's agent checks it.
@Suite struct SessionBindingTests {
    let sid = Array(repeating: UInt8(0x42), count: 32)

    @Test func aValidBindIsRecordedAndNamesTheDestination() throws {
        let host = try Ed25519.PrivateKey()
        var b = SessionBindings()
        try b.bind(bindContents(host: host, sessionID: sid))
        #expect(b.bindings.count == 1 && !b.bindFailed)
        let user = SSHPublicKey.ed25519([UInt8](repeating: 1, count: 32))
        let request = try #require(SSHUserAuthRequest(parsing: userAuthData(sessionID: sid, key: user)))
        let d = try b.destination(of: request)
        #expect(d.hostKeyFingerprint == SSHPublicKey.ed25519(host.publicKey.rawRepresentation).fingerprint)
        #expect(!d.isForwarded)
        #expect(d.text.hasSuffix(", directly"))
        // The host-bound form must name the bound host key.
        let hostKey = SSHPublicKey.ed25519(host.publicKey.rawRepresentation)
        #expect(try b.destination(of: #require(SSHUserAuthRequest(parsing: userAuthData(sessionID: sid, key: user, hostKey: hostKey)))) == d)
        let other = SSHPublicKey.ed25519([UInt8](repeating: 9, count: 32))
        #expect(throws: AgentRefusal.self) { try b.destination(of: #require(SSHUserAuthRequest(parsing: userAuthData(sessionID: sid, key: user, hostKey: other)))) }
        // A login for another session is refused.
        #expect(throws: AgentRefusal.self) { try b.destination(of: #require(SSHUserAuthRequest(parsing: userAuthData(sessionID: [1, 2, 3], key: user)))) }
    }

    @Test func aBadSignatureFailsTheBindAndTheConnection() throws {
        let host = try Ed25519.PrivateKey()
        var b = SessionBindings()
        #expect(throws: AgentRefusal.self) { try b.bind(bindContents(host: host, sessionID: sid, corrupt: true)) }
        #expect(b.bindFailed)
        #expect(throws: AgentRefusal.self) { try b.bind([0, 0, 0]) }
    }

    @Test func sessionIDRules() throws {
        let host = try Ed25519.PrivateKey(), other = try Ed25519.PrivateKey()
        var tooLong = SessionBindings()
        #expect(throws: AgentRefusal.self) { try tooLong.bind(bindContents(host: host, sessionID: [UInt8](repeating: 1, count: 129))) }
        var empty = SessionBindings()
        #expect(throws: AgentRefusal.self) { try empty.bind(bindContents(host: host, sessionID: [])) }

        var fwd = SessionBindings()
        try fwd.bind(bindContents(host: host, sessionID: sid, forwarding: true))
        try fwd.bind(bindContents(host: host, sessionID: sid, forwarding: true))        // the same again: recorded once
        #expect(fwd.bindings.count == 1)
        #expect(throws: AgentRefusal.self) { try fwd.bind(bindContents(host: other, sessionID: sid, forwarding: true)) }
        for i in 1..<SessionBindings.maximumBindings { try fwd.bind(bindContents(host: host, sessionID: [UInt8(i)], forwarding: true)) }
        #expect(throws: AgentRefusal.self) { try fwd.bind(bindContents(host: host, sessionID: [0xee], forwarding: true)) }

        var auth = SessionBindings()
        try auth.bind(bindContents(host: host, sessionID: sid))
        #expect(throws: AgentRefusal.self) { try auth.bind(bindContents(host: other, sessionID: [7], forwarding: true)) }
    }

    /// A forwarded chain: the first hop forwards, the far client binds its own session.
    @Test func forwardedConnectionsSayThroughWhichHosts() throws {
        let hop = try Ed25519.PrivateKey(), far = try Ed25519.PrivateKey()
        let user = SSHPublicKey.ed25519([UInt8](repeating: 1, count: 32))
        var b = SessionBindings()
        try b.bind(bindContents(host: hop, sessionID: [1], forwarding: true))
        // The far client did not bind (yet): the destination is unknown, the hop is named.
        let unknown = try b.destination(of: #require(SSHUserAuthRequest(parsing: userAuthData(sessionID: [2], key: user))))
        #expect(unknown.hostKeyFingerprint == nil && unknown.forwardedThrough == [SSHPublicKey.ed25519(hop.publicKey.rawRepresentation).fingerprint])
        // A login for the forwarding session itself is not one beyond it.
        #expect(throws: AgentRefusal.self) { try b.destination(of: #require(SSHUserAuthRequest(parsing: userAuthData(sessionID: [1], key: user)))) }
        try b.bind(bindContents(host: far, sessionID: [2]))
        let known = try b.destination(of: #require(SSHUserAuthRequest(parsing: userAuthData(sessionID: [2], key: user))))
        #expect(known.hostKeyFingerprint == SSHPublicKey.ed25519(far.publicKey.rawRepresentation).fingerprint)
        #expect(known.isForwarded && known.text.contains("forwarded through"))
    }

    /// Host keys of the other kinds OpenSSH servers use bind too: the session id here is an
    /// SSHSIG's signed data and the signature the one ssh-keygen made of it (real RSA and ECDSA
    /// P-384/P-521 signatures), so each verifier is held to OpenSSH's output.
    @Test(arguments: OpenSSHFormatTests.vectorNames) func hostKeysOfEveryKindBind(_ name: String) throws {
        let sig = try SSHSIG.Signature(blob: SSHSIG.dearmor(OpenSSHFormatTests.fixture("\(name).sig")))
        let message = Array(try OpenSSHFormatTests.fixture("message.txt").utf8)
        let signed = SSHSIG.signedData(namespace: sig.namespace, hash: sig.hash, messageDigest: sig.hash.digest(message))
        var w = SSHWriter()
        w.string(sig.publicKey.blob); w.string(signed); w.string(sig.signature); w.boolean(false)
        var b = SessionBindings()
        try b.bind(w.bytes)
        #expect(b.bindings.first?.hostKey == sig.publicKey)
        var bad = SessionBindings()
        var tampered = signed; tampered[tampered.count - 1] ^= 1
        var w2 = SSHWriter()
        w2.string(sig.publicKey.blob); w2.string(tampered); w2.string(sig.signature); w2.boolean(false)
        #expect(throws: AgentRefusal.self) { try bad.bind(w2.bytes) }
    }
}
