/// Whether, and for what, a team key is offered over SiteKeep's ssh-agent socket.
///
/// Stored with the key's public facts (its keyring record), off by default: a key with no
/// policy, or with ``enabled`` false, is not listed to SSH clients and signs nothing for them.
/// The policy narrows what the key signs in SSH's formats, whichever client asks: the agent
/// socket, `sitekeep team sign --ssh-namespace`, a raw `team sign` or a page's `key.sign` of
/// bytes that are an SSHSIG blob or an SSH login request (custody's signing gate reads what the
/// bytes are). Every signature still needs presence and is logged.
public struct SSHAgentPolicy: Sendable, Equatable {
    /// Whether the key is listed to SSH clients (`ssh-add -L`) and may sign for them.
    public var enabled: Bool
    /// Whether it signs SSH user-authentication requests (logging in with `ssh`).
    public var login: Bool
    /// The SSHSIG namespaces it signs (`git` for commits, `file` for `ssh-keygen -Y sign`, ...);
    /// nil signs any namespace, an empty list none.
    public var namespaces: [String]?
    /// Whether it signs data that is neither a user-authentication request nor an SSHSIG
    /// (off unless asked for: such bytes could be anything).
    public var otherData: Bool

    /// The most namespaces a policy lists.
    public static let maximumNamespaces = 32

    /// A policy; custody checks its namespaces (`validate()`) before it keeps one.
    public init(enabled: Bool = true, login: Bool = true, namespaces: [String]? = nil, otherData: Bool = false) {
        self.enabled = enabled
        self.login = login
        self.namespaces = namespaces
        self.otherData = otherData
    }

    /// Whether an SSHSIG in `namespace` may be signed.
    public func permits(namespace: String) -> Bool {
        enabled && (namespaces?.contains(namespace) ?? true)
    }

    /// Whether `namespace` is one a policy can name.
    public static func isValidNamespace(_ namespace: String) -> Bool {
        let bytes = Array(namespace.utf8)
        return (1...64).contains(bytes.count) && bytes.allSatisfy { b in
            (0x61...0x7a).contains(b) || (0x41...0x5a).contains(b) || (0x30...0x39).contains(b) || [0x2e, 0x5f, 0x2d, 0x40, 0x2b].contains(b)
        }
    }

    /// A few words for the audit log and `team show`: `login, git, file` or `off`.
    public var summary: String {
        guard enabled else { return "off" }
        var parts: [String] = []
        if login { parts.append("login") }
        if let namespaces { parts.append(namespaces.isEmpty ? "no SSHSIG" : "SSHSIG " + namespaces.joined(separator: ",")) } else { parts.append("SSHSIG any namespace") }
        if otherData { parts.append("other data") }
        return parts.joined(separator: "; ")
    }
}

