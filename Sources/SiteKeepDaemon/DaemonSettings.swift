#if canImport(Glibc)
@preconcurrency import Glibc
#endif
import CLinux
import SiteKeepCrypto
public import SiteKeepCustody
import SiteKeepJSON
import SiteKeepSystem

/// The daemon's settings, kept with the store (`daemon.json` in the store's folder), so every
/// way a daemon starts (`sitekeep unlock`'s autostart, `sitekeep serve`, the systemd unit) runs
/// the same daemon. A command-line option overrides a setting for that run only.
///
/// The file is one JSON object of strings, written atomically (temporary file, fsync, rename,
/// fsync of the folder) with mode 0600; a store without it has the defaults. It is refused, naming
/// the fix, when it is a symbolic link, not a regular file, not the user's own or open to others,
/// or holds an unknown key or a bad value: a daemon never starts on settings it did not understand.
///
/// A value that widens trust beyond its default (``needsTag(_:_:)``: the agent on, its socket or
/// the prompt changed, lock-on-session-lock off, a longer idle lock) applies only with custody's
/// record tag over it (``taggedBytes(_:_:)``, kept in the file's `tags` member), which `config
/// set` writes after the approval the change needs: ``authenticated(_:)`` drops any other. A
/// value that only narrows needs none. While locked no tag can be checked, so a daemon starts
/// with the values that need none and takes the tagged ones at its first unlock.
public struct DaemonSettings: Sendable, Equatable {
    /// The file's name in the store's folder.
    public static let fileName = "daemon.json"
    /// The largest file read.
    static let maximumBytes = 16 << 10

    /// A setting.
    public enum Key: String, Sendable, CaseIterable, Comparable {
        /// `on` or `off`: serve the team keys over the ssh-agent protocol.
        case sshAgent = "ssh-agent"
        /// The agent socket's absolute path; unset: `$SITEKEEP_AGENT_SOCK`, else `$XDG_RUNTIME_DIR/sitekeep/agent.sock`.
        case sshAgentSocket = "ssh-agent-socket"
        /// Another agent's socket whose keys the agent lists after its own and uses through its
        /// prompt and audit: an absolute path, or `off`; unset: none.
        case sshAgentUpstream = "ssh-agent-upstream"
        /// Lock after this long unused: `90s`, `15m`, `2h`, `1d`.
        case idleLock = "idle-lock"
        /// `on` or `off`: lock when the login session locks.
        case lockOnSessionLock = "lock-on-session-lock"
        /// How often vaults with a remote sync while unlocked: `300`, `5m`, `0` (never).
        case syncInterval = "sync-interval"
        /// `on` or `off`: treat the network as metered (no background sync).
        case metered
        /// How a key use is approved: `auto`, `pinentry`, `pinentry:/ABS/PATH`, `terminal`, `askpass:/ABS/PATH`.
        case prompt
        /// Where TPM 2.0 slots reach the TPM, a tpm2-tss TCTI: `device:/dev/tpmrm0`, `swtpm:host=…,port=…`.
        case tpmTCTI = "tpm-tcti"
        /// The FIDO2 security key to use, a libfido2 device path such as `/dev/hidraw3`.
        case fido2Device = "fido2-device"
        /// `on`, `off`, `passphrase`, `fido2` or `tpm2`: a key use while locked asks for the
        /// unlock on the prompt (`on`: the passphrase, else a touch of the security key or the
        /// TPM, as the store's slots allow; a kind's name: that one only; `off`: it is refused,
        /// naming `sitekeep unlock`).
        case unlockOnUse = "unlock-on-use"

        public static func < (a: Key, b: Key) -> Bool {
            allCases.firstIndex(of: a)! < allCases.firstIndex(of: b)!
        }

        /// The value when nothing is stored.
        public var defaultValue: String {
            switch self {
            case .sshAgent: "off"
            case .sshAgentSocket: ""
            case .sshAgentUpstream: ""
            case .idleLock: "15m"
            case .lockOnSessionLock: "on"
            case .syncInterval: "300"
            case .metered: "off"
            case .prompt: "auto"
            case .tpmTCTI, .fido2Device: ""
            case .unlockOnUse: "on"
            }
        }

        /// The values it takes, for messages and `config`'s help.
        public var allowed: String {
            switch self {
            case .sshAgent, .lockOnSessionLock, .metered: "on or off"
            case .unlockOnUse: "on (the passphrase, else the security key or the TPM), off, or one way only: passphrase, fido2 or tpm2"
            case .sshAgentSocket: "an absolute path to a socket in a folder only you can enter (unset: $SITEKEEP_AGENT_SOCK, else $XDG_RUNTIME_DIR/sitekeep/agent.sock)"
            case .sshAgentUpstream: "the absolute path of another agent's socket (its SSH_AUTH_SOCK), or off (unset: none)"
            case .idleLock: "a duration from 1s to 1d such as 90s, 15m or 2h (a bare number is minutes)"
            case .syncInterval: "seconds from 0 (never) to 86400, or a duration such as 5m or 1h"
            case .prompt: "auto, pinentry, pinentry:/ABSOLUTE/PATH, terminal or askpass:/ABSOLUTE/PATH"
            case .tpmTCTI: "a tpm2-tss TCTI: device:/dev/tpmrm0, swtpm:host=127.0.0.1,port=2321, mssim:… or tabrmd:… (unset: $SITEKEEP_TPM_TCTI, else device:/dev/tpmrm0)"
            case .fido2Device: "the absolute path of a security key's device, such as /dev/hidraw3 (unset: $SITEKEEP_FIDO2_DEVICE, else the one plugged in)"
            }
        }

        /// Whether a change to `new` from `old` widens what can use or approve a key (and so
        /// needs the user's approval): turning the agent on or moving its socket, changing the
        /// prompt, no longer locking with the session, a longer idle lock. Narrowing is free.
        public func widensTrust(from old: String, to new: String) -> Bool {
            switch self {
            case .sshAgent: new == "on" && old != "on"
            case .sshAgentSocket, .prompt, .tpmTCTI, .fido2Device: new != old
            // Another agent's keys offered (and its answers returned) through SiteKeep's socket.
            case .sshAgentUpstream: new != old && new != "off" && !new.isEmpty
            case .lockOnSessionLock: new == "off" && old != "off"
            case .idleLock: (IdleLock.seconds(parsing: new) ?? 0) > (IdleLock.seconds(parsing: old) ?? 0)
            // The secret is still asked for, on the prompt only the holder of the secret chose.
            case .syncInterval, .metered, .unlockOnUse: false
            }
        }
    }

    /// The stored values (validated, in their normal form); a missing key has its default.
    public private(set) var stored: [Key: String] = [:]
    /// Custody's tags over stored values (``taggedBytes(_:_:)``), by key, as the file has them.
    public private(set) var tags: [Key: [UInt8]] = [:]
    /// The file's member holding ``tags`` (hex), beside the settings.
    static let tagsMember = "tags"

    public init() {}

    /// The value in force: the stored one, else the default.
    public subscript(key: Key) -> String { stored[key] ?? key.defaultValue }

    /// Stores `value` for `key` after ``normalize(_:_:)``.
    /// - Throws: ``DaemonError`` `bad_setting` naming the key and the values it takes.
    public mutating func set(_ key: Key, _ value: String) throws(DaemonError) {
        stored[key] = try Self.normalize(key, value)
        tags[key] = nil
    }

    /// Keeps custody's tag over the stored value of `key` (``taggedBytes(_:_:)``); nil drops it.
    public mutating func setTag(_ tag: [UInt8]?, for key: Key) { tags[key] = stored[key] == nil ? nil : tag }

    /// Forgets the stored value of `key` (its default applies again).
    public mutating func unset(_ key: Key) {
        stored[key] = nil
        tags[key] = nil
    }

    // MARK: Tags

    /// What a value's tag covers: a domain label, the key and the value.
    public static func taggedBytes(_ key: Key, _ value: String) -> [UInt8] {
        Array("sitekeep.daemon-setting.v1\0\(key.rawValue)\0\(value)".utf8)
    }

    /// Whether `value` for `key` applies only with a tag: it widens trust beyond the default.
    public static func needsTag(_ key: Key, _ value: String) -> Bool { key.widensTrust(from: key.defaultValue, to: value) }

    /// The settings that apply: every stored value that needs no tag, and those that do whose tag
    /// `check` accepts. `check` says whether a tag is custody's tag of the bytes, or nil when it
    /// cannot tell now (SiteKeep locked).
    /// - Returns: the settings, the keys dropped because their tag is missing or does not verify
    ///   (``ignoredMessage(_:)`` says why and the fix), and those dropped for now, not checked.
    public func authenticated(_ check: (_ tag: [UInt8], _ bytes: [UInt8]) -> Bool?) -> (settings: DaemonSettings, ignored: [Key], unchecked: [Key]) {
        var kept = self
        var ignored: [Key] = [], unchecked: [Key] = []
        for (key, value) in stored.sorted(by: { $0.key < $1.key }) where Self.needsTag(key, value) {
            switch tags[key].flatMap({ check($0, Self.taggedBytes(key, value)) }) {
            case true?: continue
            case nil where tags[key] != nil: unchecked.append(key)
            default: ignored.append(key)
            }
            kept.unset(key)
        }
        return (kept, ignored, unchecked)
    }

    /// The stored values that need a tag and carry none: ignored whatever the master key says
    /// (told without it, for `doctor` and a locked daemon's start).
    public var untagged: [Key] { stored.keys.filter { Self.needsTag($0, stored[$0] ?? "") && tags[$0] == nil }.sorted() }

    /// Why the stored value of `key` is ignored, and the fix (``authenticated(_:)``'s `ignored`).
    public func ignoredMessage(_ key: Key) -> String {
        let value = stored[key].map(Self.printable) ?? ""
        let why = tags[key] == nil ? "carries no tag (written by hand, or by a SiteKeep from before tags)" : "has a tag that does not verify (it was changed without this store's master key)"
        return "\(Self.fileName): \(key.rawValue) '\(value)' widens trust beyond its default and \(why), so it is ignored and the default "
            + "'\(key.defaultValue)' applies; if you want it, set it again with 'sitekeep config set \(key.rawValue) \(value)' (needs your approval), "
            + "else remove it with 'sitekeep config unset \(key.rawValue)'"
    }

    /// The key named `name`.
    /// - Throws: ``DaemonError`` `unknown_setting`, listing the settings there are.
    public static func key(_ name: String) throws(DaemonError) -> Key {
        guard let key = Key(rawValue: name) else {
            throw DaemonError("there is no setting '\(printable(name))'",
                              remedy: "the settings are " + Key.allCases.map(\.rawValue).joined(separator: ", ") + " ('sitekeep config' lists them)",
                              code: "unknown_setting")
        }
        return key
    }

    /// `value` in its normal form for `key` (`on`/`off`, durations as written, paths as given).
    /// - Throws: ``DaemonError`` `bad_setting` naming the key and what it takes.
    public static func normalize(_ key: Key, _ value: String) throws(DaemonError) -> String {
        func bad(_ why: String? = nil) -> DaemonError {
            DaemonError("\(key.rawValue) cannot be '\(printable(value))'\(why.map { ": " + $0 } ?? "")",
                        remedy: "\(key.rawValue) takes \(key.allowed)", code: "bad_setting")
        }
        switch key {
        case .unlockOnUse where ["passphrase", "fido2", "tpm2"].contains(value.lowercased()):
            return value.lowercased()
        case .sshAgent, .lockOnSessionLock, .metered, .unlockOnUse:
            switch value.lowercased() {
            case "on", "yes", "true", "1": return "on"
            case "off", "no", "false", "0": return "off"
            default: throw bad()
            }
        case .sshAgentSocket:
            guard value.hasPrefix("/"), !value.hasSuffix("/"), value.utf8.count < 108, isPrintable(value) else {
                throw bad(value.hasPrefix("/") ? "a socket path is at most 107 bytes of printable characters" : "it is not an absolute path")
            }
            return value
        case .sshAgentUpstream:
            if value.lowercased() == "off" { return "off" }
            guard value.hasPrefix("/"), !value.hasSuffix("/"), value.utf8.count < 108, isPrintable(value) else {
                throw bad(value.hasPrefix("/") ? "a socket path is at most 107 bytes of printable characters" : "it is neither off nor an absolute path")
            }
            return value
        case .idleLock:
            guard IdleLock.seconds(parsing: value) != nil else { throw bad() }
            return value
        case .syncInterval:
            guard let seconds = syncSeconds(value) else { throw bad() }
            return String(seconds)
        case .prompt:
            if value == "auto" || value == "pinentry" || value == "terminal" { return value }
            for form in ["pinentry:", "askpass:"] where value.hasPrefix(form) {
                let path = String(value.dropFirst(form.count))
                guard path.hasPrefix("/"), isPrintable(path), path.utf8.count <= 4096 else { throw bad("the program must be an absolute path") }
                return value
            }
            throw bad()
        case .tpmTCTI:
            // Only the TCTIs that reach a TPM: `cmd` (runs a program) and the rest are refused.
            let name = value.split(separator: ":", maxSplits: 1).first.map(String.init) ?? ""
            guard ["device", "swtpm", "mssim", "tabrmd"].contains(name) else { throw bad("the TCTI must be device, swtpm, mssim or tabrmd") }
            guard isPrintable(value), !value.contains(" "), value.utf8.count <= 1024 else { throw bad("it holds a space or an unprintable character") }
            return value
        case .fido2Device:
            guard value.hasPrefix("/"), !value.hasSuffix("/"), isPrintable(value), value.utf8.count <= 4096 else { throw bad("it is not an absolute path") }
            return value
        }
    }

    /// The device settings of the store in `home` (`tpm-tcti`, `fido2-device`) with their tags,
    /// for custody to read at each use (``CustodianConfiguration/deviceSettings``); none when the
    /// file cannot be read (a daemon or command never starts on such a file anyway).
    public static func devices(home: String) -> DeviceSettings {
        guard let loaded = try? load(home: home) else { return DeviceSettings() }
        func setting(_ key: Key) -> TaggedDeviceSetting? {
            guard let value = loaded.stored[key], let tag = loaded.tags[key] else { return nil }
            return TaggedDeviceSetting(value: value, tag: tag, taggedBytes: taggedBytes(key, value))
        }
        return DeviceSettings(tpmTCTI: setting(.tpmTCTI), fido2Device: setting(.fido2Device))
    }

    /// Seconds of a sync interval: a bare number of seconds (0: never), or a duration with a unit.
    public static func syncSeconds(_ text: String) -> Int? {
        if text == "off" { return 0 }
        if let n = Int(text), text.allSatisfy(\.isASCII) { return (0...86_400).contains(n) ? n : nil }
        return IdleLock.seconds(parsing: text)
    }

    /// The other agent's socket `value` of `ssh-agent-upstream` names, or nil: none (unset,
    /// `off`, or SiteKeep's own agent socket `own`, which would ask itself without end).
    public static func upstreamAgent(_ value: String, own: String?) -> String? {
        value.isEmpty || value == "off" || value == own ? nil : value
    }

    /// Where the agent listens when `ssh-agent-socket` is unset: `$SITEKEEP_AGENT_SOCK`, else
    /// `$XDG_RUNTIME_DIR/sitekeep/agent.sock` (the systemd unit's); nil when neither is set.
    public static func defaultAgentSocket(environment: [String: String]) -> String? {
        if let p = environment["SITEKEEP_AGENT_SOCK"], !p.isEmpty { return p }
        if let run = environment["XDG_RUNTIME_DIR"], !run.isEmpty { return run + "/sitekeep/agent.sock" }
        return nil
    }

    // MARK: The file

    /// The settings file of the store in `home`.
    public static func path(home: String) -> String { home + "/" + fileName }

    /// The settings stored with the store in `home`; the defaults when it has none.
    /// - Throws: ``DaemonError`` `bad_settings_file` (a link, not a regular file, not yours, open
    ///   to others, too large, not a JSON object of strings) or `unknown_setting`/`bad_setting`.
    public static func load(home: String) throws(DaemonError) -> DaemonSettings {
        let file = path(home: home)
        let bytes: [UInt8]
        do {
            guard let (fd, size) = try FileIO.openRegularFile(file) else { return DaemonSettings() }
            defer { close(fd) }
            var st = stat()
            guard fstat(fd, &st) == 0 else { throw damaged(file, "it cannot be inspected") }
            guard st.st_uid == geteuid() else {
                throw DaemonError("\(file) belongs to another user (uid \(st.st_uid)), so it was not read",
                                  remedy: "remove it and set the settings again with 'sitekeep config set'", code: "bad_settings_file")
            }
            guard st.st_mode & 0o022 == 0 else {
                throw DaemonError("\(file) can be written by other users (mode \(String(st.st_mode & 0o777, radix: 8))), so it was not read",
                                  remedy: "chmod 600 \(file), check its settings with 'sitekeep config', then start the daemon again", code: "bad_settings_file")
            }
            guard size <= maximumBytes else { throw damaged(file, "it is larger than \(maximumBytes) bytes") }
            bytes = try FileIO.readWhole(fd, size: size, path: file)
        } catch let e as DaemonError {
            throw e
        } catch {
            throw damaged(file, "\(error)")
        }
        guard let value = try? JSONParser.parse(bytes, limits: .message), let members = value.objectValue else {
            throw damaged(file, "it is not a JSON object")
        }
        var settings = DaemonSettings()
        var tagMembers: [JSONMember] = []
        for member in members {
            if member.key == tagsMember {
                guard let list = member.value.objectValue else { throw damaged(file, "its \(tagsMember) member is not a JSON object") }
                tagMembers = list
                continue
            }
            let key: Key
            do { key = try Self.key(member.key) } catch {
                throw DaemonError("\(file) holds an unknown setting '\(printable(member.key))'",
                                  remedy: "remove it with 'sitekeep config unset \(printable(member.key))' or by editing the file; the settings are "
                                      + Key.allCases.map(\.rawValue).joined(separator: ", "), code: "unknown_setting")
            }
            guard let text = member.value.stringValue else { throw damaged(file, "the value of \(key.rawValue) is not a string") }
            do { try settings.set(key, text) } catch {
                throw DaemonError("\(file): \(error.problem)", remedy: (error.remedy ?? "") + "; fix it with 'sitekeep config set \(key.rawValue) VALUE'", code: error.code)
            }
        }
        // A tag that is not hex, or names no stored value, is no tag: its value (if any) then
        // applies only if it needs none, as for any tag that does not verify.
        for member in tagMembers {
            guard let key = Key(rawValue: member.key), let text = member.value.stringValue, let tag = try? Hex.decode(text), tag.count == 32 else { continue }
            settings.setTag(tag, for: key)
        }
        return settings
    }

    /// Writes the stored values and their tags to the store in `home` (atomically, mode 0600); no
    /// stored value leaves an empty object.
    /// - Throws: ``DaemonError`` `io` naming the file.
    public func save(home: String) throws(DaemonError) {
        var members = stored.sorted { $0.key < $1.key }.map { JSONMember(key: $0.key.rawValue, value: .string($0.value)) }
        let kept = tags.filter { stored[$0.key] != nil }.sorted { $0.key < $1.key }
        if !kept.isEmpty {
            members.append(JSONMember(key: Self.tagsMember, value: .object(kept.map { JSONMember(key: $0.key.rawValue, value: .string(Hex.encode($0.value))) })))
        }
        let file = Self.path(home: home)
        do { try AtomicFile.replace(file, with: JSONSerializer.bytes(.object(members)) + [0x0a], mode: 0o600) } catch {
            throw DaemonError("the settings could not be saved: \(error)", remedy: "check that \(home) is yours and writable", code: "io")
        }
    }

    /// ``authenticated(_:)`` with custody's record tags: nothing can be checked while locked.
    public func authenticated(by custodian: Custodian) -> (settings: DaemonSettings, ignored: [Key], unchecked: [Key]) {
        authenticated { tag, bytes in
            custodian.isUnlocked ? try? custodian.isValidRecordTag(tag, for: bytes, purpose: .daemonSetting) : nil
        }
    }

    /// Custody's tag over `value` for `key`, for ``setTag(_:for:)``.
    /// - Throws: ``CustodyError/locked`` while locked.
    public static func tag(_ key: Key, _ value: String, by custodian: Custodian) throws(CustodyError) -> [UInt8] {
        try custodian.recordTag(for: taggedBytes(key, value), purpose: .daemonSetting)
    }

    private static func damaged(_ file: String, _ why: String) -> DaemonError {
        DaemonError("\(file) cannot be read as the daemon's settings: \(why)",
                    remedy: "remove it (the defaults then apply) and set what you need with 'sitekeep config set KEY VALUE'", code: "bad_settings_file")
    }

    private static func isPrintable(_ s: String) -> Bool {
        s.unicodeScalars.allSatisfy { $0.value >= 0x20 && $0.value != 0x7f }
    }

    /// Text for a message: printable characters only, at most 100 of them.
    static func printable(_ s: String) -> String {
        String(String.UnicodeScalarView(s.unicodeScalars.prefix(100).filter { $0.value >= 0x20 && $0.value != 0x7f }))
    }
}
