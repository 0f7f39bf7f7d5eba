import SiteKeepNames
public import SiteKeepCrypto
internal import SiteKeepJSON
public import SiteKeepFIDO2

/// Public facts of one version of a signing key.
public struct SigningKeyVersionInfo: Sendable, Equatable {
    /// The version number, from 1.
    public let version: Int
    /// Creation time, seconds since the Unix epoch.
    public let created: Int64
    /// The public key, standard base64 (32 raw bytes for Ed25519, SPKI DER for P-256).
    public let publicKey: String
    /// The public key as a SubjectPublicKeyInfo PEM (both algorithms; nil only for a damaged record).
    public let publicKeyPEM: String?
    /// `sha256:` and the first 16 hex characters of SHA-256 of the public key bytes.
    public let fingerprint: String
    /// Whether this version signs (only the newest does; older ones verify only).
    public let canSign: Bool
}

/// A signature by a team key, with what made it. No key material.
public struct TeamSignature: Sendable, Equatable {
    /// The key's id.
    public let keyID: String
    /// The version that signed (the current one).
    public let version: Int
    /// The algorithm of that version.
    public let algorithm: SigningAlgorithm
    /// The signature: 64 bytes, Ed25519 or raw `r || s` for P-256.
    public let signature: [UInt8]
    /// The public key of that version (raw: 32 bytes Ed25519, 65 bytes uncompressed P-256), so
    /// a caller that wraps the signature (an SSHSIG) needs no second look at the key.
    public let publicKey: [UInt8]
}

/// Public facts of a team key or the device key (what `sitekeep team list` prints).
public struct SigningKeyInfo: Sendable, Equatable {
    /// The key's id.
    public let id: String
    /// Its display name.
    public let name: String
    /// Its algorithm.
    public let algorithm: SigningAlgorithm
    /// The current (signing) version.
    public let version: Int
    /// Creation time of the first version, seconds since the Unix epoch.
    public let created: Int64
    /// Every version, oldest first.
    public let versions: [SigningKeyVersionInfo]
    /// Whether and for what the key is offered over the SSH agent socket (nil: not offered).
    public let ssh: SSHAgentPolicy?
    /// The security-key credential whose touch approves each use of the key (`sitekeep team
    /// presence ID fido2`); nil when the presence prompt does.
    public let touch: FIDO2Credential?

    /// The current version's public key (base64).
    public var publicKey: String { versions.last?.publicKey ?? "" }
    /// The current version's fingerprint.
    public var fingerprint: String { versions.last?.fingerprint ?? "" }

    /// `sha256:<first 16 hex of SHA-256(publicKey)>`.
    public static func fingerprint(of publicKey: [UInt8]) -> String {
        "sha256:" + String(Hex.encode(SHA256.hash(publicKey)).prefix(16))
    }
}

/// Private key material to import as a team key. Noncopyable: the bytes stay in guarded memory.
public enum TeamKeyMaterial: ~Copyable {
    /// A 32-byte Ed25519 seed.
    case ed25519Seed(SecretBytes)
    /// A P-256 private key as PKCS#8, PEM or DER.
    case p256PKCS8(SecretBytes)
    /// A P-256 private scalar, 32 big-endian bytes (from an OpenSSH key file).
    case p256Scalar(SecretBytes)

    /// Parses a web link of the form `https://host/path#key=<base64url>` carrying a 32-byte
    /// Ed25519 seed.
    ///
    /// Strict: the key must be in the fragment (never the query, which servers log), exactly one
    /// `key=` parameter, base64url without padding, exactly 43 characters (32 bytes). Errors
    /// never quote the key.
    /// - Throws: ``CustodyError/invalidKeyLink(_:)``.
    public static func webLink(_ link: String) throws(CustodyError) -> TeamKeyMaterial {
        let text = link.trimmingSpaces()
        guard text.utf8.count <= 8192 else { throw .invalidKeyLink("the link is longer than 8192 bytes") }
        guard !text.unicodeScalars.contains(where: { $0.value <= 0x20 || $0.value == 0x7f }) else {
            throw .invalidKeyLink("the link contains spaces or control characters")
        }
        let hashes = text.utf8.filter { $0 == 0x23 }.count
        guard hashes == 1, let hashIndex = text.firstIndex(of: "#") else {
            throw .invalidKeyLink(hashes == 0 ? "it has no '#' fragment; the key must follow '#key='" : "it has more than one '#'")
        }
        let beforeFragment = text[..<hashIndex]
        if let q = beforeFragment.firstIndex(of: "?"),
           beforeFragment[beforeFragment.index(after: q)...].split(separator: "&").contains(where: { $0.hasPrefix("key=") }) {
            throw .invalidKeyLink("the key is in the query string, where servers log it; only a '#key=' fragment is accepted")
        }
        let params = text[text.index(after: hashIndex)...].split(separator: "&", omittingEmptySubsequences: false)
        let keyParams = params.filter { $0.hasPrefix("key=") }
        guard keyParams.count == 1 else {
            throw .invalidKeyLink(keyParams.isEmpty ? "the fragment has no 'key=' parameter" : "the fragment has more than one 'key=' parameter")
        }
        let value = keyParams[0].dropFirst(4)
        guard !value.contains("=") else { throw .invalidKeyLink("the key has '=' padding; base64url without padding is expected") }
        guard value.utf8.allSatisfy({ b in
            (0x41...0x5a).contains(b) || (0x61...0x7a).contains(b) || (0x30...0x39).contains(b) || b == 0x2d || b == 0x5f
        }) else {
            throw .invalidKeyLink("the key contains characters outside base64url (A-Z a-z 0-9 - _)")
        }
        guard value.utf8.count == 43 else {
            throw .invalidKeyLink("the key is \(value.utf8.count) characters; a 32-byte key is exactly 43")
        }
        var bytes: [UInt8]
        do { bytes = try Base64.decode(String(value), variant: .urlSafeNoPadding) } catch {
            throw .invalidKeyLink("the key is not valid base64url")
        }
        guard bytes.count == Ed25519.seedByteCount else {
            SecureMemory.zero(&bytes)
            throw .invalidKeyLink("the key decodes to \(bytes.count) bytes, not 32")
        }
        do { return .ed25519Seed(try SecretBytes(consumingAndZeroing: &bytes)) } catch { throw .crypto(error) }
    }

    /// Recognises the contents of a key file: PEM (`-----BEGIN PRIVATE KEY-----`), DER PKCS#8,
    /// a `#key=` link, or an Ed25519 seed as 32 raw bytes, 64 hex characters or 43 base64url
    /// characters.
    /// - Throws: ``CustodyError/invalidKeyMaterial(_:)`` (never quoting the bytes).
    public static func detect(_ contents: borrowing SecretBytes) throws(CustodyError) -> TeamKeyMaterial {
        enum Found { case pem, der, link, rawSeed, hexSeed, base64Seed, none }
        let found: Found = contents.withUnsafeBytes { raw in
            if raw.count == 32 && !raw.allSatisfy({ (0x21...0x7e).contains($0) }) { return .rawSeed }
            var start = 0, end = raw.count
            while start < end, [0x20, 0x0a, 0x0d, 0x09].contains(raw[start]) { start += 1 }
            while end > start, [0x20, 0x0a, 0x0d, 0x09].contains(raw[end - 1]) { end -= 1 }
            let body = UnsafeRawBufferPointer(rebasing: raw[start..<end])
            if body.starts(with: Array("-----BEGIN".utf8)) { return .pem }
            if body.first == 0x30, body.count > 64 { return .der }
            if body.contains(0x23) { return .link }
            let isHex = body.allSatisfy { (0x30...0x39).contains($0) || (0x61...0x66).contains($0) || (0x41...0x46).contains($0) }
            if body.count == 64, isHex { return .hexSeed }
            let isB64u = body.allSatisfy { (0x41...0x5a).contains($0) || (0x61...0x7a).contains($0) || (0x30...0x39).contains($0) || $0 == 0x2d || $0 == 0x5f }
            if body.count == 43, isB64u { return .base64Seed }
            if raw.count == 32 { return .rawSeed }
            return .none
        }
        do {
            switch found {
            case .pem, .der:
                return .p256PKCS8(try contents.duplicate())
            case .rawSeed:
                return .ed25519Seed(try contents.duplicate())
            case .link:
                let text = contents.withUnsafeBytes { String(decoding: $0, as: UTF8.self) }
                return try webLink(text)
            case .hexSeed, .base64Seed:
                var bytes: [UInt8] = try contents.withUnsafeBytes { (raw: UnsafeRawBufferPointer) throws(CryptoError) -> [UInt8] in
                    var text = String(decoding: raw, as: UTF8.self).trimmingSpaces()
                    defer { text = "" }
                    return found == .hexSeed ? try Hex.decode(text.lowercased()) : try Base64.decode(text, variant: .urlSafeNoPadding)
                }
                guard bytes.count == 32 else { SecureMemory.zero(&bytes); throw CustodyError.invalidKeyMaterial("an Ed25519 seed is 32 bytes") }
                return .ed25519Seed(try SecretBytes(consumingAndZeroing: &bytes))
            case .none:
                throw CustodyError.invalidKeyMaterial("not a PKCS#8 P-256 key (PEM or DER), a '#key=' link, or a 32-byte Ed25519 seed (raw, hex or base64url)")
            }
        } catch let e as CustodyError { throw e } catch let e as CryptoError { throw .crypto(e) } catch {
            throw .invalidKeyMaterial("unreadable key file")
        }
    }
}

/// A stored team or device key: public facts in the clear, each version's private key wrapped
/// under HKDF(master, "team:<id>") or HKDF(master, "device"), its AD binding store, kind, id,
/// version, algorithm and public key.
struct KeyRecord: Equatable {
    var format: Int
    var id: String
    var name: String
    var algorithm: SigningAlgorithm
    var versions: [Version]
    /// Absent in records written before SSH agent support, and when SSH use is off.
    var ssh: SSHAgentPolicy? = nil
    /// The security-key credential a touch of which approves each use; absent when the presence
    /// prompt does (and in every record written before it existed).
    var touch: FIDO2Credential? = nil
    /// A key added through the ssh-agent socket with `ssh-add -c`: each use is asked, none is
    /// kept. Bound in the versions' associated data; absent (false) everywhere else.
    var confirm: Bool = false

    struct Version: Equatable {
        var version: Int
        var created: Int64
        var publicKey: String
        var wrapped: String
    }

    static let maximumBlobCount = 256 * 1024
    static let maximumVersions = 1000

    /// The record as stored: compact JSON, keys sorted (the shape `JSONEncoder` with
    /// `.sortedKeys` wrote before, which every build reads), `ssh` left out when nil.
    func encoded() -> [UInt8] {
        var members: [JSONMember] = [
            JSONMember(key: "algorithm", value: .string(algorithm.rawValue)),
            JSONMember(key: "format", value: .integer(format)),
            JSONMember(key: "id", value: .string(id)),
            JSONMember(key: "name", value: .string(name)),
        ]
        if let ssh {
            var policy: [JSONMember] = [JSONMember(key: "enabled", value: .bool(ssh.enabled)), JSONMember(key: "login", value: .bool(ssh.login))]
            if let namespaces = ssh.namespaces { policy.append(JSONMember(key: "namespaces", value: .array(namespaces.map { .string($0) }))) }
            policy.append(JSONMember(key: "otherData", value: .bool(ssh.otherData)))
            members.append(JSONMember(key: "ssh", value: .object(policy)))
        }
        if confirm { members.insert(JSONMember(key: "confirm", value: .bool(true)), at: 1) }
        if let touch {
            members.append(JSONMember(key: "touch", value: .object([
                JSONMember(key: "credentialID", value: .string(Base64.encode(touch.id, variant: .urlSafeNoPadding))),
                JSONMember(key: "publicKey", value: .string(Base64.encode(touch.publicKey, variant: .urlSafeNoPadding))),
                JSONMember(key: "rp", value: .string(touch.relyingPartyID)),
            ])))
        }
        members.append(JSONMember(key: "versions", value: .array(versions.map { v in
            .object([JSONMember(key: "created", value: .int(v.created)), JSONMember(key: "publicKey", value: .string(v.publicKey)),
                     JSONMember(key: "version", value: .integer(v.version)), JSONMember(key: "wrapped", value: .string(v.wrapped))])
        })))
        return JSONSerializer.bytes(.object(members))
    }

    /// Reads a stored record's JSON: every field `encoded()` writes, with its type; members it
    /// does not know are ignored (as `JSONDecoder` did). Nil when the bytes are not such a record.
    static func decode(_ blob: [UInt8]) -> KeyRecord? {
        do {
            var r = try JSONObjectReader(JSONParser.parse(blob), path: "")
            guard let format = Int(exactly: try r.int("format")),
                  let algorithm = SigningAlgorithm(rawValue: try r.string("algorithm")) else { return nil }
            let id = try r.string("id"), name = try r.string("name")
            var versions: [Version] = []
            for item in try r.array("versions") {
                var v = try JSONObjectReader(item, path: "versions")
                guard let number = Int(exactly: try v.int("version")) else { return nil }
                versions.append(Version(version: number, created: try v.int("created"),
                                        publicKey: try v.string("publicKey"), wrapped: try v.string("wrapped")))
            }
            var ssh: SSHAgentPolicy? = nil
            if let value = r.optional("ssh"), !value.isNull {
                var p = try JSONObjectReader(value, path: "ssh")
                var namespaces: [String]? = nil
                if let list = p.optional("namespaces"), !list.isNull {
                    guard let items = list.arrayValue else { return nil }
                    namespaces = try items.map { item throws(JSONShapeError) in
                        guard let s = item.stringValue else { throw .wrongType(path: "ssh.namespaces", expected: "a string", found: item.typeName) }
                        return s
                    }
                }
                ssh = SSHAgentPolicy(enabled: try p.bool("enabled"), login: try p.bool("login"), namespaces: namespaces,
                                     otherData: try p.bool("otherData"))
            }
            var touch: FIDO2Credential? = nil
            if let value = r.optional("touch"), !value.isNull {
                var t = try JSONObjectReader(value, path: "touch")
                guard let credentialID = try? Base64.decode(try t.string("credentialID"), variant: .urlSafeNoPadding),
                      (1...FIDO2Credential.maximumIDLength).contains(credentialID.count),
                      let publicKey = try? Base64.decode(try t.string("publicKey"), variant: .urlSafeNoPadding), publicKey.count == 64
                else { return nil }
                let rp = try t.string("rp")
                guard (1...253).contains(rp.utf8.count) else { return nil }
                touch = FIDO2Credential(relyingPartyID: rp, id: credentialID, publicKey: publicKey)
            }
            var confirm = false
            if let value = r.optional("confirm"), !value.isNull {
                guard let flag = value.boolValue else { return nil }
                confirm = flag
            }
            return KeyRecord(format: format, id: id, name: name, algorithm: algorithm, versions: versions, ssh: ssh, touch: touch, confirm: confirm)
        } catch {
            return nil
        }
    }

    static func parse(_ blob: [UInt8], kind: SiteKeepNames.ItemKind, id: String) throws(CustodyError) -> KeyRecord {
        guard blob.count <= maximumBlobCount else { throw .damagedItem("\(kind)/\(id) is larger than \(maximumBlobCount) bytes") }
        guard let r = decode(blob) else {
            throw .damagedItem("\(kind)/\(id) is not a SiteKeep key record")
        }
        guard r.format == 1 else { throw .damagedItem("\(kind)/\(id) has unsupported format \(r.format); upgrade SiteKeep") }
        guard r.id == id else { throw .damagedItem("\(kind)/\(id) names another key") }
        guard !r.versions.isEmpty, r.versions.count <= maximumVersions,
              r.versions.enumerated().allSatisfy({ $0.element.version == $0.offset + 1 }) else {
            throw .damagedItem("\(kind)/\(id) has a bad version list")
        }
        return r
    }

    func info() -> SigningKeyInfo {
        let current = versions.count
        return SigningKeyInfo(
            id: id, name: name, algorithm: algorithm, version: current, created: versions.first?.created ?? 0,
            versions: versions.map { v in
                let pk = (try? Base64.decode(v.publicKey)) ?? []
                return SigningKeyVersionInfo(
                    version: v.version, created: v.created, publicKey: v.publicKey,
                    publicKeyPEM: Self.pem(pk, algorithm: algorithm),
                    fingerprint: SigningKeyInfo.fingerprint(of: pk), canSign: v.version == current)
            }, ssh: ssh, touch: touch)
    }

    static func pem(_ publicKey: [UInt8], algorithm: SigningAlgorithm) -> String? {
        switch algorithm {
        case .ed25519: (try? Ed25519.PublicKey(rawRepresentation: publicKey))?.pemRepresentation
        case .p256: (try? P256.Signing.PublicKey(derRepresentation: publicKey))?.pemRepresentation
        }
    }

    /// A version's associated data. A key that needs a touch has its credential in it too, and a
    /// key offered over SSH its SSH policy, so a record whose touch requirement or SSH policy was
    /// added, changed or taken away outside custody (by whoever can write the keyring) does not
    /// unwrap with it; a key with neither has the bytes it always had. A policy that is off
    /// allows nothing and is not bound.
    static func associatedData(store: String, kind: SiteKeepNames.ItemKind, id: String, version: Int, algorithm: SigningAlgorithm,
                               publicKey: String, touch: FIDO2Credential?, ssh: SSHAgentPolicy? = nil, confirm: Bool = false) -> [UInt8] {
        var ad = Array("sitekeep.key.v1\0\(store)\0\(kind.rawValue)\0\(id)\0\(version)\0\(algorithm.rawValue)\0\(publicKey)".utf8)
        if let touch {
            ad += Array("\0touch\0\(touch.relyingPartyID)\0".utf8) + Array(Base64.encode(touch.id, variant: .urlSafeNoPadding).utf8)
                + [0] + Array(Base64.encode(touch.publicKey, variant: .urlSafeNoPadding).utf8)
        }
        if let ssh, ssh.enabled {
            // Each namespace with its length: no two policies have the same bytes.
            let namespaces = ssh.namespaces.map { list in list.map { "\($0.utf8.count):\($0)" }.joined() } ?? "any"
            ad += Array("\0ssh\0login=\(ssh.login ? 1 : 0)\0otherData=\(ssh.otherData ? 1 : 0)\0namespaces=\(ssh.namespaces?.count ?? -1)\0\(namespaces)".utf8)
        }
        if confirm { ad += Array("\0confirm".utf8) }
        return ad
    }

    /// The SSH policy the versions' associated data would bind: the record's when it is on.
    var sshToBind: SSHAgentPolicy? { ssh?.enabled == true ? ssh : nil }
}
