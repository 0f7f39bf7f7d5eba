import Foundation
internal import SiteKeepAgent
internal import SiteKeepWiring
internal import SiteKeepCrypto
internal import SiteKeepCustody
internal import SiteKeepJSON
internal import SiteKeepDaemon

/// `agent env`, `team ssh enable|disable`, `team presence`, `team show`: team keys for ssh,
/// ssh-keygen and git, and what approves their uses.
enum AgentCommands {
    static var all: [CommandSpec] { [agentEnv, teamSSHEnable, teamSSHDisable, teamPresence, teamShow] }

    static let agentEnv = CommandSpec(
        path: ["agent", "env"],
        summary: "Print the SSH_AUTH_SOCK line for the daemon's ssh-agent socket (as 'ssh-agent -s' does)",
        discussion: """
        The daemon serves team keys to ssh, ssh-add, ssh-keygen and git over the ssh-agent \
        protocol when the ssh-agent setting is on ('sitekeep config set ssh-agent on', applied \
        to a running daemon at once; 'serve --ssh-agent' for one run). Its socket is --socket, else \
        $SITEKEEP_AGENT_SOCK, else $XDG_RUNTIME_DIR/sitekeep/agent.sock. Use it with \
        eval "$(sitekeep agent env)". A note goes to stderr when nothing answers there yet.
        """,
        options: [.option("--socket", value: "PATH", "the agent socket (default: $SITEKEEP_AGENT_SOCK, else $XDG_RUNTIME_DIR/sitekeep/agent.sock)"),
                  .flag("--csh", short: "-c", "print a csh 'setenv' line instead of a Bourne shell one")],
        examples: [CommandExample("sitekeep agent env", "print 'SSH_AUTH_SOCK=...; export SSH_AUTH_SOCK;' for eval"),
                   CommandExample("sitekeep agent env --socket /run/user/1000/sitekeep/agent.sock --csh", "the csh form, for a socket named explicitly")]
    ) { inv in
        let path = try AgentSocketPath.resolve(inv.option("--socket"), environment: inv.environment)
        let answering = AgentClient.isAnswering(path: path)
        if !answering && !inv.settings.json {
            // The fix is the setting, applied at once by a running daemon (a second `serve
            // --ssh-agent` would only meet the running one).
            if (try? DaemonLink.find(inv)) != nil {
                inv.note("note: the daemon runs without the ssh-agent socket; turn it on with 'sitekeep config set ssh-agent on' (applied at once)")
            } else if let stored = try? DaemonSettings.load(home: inv.settings.home), stored[.sshAgent] == "on", !stored.untagged.contains(.sshAgent) {
                // The setting is on already: what is missing is the daemon.
                inv.note("note: nothing answers on \(path): no daemon runs; start it with 'sitekeep unlock' (the ssh-agent setting is on)")
            } else {
                inv.note("note: nothing answers on \(path) yet; turn the agent on with 'sitekeep config set ssh-agent on', then start the daemon with 'sitekeep unlock'")
            }
        }
        inv.emit(.object([JSONMember(key: "SSH_AUTH_SOCK", value: .string(path)), JSONMember(key: "answering", value: .bool(answering))])) {
            inv.flag("--csh") ? "setenv SSH_AUTH_SOCK \(ShellQuote.quote(path));" : "SSH_AUTH_SOCK=\(ShellQuote.quote(path)); export SSH_AUTH_SOCK;"
        }
    }

    static let teamSSHEnable = CommandSpec(
        path: ["team", "ssh", "enable"],
        summary: "Offer a team key over the ssh-agent socket, for SSH logins and SSHSIG signatures (git, files)",
        discussion: """
        Off by default for every key. Once on, 'ssh-add -L' lists the key and ssh, ssh-keygen \
        -Y sign and git (gpg.format=ssh) can ask it to sign; each signature still needs presence \
        (the program in $SITEKEEP_ASKPASS is asked, naming the key, the destination host or the \
        SSHSIG namespace) and is in the audit log. --namespace (repeatable) limits SSHSIG \
        signatures to those namespaces (git for commits, file for 'ssh-keygen -Y sign -n file'); \
        --no-login refuses SSH logins; --other-data allows data that is neither (off: such \
        bytes could be anything). Turning SSH use on, or changing what it allows, needs your \
        approval (the presence prompt, the passphrase typed again, or the current secret given \
        for this command), even with the daemon unlocked. The daemon's signing gate applies the \
        new policy at once, to open agent connections too. --presence fido2 also makes each use \
        need a touch of the plugged security key (as 'sitekeep team presence ID fido2'); for a \
        key that needs a touch, allowing it more takes a touch of the security key (or the \
        current secret given for this command), never a prompt's answer. The policy is bound \
        into the key's wrapped versions: one written into the keyring by hand is not in force.
        """,
        arguments: [ArgumentSpec("ID", "the key id")],
        options: [UnlockOptions.recoveryFile,
                  .option("--namespace", value: "NS", "allow SSHSIG signatures only in NS (repeatable; default: any namespace)"),
                  .flag("--no-login", "refuse SSH logins (user-authentication requests)"),
                  .flag("--other-data", "also sign data that is neither an SSH login nor an SSHSIG"),
                  .option("--presence", value: "MODE", "fido2: each use needs a touch of the plugged security key (its PIN: --pin-file or --pin)")],
        secretInputs: UnlockOptions.secretInputs,
        examples: [CommandExample("sitekeep team ssh enable summit --passphrase-file pass.txt", "offer summit for SSH logins and SSHSIG signatures"),
                   CommandExample("sitekeep team ssh enable summit --presence fido2 --passphrase-file pass.txt", "offer summit over SSH, each signature approved by a touch of the security key"),
                   CommandExample("sitekeep team ssh enable summit --namespace git --no-login --prf-file prf.bin", "let summit sign git commits and nothing else")]
    ) { inv in
        let id = try inv.requiredArgument("ID")
        let namespaces = inv.options("--namespace")
        for ns in namespaces where !SSHAgentPolicy.isValidNamespace(ns) {
            throw UsageError("--namespace '\(ns.prefix(64))' is not an SSH namespace: use 1-64 characters from a-z A-Z 0-9 . _ - @ +", command: inv.spec.commandLine)
        }
        let policy = SSHAgentPolicy(enabled: true, login: !inv.flag("--no-login"), namespaces: namespaces.isEmpty ? nil : namespaces,
                                    otherData: inv.flag("--other-data"))
        let touch: Bool
        switch inv.option("--presence") {
        case nil, "prompt"?: touch = false
        case "fido2"?: touch = true
        case let other?: throw UsageError("--presence takes fido2 (or prompt, the default), not '\(other.prefix(40))'", command: inv.spec.commandLine)
        }
        let store = try StoreContext.open(inv)
        // What a key may sign changes only with the user's approval (or the current secret),
        // never because some process reached an unlocked daemon.
        _ = try store.custodian.teamKeyInfo(id: id)
        let approval = try Approval.approve(inv, store: store, op: Custodian.sshPolicyOp, keyID: Approval.keyID(id))
        let context = KeyUseContext(client: .commandLine, op: Custodian.sshPolicyOp, presence: approval)
        // The touch first: without the security key, nothing changes.
        if touch { _ = try requireTouch(inv, store: store, id: id, context: context) }
        // Allowing a key that needs a touch more takes a touch (or the current secret), never a prompt's answer.
        if (try? store.custodian.teamKeyInfo(id: id))?.touch != nil, approval.method != .secret {
            inv.note("Touch the security key when it blinks, to approve what \(id) may sign over SSH.")
        }
        let info = try store.custodian.setSSHAgentPolicy(keyID: id, policy, context: context)
        inv.emit(sshJSON(info)) {
            "SSH use of \(id): \(policy.summary)" + (info.touch != nil ? "; each use needs a touch of the security key" : "") + ".\n"
                + (try? sshLine(info)).map { "  \($0)" }.orEmpty
        }
    }

    static let teamPresence = CommandSpec(
        path: ["team", "presence"],
        summary: "Choose what approves each use of a team key: the presence prompt, or a touch of a FIDO2 security key",
        discussion: """
        fido2: each use of the key, from every client (the command line, a page's key.sign, ssh \
        and git through the agent socket), waits for a touch of the plugged security key, which \
        no program can give; no approval is kept between uses and no secret given to a command \
        stands in for it. The key makes a credential for it now (touch it; give its PIN with \
        --pin-file or --pin if it has one); this needs your approval as any change of what a key \
        may do. prompt: back to the presence prompt; since that widens who can approve, it needs \
        a touch of the key's security key, or the current secret given for this command \
        (--passphrase-file and the others) when the security key is lost.
        """,
        arguments: [ArgumentSpec("ID", "the key id"), ArgumentSpec("MODE", "fido2 or prompt")],
        options: [UnlockOptions.recoveryFile],
        secretInputs: UnlockOptions.secretInputs,
        examples: [CommandExample("sitekeep team presence summit fido2 --passphrase-file pass.txt", "each use of summit needs a touch of the security key"),
                   CommandExample("sitekeep team presence summit prompt --passphrase-file pass.txt", "back to the presence prompt (the security key was lost)")]
    ) { inv in
        let id = try inv.requiredArgument("ID")
        let mode = try inv.requiredArgument("MODE")
        guard mode == "fido2" || mode == "prompt" else {
            throw UsageError("MODE must be fido2 or prompt, not '\(mode.prefix(40))'", command: inv.spec.commandLine)
        }
        let store = try StoreContext.open(inv)
        let before = try store.custodian.teamKeyInfo(id: id)
        let info: SigningKeyInfo
        if (mode == "fido2") == (before.touch != nil) {
            info = before   // already so: nothing to approve
        } else if mode == "fido2" {
            let approval = try Approval.approve(inv, store: store, op: Custodian.presencePolicyOp, keyID: Approval.keyID(id))
            info = try requireTouch(inv, store: store, id: id,
                                    context: KeyUseContext(client: .commandLine, op: Custodian.presencePolicyOp, presence: approval))
        } else {
            // A prompt cannot stand in for a touch: only the current secret given for this
            // command (or the unlock this command makes with it) can; else custody asks for a touch.
            let givesSecret = SecretSource.all.contains { inv.option($0.option) != nil } || inv.flag("--tpm2") || inv.flag("--fido2")
            let approval: PresenceProof? = (givesSecret || inv.hosted == nil || !store.custodian.isUnlocked)
                ? try Approval.approve(inv, store: store, op: Custodian.presencePolicyOp, keyID: Approval.keyID(id)) : nil
            if approval?.method != .secret {
                inv.note("Touch the security key when it blinks, to approve this change.")
            }
            info = try inv.withProgress("Waiting for the security key") { () throws -> SigningKeyInfo in
                try store.custodian.allowPrompt(keyID: id, context: KeyUseContext(client: .commandLine, op: Custodian.presencePolicyOp,
                                                                                   presence: approval))
            }
        }
        inv.emit(.object([JSONMember(key: "key", value: .string(id)), JSONMember(key: "presence", value: .string(presenceWord(info)))])) {
            info.touch != nil ? "Each use of \(id) needs a touch of the security key." : "Uses of \(id) are approved at the presence prompt."
        }
    }

    /// Makes `id` need a touch (the key's PIN from `--pin-file`/`--pin`), telling the user to touch.
    static func requireTouch(_ inv: Invocation, store: StoreContext, id: String, context: KeyUseContext) throws -> SigningKeyInfo {
        guard !inv.flag("--tpm2") else {
            throw UsageError("--pin-file and --pin name the security key's PIN here; give the current secret another way than --tpm2",
                             command: inv.spec.commandLine)
        }
        if (try? store.custodian.teamKeyInfo(id: id))?.touch != nil { return try store.custodian.teamKeyInfo(id: id) }
        let pin = SecretBox(try UnlockInput.readKeyPIN(inv))
        inv.note("Touch the security key when it blinks, to make the credential that will approve each use of \(id).")
        return try inv.withProgress("Waiting for the security key") { () throws -> SigningKeyInfo in
            try store.custodian.requireTouch(keyID: id, pin: pin.takeIfAny(), context: context)
        }
    }

    /// `fido2` for a key whose uses need a touch, else `prompt`.
    static func presenceWord(_ info: SigningKeyInfo) -> String { info.touch != nil ? "fido2" : "prompt" }

    static let teamSSHDisable = CommandSpec(
        path: ["team", "ssh", "disable"],
        summary: "Stop offering a team key over the ssh-agent socket",
        discussion: """
        Needs no approval (it only narrows), but SiteKeep unlocked (the daemon, or the current \
        secret given for this command): the policy is bound into the key's wrapped versions, \
        which are wrapped again without it. Agent connections opened after this no longer list \
        the key, and the daemon's signing gate refuses it at once on open ones.
        """,
        arguments: [ArgumentSpec("ID", "the key id")],
        options: [UnlockOptions.recoveryFile],
        secretInputs: UnlockOptions.secretInputs,
        examples: [CommandExample("sitekeep team ssh disable summit --passphrase-file pass.txt",
                                  "take summit off the ssh-agent socket (no secret needed while the daemon is unlocked)")]
    ) { inv in
        let id = try inv.requiredArgument("ID")
        let store = try StoreContext.open(inv)
        _ = try store.custodian.teamKeyInfo(id: id)
        try store.unlockOneShot(inv)
        let info = try store.custodian.setSSHAgentPolicy(keyID: id, nil)
        inv.emit(sshJSON(info)) { "SSH use of \(id): off." }
    }

    static let teamShow = CommandSpec(
        path: ["team", "show"],
        summary: "Show one team key: fingerprints (SiteKeep's and ssh-keygen's), SPKI PEM, OpenSSH line, SSH use",
        discussion: """
        Public facts only; works while locked. The PEM is a SubjectPublicKeyInfo for both \
        algorithms (openssl pkey -pubin reads it). --ssh prints only the OpenSSH public key line, \
        for authorized_keys or git's gpg.ssh.allowedSignersFile.
        """,
        arguments: [ArgumentSpec("ID", "the key id")],
        options: [.flag("--ssh", "print only the OpenSSH public key line")],
        examples: [CommandExample("sitekeep team show summit", "the key's fingerprints, PEM and SSH use"),
                   CommandExample("sitekeep team show summit --ssh", "the line for authorized_keys or an allowed-signers file")]
    ) { inv in
        let id = try inv.requiredArgument("ID")
        let store = try StoreContext.open(inv)
        let info = try store.custodian.teamKeyInfo(id: id)
        let line = try sshLine(info)
        if inv.flag("--ssh") {
            inv.emit(["key": .string(id), "openssh": .string(line)]) { line }
            return
        }
        let key = try sshKey(info)
        var json = CustodyCommands.keyJSON(info)
        if case .object(var members) = json {
            members += [JSONMember(key: "sshFingerprint", value: .string(key.fingerprint)), JSONMember(key: "openssh", value: .string(line))]
            members.append(JSONMember(key: "ssh", value: sshPolicyJSON(info.ssh)))
            members.append(JSONMember(key: "presence", value: .string(presenceWord(info))))
            json = .object(members)
        }
        inv.emit(json) {
            var lines = ["key          \(info.id) (\(info.name))",
                         "algorithm    \(info.algorithm.rawValue), version \(info.version) of \(info.versions.count)",
                         "fingerprint  \(key.fingerprint)  (as ssh-keygen -l prints it: \(key.bits) \(key.fingerprint) \(AgentIdentity.comment(keyID: info.id, name: info.name)) (\(key.family)))",
                         "             \(info.fingerprint)  (SiteKeep's)",
                         "ssh          \(info.ssh?.summary ?? "off (sitekeep team ssh enable \(info.id))")",
                         "presence     " + (info.touch != nil ? "a touch of the security key for each use (fido2)" : "the presence prompt"),
                         "openssh      \(line)"]
            if let pem = info.versions.last?.publicKeyPEM { lines.append(pem.trimmingCharacters(in: .newlines)) }
            return lines.joined(separator: "\n")
        }
    }

    // MARK: Helpers

    static func sshKey(_ info: SigningKeyInfo) throws -> SSHPublicKey {
        guard let raw = try? Base64.decode(info.publicKey), let key = try? SSHPublicKey(algorithm: info.algorithm, publicKey: raw) else {
            throw CommandFailure("key \(info.id)'s public key is damaged", remedy: "check 'sitekeep team list'", code: "damaged")
        }
        return key
    }

    /// The key's OpenSSH public key line, its comment naming the key and its display name.
    static func sshLine(_ info: SigningKeyInfo) throws -> String {
        try sshKey(info).authorizedKeysLine(comment: AgentIdentity.comment(keyID: info.id, name: info.name))
    }

    static func sshPolicyJSON(_ policy: SSHAgentPolicy?) -> JSONValue {
        guard let policy, policy.enabled else { return .object([JSONMember(key: "enabled", value: .bool(false))]) }
        return .object([JSONMember(key: "enabled", value: .bool(true)), JSONMember(key: "login", value: .bool(policy.login)),
                        JSONMember(key: "namespaces", value: policy.namespaces.map { .array($0.map { .string($0) }) } ?? .null),
                        JSONMember(key: "otherData", value: .bool(policy.otherData))])
    }

    static func sshJSON(_ info: SigningKeyInfo) -> JSONValue {
        .object([JSONMember(key: "key", value: .string(info.id)), JSONMember(key: "ssh", value: sshPolicyJSON(info.ssh)),
                 JSONMember(key: "presence", value: .string(presenceWord(info))),
                 JSONMember(key: "openssh", value: .string((try? sshLine(info)) ?? ""))])
    }

    /// The SSHSIG signed data of `message` in `namespace` (SHA-512), what `team sign
    /// --ssh-namespace` has custody sign (custody checks the namespace against the key's policy).
    static func sshsigSignedData(_ message: [UInt8], namespace: String) -> [UInt8] {
        let hash = SSHSIG.Hash.sha512
        return SSHSIG.signedData(namespace: namespace, hash: hash, messageDigest: hash.digest(message))
    }

    /// The armoured SSHSIG signature of `signed` (custody's signature of
    /// ``sshsigSignedData(_:namespace:)``), with the public key that signed it.
    static func sshsigArmor(_ signed: TeamSignature, namespace: String) throws -> String {
        guard let key = try? SSHPublicKey(algorithm: signed.algorithm, publicKey: signed.publicKey) else {
            throw CommandFailure("key \(signed.keyID)'s public key is damaged", remedy: "check 'sitekeep team list'", code: "damaged")
        }
        let blob = SSHSIG.blob(publicKey: key.blob, namespace: namespace, hash: .sha512,
                               signature: try SSHSignatureBlob.make(algorithm: signed.algorithm, raw: signed.signature))
        return SSHSIG.armor(blob)
    }
}

/// Where the agent socket is: an explicit path, `$SITEKEEP_AGENT_SOCK`, or
/// `$XDG_RUNTIME_DIR/sitekeep/agent.sock`.
enum AgentSocketPath {
    static func resolve(_ explicit: String?, environment: [String: String]) throws -> String {
        if let p = explicit, !p.isEmpty { return p }
        if let p = environment["SITEKEEP_AGENT_SOCK"], !p.isEmpty { return p }
        if let run = environment["XDG_RUNTIME_DIR"], !run.isEmpty { return run + "/sitekeep/agent.sock" }
        throw CommandFailure("neither SITEKEEP_AGENT_SOCK nor XDG_RUNTIME_DIR is set, so there is no default agent socket",
                             remedy: "pass --socket PATH (or --ssh-agent-socket PATH to serve), or set XDG_RUNTIME_DIR", code: "no_socket")
    }
}

/// POSIX shell quoting for a printed path.
enum ShellQuote {
    static func quote(_ s: String) -> String {
        let safe = s.utf8.allSatisfy { b in
            (0x30...0x39).contains(b) || (0x41...0x5a).contains(b) || (0x61...0x7a).contains(b) || Array("/._-+:@%,".utf8).contains(b)
        }
        return safe && !s.isEmpty ? s : "'" + s.replacingOccurrences(of: "'", with: "'\\''") + "'"
    }
}

extension Optional where Wrapped == String {
    var orEmpty: String { self ?? "" }
}
