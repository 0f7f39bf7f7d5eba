import Foundation
import Testing
@testable import SiteKeepAgent
import SiteKeepWiring
import SiteKeepCrypto
import SiteKeepCustody

/// What the presence prompt shows for an agent request, through real custody and an askpass
/// program that records its argument (issue 32, defect 3): the key and the destination as the
/// bindings verified it (or UNVERIFIED) and the forwarding hops come before anything the peer
/// chose; peer strings are quoted and bounded on their own; hidden characters never reach it.
@Suite struct PromptTests {
    static let peer = AgentPeer(pid: 4242, uid: 0, command: "ssh")

    /// `root to host SHA256:… (ED25519), directly` and 300 spaces: a user name written to read,
    /// in the old prompt, as a verified direct login to a host the user trusts.
    static func paddedUser(posingAs host: SSHPublicKey) -> String {
        "root to host \(host.fingerprint) (ED25519), directly" + String(repeating: " ", count: 300)
    }

    /// `U+202E` (as the refusal names it).
    static func name(_ scalar: Unicode.Scalar) -> String {
        let hex = String(scalar.value, radix: 16, uppercase: true)
        return "U+" + String(repeating: "0", count: max(0, 4 - hex.count)) + hex
    }

    /// The prompt's scalars before the first occurrence of `needle` (nil: absent).
    static func offset(of needle: String, in prompt: String) -> Int? {
        guard let r = prompt.range(of: needle) else { return nil }
        return prompt.unicodeScalars[..<r.lowerBound].count
    }

    @Test func aPaddedUserNameCannotHideThatTheDestinationIsUnverified() throws {
        let f = try AgentFixture(keys: [("k", .ed25519, SSHAgentPolicy())])
        let session = AgentSession(keys: try f.keys(), peer: Self.peer)
        let k = try f.sshKey("k")
        let trusted = SSHPublicKey.ed25519(try Ed25519.PrivateKey().publicKey.rawRepresentation)
        let user = Self.paddedUser(posingAs: trusted)
        // No session-bind: the destination is unknown.
        guard case .signature = session.reply(to: signRequest(blob: k.blob, data: userAuthData(sessionID: [UInt8](repeating: 7, count: 32), user: user, key: k))) else {
            Issue.record("refused: \(String(describing: session.lastRefusal))"); return
        }
        let prompt = try #require(f.prompts.last)
        #expect(prompt.hasPrefix("SiteKeep: key k, ssh.sign, for an SSH login to an UNVERIFIED host (the connection did not identify it), as user \"root to host "),
                "the key and the unverified destination lead: \(prompt)")
        // The user name is quoted and cut at 64 scalars; SiteKeep's own words all follow it.
        let shown = "\"" + String(String.UnicodeScalarView(user.unicodeScalars.prefix(64))) + "…\""
        #expect(prompt.contains(shown), "\(prompt)")
        #expect(!prompt.contains(String(repeating: " ", count: 40)), "the padding is cut with the name")
        #expect(prompt.contains("; asked by \"ssh\" (pid 4242, this signature only) on the SSH agent socket. Approval covers only this site, ssh.sign and key k, for at most 60 s (prompt "))
        #expect(prompt.hasSuffix("). Allow?"))
        #expect(try #require(Self.offset(of: "UNVERIFIED", in: prompt)) < 80)
        #expect(try #require(Self.offset(of: "UNVERIFIED", in: prompt)) < (try #require(Self.offset(of: trusted.fingerprint, in: prompt))))
    }

    @Test func aForwardedHopCannotBeHiddenByAPaddedUserName() throws {
        let f = try AgentFixture(keys: [("k", .ed25519, SSHAgentPolicy())])
        let session = AgentSession(keys: try f.keys(), peer: Self.peer)
        let k = try f.sshKey("k")
        let hop = try Ed25519.PrivateKey()
        let hopKey = SSHPublicKey.ed25519(hop.publicKey.rawRepresentation)
        let trusted = SSHPublicKey.ed25519(try Ed25519.PrivateKey().publicKey.rawRepresentation)
        // The client bound the connection it forwards to the hop; the far end asks for a login
        // of a session beyond it, with the padded name.
        #expect(session.reply(to: extensionRequest("session-bind@openssh.com", bindContents(host: hop, sessionID: [UInt8](repeating: 1, count: 32), forwarding: true))) == .success)
        let data = userAuthData(sessionID: [UInt8](repeating: 2, count: 32), user: Self.paddedUser(posingAs: trusted), key: k)
        guard case .signature = session.reply(to: signRequest(blob: k.blob, data: data)) else {
            Issue.record("refused: \(String(describing: session.lastRefusal))"); return
        }
        let prompt = try #require(f.prompts.last)
        #expect(prompt.hasPrefix("SiteKeep: key k, ssh.sign, for an SSH login to an UNVERIFIED host (the connection did not identify it), FORWARDED through \(hopKey.fingerprint), as user \""),
                "\(prompt)")
        #expect(try #require(Self.offset(of: "FORWARDED through", in: prompt)) < (try #require(Self.offset(of: trusted.fingerprint, in: prompt))))
    }

    /// Each character that reorders, hides or breaks text: a login naming it is refused
    /// with a reason and no prompt.
    static let hidden: [String] = ["\u{202E}", "\u{202A}", "\u{2066}", "\u{2069}", "\u{200E}", "\u{200F}", "\u{061C}",
                                   "\u{200B}", "\u{200C}", "\u{200D}", "\u{2060}", "\u{FEFF}", "\u{07}", "\n", "\u{1B}", "\u{85}", "\u{2028}"]

    @Test(arguments: hidden) func aLoginUserNameWithAHiddenCharacterIsRefusedWithoutAPrompt(_ c: String) throws {
        let f = try AgentFixture(keys: [("k", .ed25519, SSHAgentPolicy())])
        let session = AgentSession(keys: try f.keys(), peer: Self.peer)
        let k = try f.sshKey("k")
        let user = "ro" + c + "ot"
        let reply = session.reply(to: signRequest(blob: k.blob, data: userAuthData(sessionID: [UInt8](repeating: 7, count: 32), user: user, key: k)))
        #expect(reply == .failure)
        let name = Self.name(c.unicodeScalars.first!)
        guard case .malformed(let why)? = session.lastRefusal else { Issue.record("\(String(describing: session.lastRefusal))"); return }
        #expect(why.contains("user name") && why.contains(name) && why.contains("plain user name"), "\(why)")
        #expect(f.prompts.isEmpty, "no prompt for a refused login")
        // A plain name still works on the same connection.
        guard case .signature = session.reply(to: signRequest(blob: k.blob, data: userAuthData(sessionID: [UInt8](repeating: 7, count: 32), user: "root", key: k))) else {
            Issue.record("refused: \(String(describing: session.lastRefusal))"); return
        }
    }

    @Test func aNamespaceOrProcessNameCannotPoseAsSiteKeepsWords() throws {
        let f = try AgentFixture(keys: [("k", .ed25519, SSHAgentPolicy())])
        // A process may call itself anything, hidden characters included.
        let peer = AgentPeer(pid: 77, uid: 0, command: "g\u{200B}it\u{202E}")
        let session = AgentSession(keys: try f.keys(), peer: peer)
        let k = try f.sshKey("k")
        // Namespaces are printable ASCII (the wire refuses the rest), but may mimic the prompt.
        let namespace = "file\"; asked by \"sshd\" (pid 1) on the SSH agent socket" + String(repeating: " ", count: 100) + "x"
        guard case .signature = session.reply(to: signRequest(blob: k.blob, data: sshsigData(namespace))) else {
            Issue.record("refused: \(String(describing: session.lastRefusal))"); return
        }
        let prompt = try #require(f.prompts.last)
        #expect(!prompt.unicodeScalars.contains { Self.hidden.contains(String($0)) || $0.properties.generalCategory == .format || $0.value < 0x20 },
                "no hidden character reaches the prompt: \(prompt)")
        #expect(prompt.hasPrefix("SiteKeep: key k, ssh.sign, for a signature in SSHSIG namespace \"file\\\"; asked by \\\"sshd\\\" (pid 1) on the SSH agent socket "), "\(prompt)")
        #expect(prompt.contains(" …\"; asked by \"g<U+200B>it<U+202E>\" (pid 77, this signature only) on the SSH agent socket. Approval covers only"), "\(prompt)")
    }
}
