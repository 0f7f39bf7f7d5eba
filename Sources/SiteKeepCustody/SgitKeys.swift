public import SiteKeepCrypto

/// Why an sgit vault key or read key was refused. Messages name the problem and the fix and
/// never contain any part of the passphrase or key.
public enum SgitKeyError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The text is not `passphrase:vault_id` (optionally prefixed) nor `<64 hex>:vault_id`.
    case malformedKey(String)
    /// The vault id does not match `^[a-z0-9]{4,24}$`.
    case invalidVaultID
    /// Wrapped key material has the wrong size.
    case malformedWrappedKey(Int)
    /// A cryptographic primitive failed.
    case crypto(CryptoError)

    public var description: String {
        switch self {
        case .malformedKey(let why):
            "not an sgit vault key: \(why); give `passphrase:vault_id` (as `sgit init` prints it, with or without the sgit_private_vault_ prefix) or a read key `<64 hex>:vault_id`"
        case .invalidVaultID:
            "the vault id (the part after the last ':') must be 4 to 24 lowercase letters or digits; check the key was copied whole"
        case .malformedWrappedKey(let count):
            "stored vault key material has \(count) bytes, expected 32 or 64; remove the vault and add it again"
        case .crypto(let error):
            "could not derive the vault keys: \(error)"
        }
    }
}

/// The keys of one sgit vault, held by custody.
///
/// The vault layer sees only ``readKey`` (a ``SymmetricKeyHandle``: AES-GCM open/seal and HMAC)
/// and the optional ``writeKey``; no key byte ever leaves this module. The PBKDF2 derivation
/// (600,000 iterations, twice) runs once, in ``derive(fromKeyText:)``; afterwards the derived
/// keys are exported for wrapping (``exportForWrapping()``) and re-imported without PBKDF2
/// (``importWrapped(_:vaultID:lockScope:since:)``).
///
/// The keys belong to a ``LockScope``: the custodian's when custody unwrapped them, so a vault
/// opened with them keeps them and its object cache in that scope and is wiped on lock.
public final class SgitKeys: Sendable {
    /// The PBKDF2 iteration count of the sgit format (SGIT-FORMAT.md §1.2).
    public static let pbkdf2Iterations = 600_000

    /// The vault id (`^[a-z0-9]{4,24}$`), public.
    public let vaultID: String
    /// The read key: decrypts every object, derives file ids and deterministic IVs.
    public let readKey: SymmetricKeyHandle
    /// The write key (a server credential only); nil for read-key-only input.
    public let writeKey: SymmetricKeyHandle?

    // Copies kept for ``exportForWrapping()``; the handles cannot hand their bytes back.
    private let readSecret: LockedSecret
    private let writeSecret: LockedSecret?

    /// Whether only the read key is known (a read-only vault).
    public var isReadOnly: Bool { writeKey == nil }

    /// The scope whose clearing (lock) wipes whatever holds these keys or what they decrypt.
    public let lockScope: LockScope
    /// The scope's generation when the keys were obtained: if the scope was cleared since,
    /// they came from before a lock and nothing may keep them.
    public let lockGeneration: LockScope.Generation

    private init(vaultID: String, read: consuming SecretBytes, write: consuming SecretBytes?,
                 lockScope: LockScope, since generation: LockScope.Generation?) throws(CryptoError) {
        self.lockScope = lockScope
        lockGeneration = generation ?? lockScope.generation
        self.vaultID = vaultID
        readKey = try SymmetricKeyHandle(taking: read.duplicate())
        readSecret = LockedSecret(read)
        switch consume write {
        case .some(let w):
            writeKey = try SymmetricKeyHandle(taking: w.duplicate())
            writeSecret = LockedSecret(w)
        case .none:
            writeKey = nil
            writeSecret = nil
        }
    }

    /// What kind of key text was given.
    enum Parsed: ~Copyable {
        case vaultKey(passphrase: SecretBytes, vaultID: String)
        case readKey(key: SecretBytes, vaultID: String)
    }

    // The order of SGIT-FORMAT.md §1.1's table.
    static let allPrefixes = ["sgit_private_vault_", "sgit_private_read_", "sgit_public_read_", "sgit_vk1_", "sgit_rk1_"]

    static func isValidVaultID(_ bytes: some Collection<UInt8>) -> Bool {
        (4...24).contains(bytes.count) && bytes.allSatisfy { (0x61...0x7a).contains($0) || (0x30...0x39).contains($0) }
    }

    private static func isLowerHex(_ b: UInt8) -> Bool { (0x30...0x39).contains(b) || (0x61...0x66).contains(b) }
    /// Python's `str.isspace` (what sgit's `.strip()` removes), for one code point.
    static func isPythonSpace(_ v: UInt32) -> Bool {
        switch v {
        case 0x09...0x0d, 0x1c...0x20, 0x85, 0xa0, 0x1680, 0x2000...0x200a, 0x2028, 0x2029, 0x202f, 0x205f, 0x3000: true
        default: false
        }
    }

    /// The code point of the UTF-8 sequence at `i` (nil if malformed) and its length.
    private static func scalar(in b: UnsafeBufferPointer<UInt8>, at i: Int, end: Int) -> (UInt32, Int)? {
        let c = b[i]
        let (len, initial): (Int, UInt32) = c < 0x80 ? (1, UInt32(c)) : c >= 0xf0 ? (4, UInt32(c & 0x07))
            : c >= 0xe0 ? (3, UInt32(c & 0x0f)) : c >= 0xc0 ? (2, UInt32(c & 0x1f)) : (0, 0)
        guard len > 0, i + len <= end else { return nil }
        var v = initial
        for k in 1..<len {
            guard b[i + k] & 0xc0 == 0x80 else { return nil }
            v = v << 6 | UInt32(b[i + k] & 0x3f)
        }
        return (v, len)
    }

    /// Parses key text (SGIT-FORMAT.md §1.1) without copying the secret part out of guarded memory.
    static func parse(_ text: borrowing SecretBytes) throws(SgitKeyError) -> Parsed {
        try text.withUnsafeBytes { (raw: UnsafeRawBufferPointer) throws(SgitKeyError) -> Parsed in
            let all = raw.bindMemory(to: UInt8.self)
            var lo = 0, hi = all.count
            // Trim as Python's str.strip() does (Unicode whitespace, e.g. U+00A0 and U+3000).
            while lo < hi, let (v, len) = scalar(in: all, at: lo, end: hi), isPythonSpace(v) { lo += len }
            while hi > lo {
                var start = hi - 1
                while start > lo, all[start] & 0xc0 == 0x80, hi - start < 4 { start -= 1 }
                guard let (v, len) = scalar(in: all, at: start, end: hi), start + len == hi, isPythonSpace(v) else { break }
                hi = start
            }
            // Only one prefix is removed; as in sgit, the prefix never decides the form.
            for prefix in allPrefixes {
                let p = Array(prefix.utf8)
                if hi - lo >= p.count, all[lo..<(lo + p.count)].elementsEqual(p) {
                    lo += p.count
                    break
                }
            }
            guard let colon = all[lo..<hi].lastIndex(of: UInt8(ascii: ":")) else {
                throw .malformedKey("there is no ':' before the vault id")
            }
            let idBytes = all[(colon + 1)..<hi]
            guard !idBytes.isEmpty, colon > lo else { throw .malformedKey("the passphrase or the vault id is empty") }
            guard isValidVaultID(idBytes) else { throw .invalidVaultID }
            let vaultID = String(decoding: idBytes, as: UTF8.self)
            let secretPart = all[lo..<colon]
            let looksLikeReadKey = secretPart.count == 64 && secretPart.allSatisfy(isLowerHex)
            // sgit decides by `^[0-9a-f]{64}:[a-z0-9]{4,24}$` alone (checked: even after
            // `sgit_private_vault_`, 64 lowercase hex is a read key; after `sgit_private_read_`,
            // anything else is a passphrase).
            if looksLikeReadKey {
                do throws(CryptoError) {
                    let key = try SecretBytes(count: 32, initializingWith: { (out: UnsafeMutableRawBufferPointer) throws(CryptoError) in
                        for i in 0..<32 {
                            let h = secretPart[secretPart.startIndex + 2 * i], l = secretPart[secretPart.startIndex + 2 * i + 1]
                            out[i] = nibble(h) << 4 | nibble(l)
                        }
                    })
                    return .readKey(key: key, vaultID: vaultID)
                } catch { throw .crypto(error) }
            }
            do throws(CryptoError) {
                let pass = try SecretBytes(count: secretPart.count, initializingWith: { (out: UnsafeMutableRawBufferPointer) throws(CryptoError) in
                    out.copyBytes(from: secretPart)
                })
                return .vaultKey(passphrase: pass, vaultID: vaultID)
            } catch { throw .crypto(error) }
        }
    }

    private static func nibble(_ c: UInt8) -> UInt8 { c <= 0x39 ? c - 0x30 : c - 0x61 + 10 }

    /// Parses an sgit vault key (`[sgit_private_vault_]passphrase:vault_id`) or read key
    /// (`[sgit_private_read_|sgit_public_read_|sgit_rk1_]<64 hex>:vault_id`) and derives the keys.
    ///
    /// A vault key costs two PBKDF2-HMAC-SHA256 derivations of 600,000 iterations (~0.4 s); a
    /// read key costs nothing. Call it once (at `vault add`) and keep the result wrapped.
    /// - Parameter lockScope: the scope the keys belong to (a scope of their own by default).
    /// - Throws: ``SgitKeyError``; its message never contains the key.
    public static func derive(fromKeyText text: borrowing SecretBytes, lockScope: LockScope = LockScope()) throws(SgitKeyError) -> SgitKeys {
        let generation = lockScope.generation
        do {
            let parsed = try parse(text)
            switch consume parsed {
            case .readKey(let key, let vaultID):
                return try SgitKeys(vaultID: vaultID, read: key, write: nil, lockScope: lockScope, since: generation)
            case .vaultKey(let passphrase, let vaultID):
                let read = try PBKDF2.deriveKey(password: passphrase, salt: Array("sg-vault-v1:\(vaultID)".utf8),
                                                iterations: pbkdf2Iterations)
                let write = try PBKDF2.deriveKey(password: passphrase, salt: Array("sg-vault-v1:write:\(vaultID)".utf8),
                                                 iterations: pbkdf2Iterations)
                return try SgitKeys(vaultID: vaultID, read: read, write: write, lockScope: lockScope, since: generation)
            }
        } catch let error as SgitKeyError {
            throw error
        } catch let error as CryptoError {
            throw .crypto(error)
        } catch {
            throw .malformedKey("unexpected failure")
        }
    }

    /// Only the vault id of key text, without deriving anything (to name a vault before the
    /// slow derivation).
    public static func vaultID(ofKeyText text: borrowing SecretBytes) throws(SgitKeyError) -> String {
        let parsed = try parse(text)
        switch consume parsed {
        case .readKey(_, let id): return id
        case .vaultKey(_, let id): return id
        }
    }

    /// The derived keys in storable form, for custody to wrap: `read (32) || write (32)`, or the
    /// 32-byte read key alone for a read-only vault. Never leaves custody.
    package func exportForWrapping() throws(CryptoError) -> SecretBytes {
        let readCopy = try readSecret.withLock { (k: borrowing SecretBytes) throws(CryptoError) -> SecretBytes in try k.duplicate() }
        guard let writeSecret else { return readCopy }
        return try readCopy.withUnsafeBytes { (r: UnsafeRawBufferPointer) throws(CryptoError) -> SecretBytes in
            try writeSecret.withLock { (w: borrowing SecretBytes) throws(CryptoError) -> SecretBytes in
                try w.withUnsafeBytes { (wr: UnsafeRawBufferPointer) throws(CryptoError) -> SecretBytes in
                    try SecretBytes(count: 64, initializingWith: { (out: UnsafeMutableRawBufferPointer) in
                        out.baseAddress!.copyMemory(from: r.baseAddress!, byteCount: 32)
                        (out.baseAddress! + 32).copyMemory(from: wr.baseAddress!, byteCount: 32)
                    })
                }
            }
        }
    }

    /// Rebuilds the keys from ``exportForWrapping()`` output, with no PBKDF2.
    /// - Parameters:
    ///   - lockScope: the scope the keys belong to (custody passes its own).
    ///   - generation: the scope's generation before the secret was unwrapped (default: now).
    /// - Throws: ``SgitKeyError/malformedWrappedKey(_:)`` unless 32 or 64 bytes;
    ///   ``SgitKeyError/invalidVaultID`` for a bad id.
    package static func importWrapped(_ secret: consuming SecretBytes, vaultID: String, lockScope: LockScope = LockScope(),
                                      since generation: LockScope.Generation? = nil) throws(SgitKeyError) -> SgitKeys {
        guard isValidVaultID(Array(vaultID.utf8)) else { throw .invalidVaultID }
        let count = secret.count
        do {
            switch count {
            case 32:
                return try SgitKeys(vaultID: vaultID, read: secret, write: nil, lockScope: lockScope, since: generation)
            case 64:
                let r = try half(of: secret, at: 0)
                let w = try half(of: secret, at: 32)
                return try SgitKeys(vaultID: vaultID, read: r, write: w, lockScope: lockScope, since: generation)
            default:
                throw SgitKeyError.malformedWrappedKey(count)
            }
        } catch let error as SgitKeyError {
            throw error
        } catch let error as CryptoError {
            throw .crypto(error)
        } catch {
            throw .malformedWrappedKey(count)
        }
    }

    private static func half(of secret: borrowing SecretBytes, at offset: Int) throws(CryptoError) -> SecretBytes {
        try secret.withUnsafeBytes { (all: UnsafeRawBufferPointer) throws(CryptoError) -> SecretBytes in
            try SecretBytes(count: 32, initializingWith: { (out: UnsafeMutableRawBufferPointer) throws(CryptoError) in
                out.copyMemory(from: UnsafeRawBufferPointer(rebasing: all[offset..<(offset + 32)]))
            })
        }
    }

    /// The write key as the 64 lowercase hex characters the vault server's
    /// `x-sgraph-vault-write-key` header carries (a server credential, never an encryption
    /// key); nil for a read-only vault. For SiteKeep's remotes only: the caller puts it in a
    /// request header and drops it.
    package func writeKeyHex() -> String? {
        guard let writeSecret else { return nil }
        return writeSecret.withLock { (w: borrowing SecretBytes) -> String in
            w.withUnsafeBytes { raw in Hex.encode(raw) }
        }
    }

    /// The vault server's append-lane enumeration key, `hex(SHA-256("sg-inbox-enum:" ‖ read_key))`
    /// (the derivation of the web client's `SGAppend.deriveEnumKey`), as the 64 lowercase hex
    /// characters the `x-sgraph-vault-enum-key` header carries. A server credential only: it
    /// lists, fetches and marks the lane's messages, never decrypts them or the vault. For
    /// SiteKeep's lane client only: the caller puts it in a request header and drops it.
    package func appendEnumKeyHex() -> String {
        readSecret.withLock { (r: borrowing SecretBytes) -> String in
            r.withUnsafeBytes { raw in
                var hasher = SHA256.Hasher()
                hasher.update(Array("sg-inbox-enum:".utf8))
                hasher.update(borrowing: raw)   // the key is read in place, never copied
                return Hex.encode(hasher.finalize())
            }
        }
    }

    /// The HKDF info that makes the seed of this vault's append-lane key pair from its read key.
    static let laneSeedInfo = Array("sitekeep:append-lane:sealed-box-seed:v1".utf8)

    /// The public half of this vault's append-lane key pair (X25519, for libsodium's sealed box):
    /// what an agent seals its messages to. The pair is made from
    /// `HKDF-SHA256(read_key, info "sitekeep:append-lane:sealed-box-seed:v1")`, so its secret
    /// half is never stored: whoever holds the read key (and so reads the vault) can open the
    /// lane's messages, and nobody else.
    package func appendLanePublicKey() throws(CryptoError) -> [UInt8] {
        try readSecret.withLock { (r: borrowing SecretBytes) throws(CryptoError) -> [UInt8] in
            let seed = try HKDF.deriveKey(inputKeyMaterial: r, info: Self.laneSeedInfo)
            return try SealedBox.publicKey(fromSeed: seed)
        }
    }

    /// Opens a message sealed to ``appendLanePublicKey()``; the secret half lives in guarded
    /// memory for this call only.
    /// - Throws: ``CryptoError/authenticationFailed`` for bytes not sealed to this lane.
    package func openAppendLaneMessage(_ sealed: [UInt8]) throws(CryptoError) -> [UInt8] {
        try readSecret.withLock { (r: borrowing SecretBytes) throws(CryptoError) -> [UInt8] in
            let seed = try HKDF.deriveKey(inputKeyMaterial: r, info: Self.laneSeedInfo)
            return try SealedBox.open(sealed, seed: seed)
        }
    }

    /// The sgit file-id tail of `domain`: `hex(HMAC(read_key, utf8(domain)))[:12]` (§1.2). The
    /// names built on it (which domain, which prefix) are the vault format's: SiteKeepVault's
    /// `Format/SgitFileIDs.swift`.
    public func fileIDTail(_ domain: String) -> String {
        String(Hex.encode(readKey.authenticationCode(for: Array(domain.utf8))).prefix(12))
    }
}
