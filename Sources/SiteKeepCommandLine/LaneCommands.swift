import SiteKeepCrypto
import SiteKeepCustody
import SiteKeepJSON
import SiteKeepSystem
import SiteKeepVault
import SiteKeepVaultRemotes

/// The vault server's append lanes (issue 48): the agent's `inbox send`, and the owner's
/// `inbox lane open`, `inbox token add|list|revoke`, `inbox lane list|show|mark|purge`.
enum LaneCommands {
    static let all = [send, laneOpen, tokenAdd, tokenList, tokenRevoke, laneList, laneShow, laneMark, lanePurge]

    static let appendToken = SecretSource(option: "--token-file", noun: "append token", format: .text, limit: 64 << 10)
    static let accessToken = SecretSource(option: "--access-token-file", noun: "server access token", format: .text, limit: 64 << 10)
    static let vaultArgument = ArgumentSpec("VAULT", "the registered vault whose lane it is")
    static let remoteOption = OptionSpec.option("--remote", value: "R", "the vault's remote (default: origin, or the only one)")

    // MARK: the agent's side

    /// What `inbox token add` printed, as the agent's token file holds it (its JSON, or its
    /// `key: value` lines, or the bare token).
    struct Grant {
        var token: String?, server: String?, vault: String?, laneKey: String?

        init(parsing text: String) {
            if let doc = try? JSONParser.parse(Array(text.utf8)), doc.objectValue != nil {
                token = doc["token"]?.stringValue; server = doc["server"]?.stringValue
                vault = doc["vault"]?.stringValue; laneKey = doc["laneKey"]?.stringValue
                return
            }
            for raw in text.split(whereSeparator: \.isNewline) {
                let line = trim(raw)
                guard let colon = line.firstIndex(of: ":") else {
                    if AppendLane.isAppendToken(line) { token = line }
                    continue
                }
                let key = trim(line[..<colon]).lowercased()
                let value = trim(line[line.index(after: colon)...])
                switch key {
                case "token": token = value
                case "server": server = value
                case "vault": vault = value
                case "lane-key": laneKey = value
                default: continue
                }
            }
        }
    }

    /// `text` without its leading and trailing spaces and tabs.
    static func trim<S: StringProtocol>(_ text: S) -> String {
        String(text.drop { $0 == " " || $0 == "\t" || $0 == "\r" }.reversed().drop { $0 == " " || $0 == "\t" || $0 == "\r" }.reversed())
    }

    /// The server's access token alone (an agent holds nothing of the vault).
    struct AccessTokenOnly: RemoteCredentials {
        let token: String?
        func accessToken() throws(VaultError) -> String? { token }
        func writeKeyHex() throws(VaultError) -> String? { nil }
    }

    static let send = CommandSpec(
        path: ["inbox", "send"],
        summary: "Send a message to a vault's lane with nothing but an append token (no store needed)",
        discussion: """
        The message (title, sender, the body or files, links) is sealed with libsodium's sealed \
        box to the lane key that 'sitekeep inbox token add' printed, so the server stores \
        ciphertext, and the token's holder reads nothing of the vault. --token-file is the file \
        token add printed (its lines or its --json object; --server and --vault override it). A \
        self-hosted server also wants its access token (--access-token-file). Payloads are at most \
        5 MiB; a lane holds 1,000 unread messages per token.
        """,
        options: [.option("--server", value: "URL", "the vault server (default: the token file's)"),
                  .option("--vault", value: "ID", "the vault id (default: the token file's)"),
                  .option("--token-file", value: "F", "what 'inbox token add' printed ('-' for stdin)"),
                  .option("--access-token-file", value: "F", "the server's access token, when it wants one"),
                  .option("--title", value: "TEXT", "the message's title"),
                  .option("--from", value: "NAME", "who sends it (default: agent)"),
                  .option("--body-file", value: "F", "the message's text"),
                  .option("--file", value: "F", "attach a file (repeatable)"),
                  .option("--link", value: "URL", "a link (repeatable)")],
        examples: [CommandExample("sitekeep inbox send --token-file brief.token --title 'Daily brief' --body-file brief.md", "send the day's brief")]
    ) { inv in
        guard let tokenPath = inv.option("--token-file") else { throw UsageError("give --token-file F (what 'sitekeep inbox token add' printed)", command: inv.spec.commandLine) }
        guard let title = inv.option("--title") else { throw UsageError("give --title TEXT", command: inv.spec.commandLine) }
        let grantText = try SecretReader.read(appendToken, path: tokenPath, io: inv.io).withUnsafeBytes { String(decoding: $0, as: UTF8.self) }
        let grant = Grant(parsing: grantText)
        guard let token = grant.token, AppendLane.isAppendToken(token) else {
            throw CommandFailure("\(tokenPath) holds no append token", remedy: "give the file 'sitekeep inbox token add' printed", code: "bad_input")
        }
        guard let server = inv.option("--server") ?? grant.server, let vault = inv.option("--vault") ?? grant.vault else {
            throw UsageError("the token file names no server or vault: give --server URL and --vault ID", command: inv.spec.commandLine)
        }
        guard let keyHex = grant.laneKey, let laneKey = try? Hex.decode(keyHex), laneKey.count == SealedBox.publicKeyByteCount else {
            throw CommandFailure("\(tokenPath) holds no lane key (lane-key: 64 hex)", remedy: "give the whole file 'sitekeep inbox token add' printed", code: "bad_input")
        }
        let body = try inv.option("--body-file").map { String(decoding: try InputFile.read($0, option: "--body-file", limit: AppendLane.maxPayloadBytes), as: UTF8.self) }
        var attachments: [LaneAttachment] = []
        for f in inv.options("--file") {
            attachments.append(LaneAttachment(name: String(f.split(separator: "/").last ?? Substring(f)), bytes: try InputFile.read(f, option: "--file", limit: AppendLane.maxPayloadBytes)))
        }
        let envelope = try LaneEnvelope(title: title, from: inv.option("--from") ?? "agent", body: body, attachments: attachments, links: inv.options("--link"))
        let payload = try envelope.sealed(to: laneKey)
        let access = try inv.option("--access-token-file").map { try SecretReader.read(accessToken, path: $0, io: inv.io).withUnsafeBytes { String(decoding: $0, as: UTF8.self) } }
        let lane = try AppendLane(baseURL: server, vaultID: vault, credentials: VaultLaneCredentials(keys: nil, server: AccessTokenOnly(token: access)))
        try lane.write(appendToken: token, payload: payload)
        inv.emit(.object([JSONMember(key: "sent", value: .bool(true)), JSONMember(key: "vault", value: .string(vault)),
                          JSONMember(key: "bytes", value: .int(Int64(payload.count))), JSONMember(key: "sealed", value: .bool(true))])) {
            "Sent '\(title)' to vault \(vault)'s lane (\(payload.count) bytes, sealed)."
        }
    }

    // MARK: the owner's side

    static func service(_ inv: Invocation) throws -> VaultSyncService { try VaultSyncCommands.service(inv) }

    static let laneOpen = CommandSpec(
        path: ["inbox", "lane", "open"],
        summary: "Open a vault's append lane on its server: its tokens' anchors and its enumeration key",
        discussion: """
        Configures the lane with the vault's write key (the current secret unlocks custody for \
        it): the anchors (hashes) of the vault's live tokens, and the hash of its enumeration key, \
        so 'inbox lane list' can read it. 'inbox token add' and 'revoke' configure it too.
        """,
        arguments: [vaultArgument],
        options: VaultCommands.unlockOptions + [remoteOption],
        secretInputs: UnlockOptions.secretInputs,
        examples: [CommandExample("sitekeep inbox lane open notes --passphrase-file pass.txt", "open notes' lane")]
    ) { inv in
        let vault = try inv.requiredArgument("VAULT")
        let n = try service(inv).openLane(vault: vault, remote: inv.option("--remote"), home: inv.settings.home)
        inv.emit(.object([JSONMember(key: "vault", value: .string(vault)), JSONMember(key: "anchors", value: .int(Int64(n)))])) {
            "The lane of \(vault) is open (\(n) token\(n == 1 ? "" : "s") accepted)."
        }
    }

    static let tokenAdd = CommandSpec(
        path: ["inbox", "token", "add"],
        summary: "Mint an append token for an agent: printed once, only its hash is kept",
        discussion: """
        Prints what an agent needs to send (server, vault, lane key, token) once: give it to the \
        agent as a file for 'sitekeep inbox send --token-file'. SiteKeep keeps only the token's \
        anchor (its SHA-256) and label, and configures the lane with it. --expires DAYS leaves it \
        out of the lane's anchors from then on (at the next 'inbox lane open', token add or revoke).
        """,
        arguments: [vaultArgument],
        options: VaultCommands.unlockOptions + [remoteOption, .option("--label", value: "NAME", "who the token is for"),
                                                .option("--expires", value: "DAYS", "days until it is dropped")],
        secretInputs: UnlockOptions.secretInputs,
        examples: [CommandExample("sitekeep inbox token add notes --label brief-bot --passphrase-file pass.txt", "a token for the brief agent (give what it prints to the agent as a file)")]
    ) { inv in
        let vault = try inv.requiredArgument("VAULT")
        guard let label = inv.option("--label") else { throw UsageError("give --label NAME (who the token is for)", command: inv.spec.commandLine) }
        var expires: Int64?
        if let d = inv.option("--expires") {
            guard let days = Int64(d), (1...3650).contains(days) else { throw UsageError("--expires takes 1 to 3650 days, not '\(d)'", command: inv.spec.commandLine) }
            expires = Clocks.wallMilliseconds() + days * 86_400_000
        }
        let g = try service(inv).addLaneToken(vault: vault, remote: inv.option("--remote"), label: label, expiresMs: expires, home: inv.settings.home)
        var members = [JSONMember(key: "server", value: .string(g.server)), JSONMember(key: "vault", value: .string(g.vaultID)),
                       JSONMember(key: "laneKey", value: .string(g.laneKey)), JSONMember(key: "token", value: .string(g.token)),
                       JSONMember(key: "label", value: .string(g.label))]
        if let e = g.expiresMs { members.append(JSONMember(key: "expires", value: .int(e))) }
        inv.emit(.object(members)) {
            "server: \(g.server)\nvault: \(g.vaultID)\nlane-key: \(g.laneKey)\ntoken: \(g.token)\nlabel: \(g.label)"
        }
    }

    static let tokenList = CommandSpec(
        path: ["inbox", "token", "list"],
        summary: "List a vault's append tokens (labels and dates; the tokens themselves are kept nowhere)",
        arguments: [vaultArgument],
        options: VaultCommands.unlockOptions,
        secretInputs: UnlockOptions.secretInputs,
        examples: [CommandExample("sitekeep inbox token list notes --passphrase-file pass.txt", "who may write to notes")]
    ) { inv in
        let vault = try inv.requiredArgument("VAULT")
        let tokens = try service(inv).laneRecords(home: inv.settings.home).tokens(vault: vault)
        let now = Clocks.wallMilliseconds()
        inv.emit(.array(tokens.map { t in
            .object([JSONMember(key: "label", value: .string(t.label)), JSONMember(key: "created", value: .int(t.createdMs)),
                     JSONMember(key: "expires", value: t.expiresMs.map { .int($0) } ?? .null), JSONMember(key: "live", value: .bool(t.isLive(atMs: now)))])
        })) {
            tokens.isEmpty ? "Vault \(vault) has no append tokens." :
            Table(headers: ["LABEL", "STATE"], rows: tokens.map { [$0.label, $0.isLive(atMs: now) ? "live" : "expired"] }).render { inv.style($0, .bold) }
        }
    }

    static let tokenRevoke = CommandSpec(
        path: ["inbox", "token", "revoke"],
        summary: "Revoke an append token: the lane stops accepting it at once",
        arguments: [vaultArgument],
        options: VaultCommands.unlockOptions + [remoteOption, .option("--label", value: "NAME", "the token's label")],
        secretInputs: UnlockOptions.secretInputs,
        examples: [CommandExample("sitekeep inbox token revoke notes --label brief-bot --passphrase-file pass.txt", "brief-bot may no longer write")],
        printsData: false
    ) { inv in
        let vault = try inv.requiredArgument("VAULT")
        guard let label = inv.option("--label") else { throw UsageError("give --label NAME", command: inv.spec.commandLine) }
        try service(inv).revokeLaneToken(vault: vault, remote: inv.option("--remote"), label: label, home: inv.settings.home)
        inv.say("Revoked \(label): vault \(vault)'s lane no longer accepts it.")
    }

    // MARK: reading

    /// One lane message as listed: what it is, never rendered or run.
    static func describe(_ m: LaneMessage, _ e: LaneEntry?, content: LaneContent, labels: [String: String]) -> JSONValue {
        var members = [JSONMember(key: "source", value: "lane"), JSONMember(key: "id", value: .string(m.id)),
                       JSONMember(key: "received", value: .int(e?.receivedMs ?? 0)),
                       JSONMember(key: "sender", value: .string(labels[AppendLane.anchor(of: m.inbox)] ?? "unknown token")),
                       JSONMember(key: "size", value: .int(Int64(m.bytes.count)))]
        switch content {
        case .sealed(let env):
            members += [JSONMember(key: "kind", value: "sealed"), JSONMember(key: "title", value: .string(env.title)), JSONMember(key: "from", value: .string(env.from))]
        case .plain(let doc):
            members += [JSONMember(key: "kind", value: "plain (unsealed)"), JSONMember(key: "title", value: .string(doc["title"]?.stringValue))]
        case .opaque:
            members += [JSONMember(key: "kind", value: "opaque")]
        }
        return .object(members)
    }

    /// The vault's pending lane messages, fetched and classified.
    static func pending(_ inv: Invocation) throws -> (lane: AppendLane, keys: SgitKeys, entries: [LaneEntry], messages: [LaneMessage], labels: [String: String]) {
        let vault = try inv.requiredArgument("VAULT")
        let s = try service(inv)
        let (lane, _, keys) = try s.lane(vault: vault, remote: inv.option("--remote"))
        let labels = Dictionary(try s.laneRecords(home: inv.settings.home).tokens(vault: vault).map { ($0.anchor, $0.label) }, uniquingKeysWith: { a, _ in a })
        let entries = try lane.listAll()
        var messages: [LaneMessage] = []
        for (inbox, group) in Dictionary(grouping: entries, by: \.inbox) {
            for start in stride(from: 0, to: group.count, by: AppendLane.maxBatch) {
                messages += try lane.fetch(inbox: inbox, ids: group[start..<min(start + AppendLane.maxBatch, group.count)].map(\.id)).messages
            }
        }
        return (lane, keys, entries, messages.sorted { $0.id < $1.id }, labels)
    }

    static let laneList = CommandSpec(
        path: ["inbox", "lane", "list"],
        summary: "List a vault's unread lane messages: time, sender (the token's label), title",
        discussion: """
        Sealed messages are opened in custody; plain JSON (the web client's apps) is shown as \
        plain and unsealed; anything else as opaque with its size. Nothing is rendered as HTML \
        or run. Marked messages ('inbox lane mark') are the server's processed ones, for the web \
        client too.
        """,
        arguments: [vaultArgument],
        options: VaultCommands.unlockOptions + [remoteOption],
        secretInputs: UnlockOptions.secretInputs,
        examples: [CommandExample("sitekeep inbox lane list notes --passphrase-file pass.txt", "what agents sent")]
    ) { inv in
        // Run in the daemon: its lane check first, so what is new is notified once (and not again).
        _ = try VaultSyncCommands.daemonSync(inv)?.lanes?.check()
        let p = try pending(inv)
        let byID = Dictionary(p.entries.map { ($0.id, $0) }, uniquingKeysWith: { a, _ in a })
        let rows = p.messages.map { describe($0, byID[$0.id], content: LaneContent.read($0.bytes, keys: p.keys), labels: p.labels) }
        inv.emit(.array(rows)) {
            rows.isEmpty ? "No unread lane messages." :
            Table(headers: ["ID", "SENDER", "KIND", "TITLE"], rows: rows.map {
                [$0["id"]?.stringValue ?? "", DisplayText.escaped($0["sender"]?.stringValue ?? ""), $0["kind"]?.stringValue ?? "",
                 DisplayText.escaped($0["title"]?.stringValue ?? "(\($0["size"]?.intValue ?? 0) bytes)")]
            }).render { inv.style($0, .bold) }
        }
    }

    static let laneShow = CommandSpec(
        path: ["inbox", "lane", "show"],
        summary: "Show one lane message as text (never rendered or run)",
        arguments: [vaultArgument, ArgumentSpec("ID", "the message id from 'inbox lane list'")],
        options: VaultCommands.unlockOptions + [remoteOption],
        secretInputs: UnlockOptions.secretInputs,
        examples: [CommandExample("sitekeep inbox lane show notes 1796666150730_e0aa44a4fdd6cb51f9ad89cc.enc --passphrase-file pass.txt", "read one")]
    ) { inv in
        let id = try inv.requiredArgument("ID")
        guard AppendLane.isMessageID(id) else { throw AppendLaneError.invalidMessageID(id) }
        let p = try pending(inv)
        guard let m = p.messages.first(where: { $0.id == id }) else {
            throw CommandFailure("no unread lane message \(id)", remedy: "see 'sitekeep inbox lane list'", code: "not_found")
        }
        let content = LaneContent.read(m.bytes, keys: p.keys)
        var out = describe(m, p.entries.first { $0.id == id }, content: content, labels: p.labels)
        var text: String
        switch content {
        case .sealed(let e):
            if case .object(var members) = out {
                members.append(JSONMember(key: "body", value: .string(e.body)))
                members.append(JSONMember(key: "links", value: .array(e.links.map { .string($0) })))
                members.append(JSONMember(key: "attachments", value: .array(e.attachments.map { .object([JSONMember(key: "name", value: .string($0.name)), JSONMember(key: "size", value: .int(Int64($0.bytes.count)))]) })))
                out = .object(members)
            }
            text = "\(e.title)\nfrom \(e.from)\n\n\(e.body ?? "")" + e.links.map { "\nlink: \($0)" }.joined() + e.attachments.map { "\nattachment: \($0.name) (\($0.bytes.count) bytes)" }.joined()
        case .plain(let doc):
            if case .object(var members) = out { members.append(JSONMember(key: "json", value: doc)); out = .object(members) }
            text = "plain JSON (unsealed: the server could read it)\n" + JSONSerializer.string(doc, style: .pretty)
        case .opaque(let size):
            text = "opaque: \(size) bytes this vault's lane key does not open, and not JSON"
        }
        // Text an agent wrote, shown with its hidden characters escaped, line by line.
        inv.emit(out) { text.split(separator: "\n", omittingEmptySubsequences: false).map { DisplayText.escaped(String($0), limit: nil) }.joined(separator: "\n") }
    }

    static let laneMark = CommandSpec(
        path: ["inbox", "lane", "mark"],
        summary: "Mark lane messages read (the server's mark-processed: the web client agrees)",
        arguments: [vaultArgument, ArgumentSpec("ID", "a message id, or 'all'")],
        options: VaultCommands.unlockOptions + [remoteOption, .flag("--purge", "delete them from the server once marked")],
        secretInputs: UnlockOptions.secretInputs,
        examples: [CommandExample("sitekeep inbox lane mark notes all --passphrase-file pass.txt", "everything read")]
    ) { inv in
        let id = try inv.requiredArgument("ID")
        if id != "all", !AppendLane.isMessageID(id) { throw AppendLaneError.invalidMessageID(id) }
        let vault = try inv.requiredArgument("VAULT")
        let lane = try service(inv).lane(vault: vault, remote: inv.option("--remote")).lane
        let entries = try lane.listAll().filter { id == "all" || $0.id == id }
        guard !entries.isEmpty || id == "all" else { throw CommandFailure("no unread lane message \(id)", remedy: "see 'sitekeep inbox lane list'", code: "not_found") }
        var moved: [String] = []
        for (inbox, group) in Dictionary(grouping: entries, by: \.inbox) {
            for start in stride(from: 0, to: group.count, by: AppendLane.maxBatch) {
                let done = try lane.markProcessed(inbox: inbox, ids: group[start..<min(start + AppendLane.maxBatch, group.count)].map(\.id)).moved
                if inv.flag("--purge"), !done.isEmpty { _ = try lane.purge(.processed, inbox: inbox, ids: done) }
                moved += done
            }
        }
        inv.emit(.object([JSONMember(key: "marked", value: .array(moved.sorted().map { .string($0) }))])) { "Marked \(moved.count) read." }
    }

    static let lanePurge = CommandSpec(
        path: ["inbox", "lane", "purge"],
        summary: "Delete a vault's read (processed) lane messages from the server (tokens with unread ones)",
        arguments: [vaultArgument],
        options: VaultCommands.unlockOptions + [remoteOption],
        secretInputs: UnlockOptions.secretInputs,
        examples: [CommandExample("sitekeep inbox lane purge notes --passphrase-file pass.txt", "drop what was read")]
    ) { inv in
        let vault = try inv.requiredArgument("VAULT")
        let lane = try service(inv).lane(vault: vault, remote: inv.option("--remote")).lane
        // A token folder is named by the token itself, which SiteKeep keeps nowhere: the folders
        // are those a pending message names ('inbox lane mark --purge' deletes as it marks).
        let folders = Set(try lane.listAll().map(\.inbox))
        var purged = 0
        for f in folders.sorted() { purged += try lane.purge(.processed, inbox: f, ids: nil).purged.count }
        inv.emit(.object([JSONMember(key: "purged", value: .int(Int64(purged)))])) { "Purged \(purged) read message\(purged == 1 ? "" : "s")." }
    }
}
