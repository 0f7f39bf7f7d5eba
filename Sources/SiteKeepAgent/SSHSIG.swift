import SiteKeepEncoding

/// OpenSSH's signature format for files and git commits (`ssh-keygen -Y sign`, OpenSSH's
/// `PROTOCOL.sshsig`): the key signs a small blob naming a namespace (`git`, `file`, ...) and a
/// hash of the message, never the message itself, so a signature made for one namespace is not
/// valid in another.
public enum SSHSIG {
    /// The six bytes every SSHSIG blob, and every blob an SSHSIG key signs, starts with.
    public static let magic: [UInt8] = Array("SSHSIG".utf8)
    /// The format version.
    public static let version: UInt32 = 1

    /// The hash of the message inside the signed blob.
    public enum Hash: String, Sendable, CaseIterable {
        /// `ssh-keygen`'s default.
        case sha512
        /// Also accepted by `ssh-keygen -Y verify`.
        case sha256

        /// The digest length.
        public var byteCount: Int { self == .sha512 ? 64 : 32 }

        /// The digest of `message`, made by `crypto`.
        public func digest(_ message: [UInt8], using crypto: any SSHCryptography) -> [UInt8] {
            self == .sha512 ? crypto.sha512(message) : crypto.sha256(message)
        }
    }

    /// The blob the key signs: magic, namespace, reserved (empty), hash name, hash of the message.
    public static func signedData(namespace: String, hash: Hash, messageDigest: [UInt8]) -> [UInt8] {
        var w = SSHWriter(capacity: 96 + namespace.utf8.count)
        w.raw(magic)
        w.string(namespace)
        w.string([UInt8]())
        w.string(hash.rawValue)
        w.string(messageDigest)
        return w.bytes
    }

    /// What a client asks an agent to sign for an SSHSIG, read back: the namespace and hash.
    public struct SignedData: Sendable, Equatable {
        /// The namespace (`git`, `file`, ...).
        public let namespace: String
        /// The hash algorithm named.
        public let hash: Hash

        /// Reads `data` as SSHSIG signed data, or returns nil when it does not start with the
        /// magic. Data that starts with it but is not exactly the form throws.
        public init?(parsing data: [UInt8]) throws(SSHWireError) {
            guard data.starts(with: SSHSIG.magic) else { return nil }
            var r = SSHReader(Array(data.dropFirst(SSHSIG.magic.count)))
            let (ns, hash) = try SSHSIG.readNamespaceAndHash(&r)
            guard !ns.isEmpty else { throw .invalid(field: "SSHSIG namespace", reason: "empty") }
            let digest = try r.string("SSHSIG message hash", limit: 64)
            guard digest.count == hash.byteCount else { throw .invalid(field: "SSHSIG message hash", reason: "\(digest.count) bytes for \(hash.rawValue)") }
            try r.expectEnd("SSHSIG signed data")
            namespace = ns
            self.hash = hash
        }
    }

    /// The signature blob: magic, version, public key, namespace, reserved, hash name, signature.
    public static func blob(publicKey: [UInt8], namespace: String, hash: Hash, signature: [UInt8]) -> [UInt8] {
        var w = SSHWriter(capacity: 64 + publicKey.count + signature.count)
        w.raw(magic)
        w.uint32(version)
        w.string(publicKey)
        w.string(namespace)
        w.string([UInt8]())
        w.string(hash.rawValue)
        w.string(signature)
        return w.bytes
    }

    /// The armoured text `ssh-keygen -Y sign` writes: `-----BEGIN SSH SIGNATURE-----`, the blob
    /// in base64 lines of 70 characters, `-----END SSH SIGNATURE-----`, each line ending in `\n`.
    public static func armor(_ blob: [UInt8]) -> String {
        PEM.encode(blob, label: "SSH SIGNATURE", lineLength: 70)
    }

    /// The blob inside armoured text.
    /// - Throws: ``SSHWireError/invalid(field:reason:)`` without the markers or with bad base64.
    public static func dearmor(_ text: String) throws(SSHWireError) -> [UInt8] {
        do { return try PEM.decode(text, label: "SSH SIGNATURE") } catch {
            throw .invalid(field: "SSH signature", reason: "no '-----BEGIN SSH SIGNATURE-----' block of base64")
        }
    }

    /// Reads what signed data and signature blobs share after their start: namespace, reserved
    /// field, hash algorithm.
    static func readNamespaceAndHash(_ r: inout SSHReader) throws(SSHWireError) -> (String, Hash) {
        let ns = try r.name("SSHSIG namespace", limit: 256)
        _ = try r.string("SSHSIG reserved field", limit: 1024)
        let name = try r.name("SSHSIG hash algorithm", limit: 16)
        guard let hash = Hash(rawValue: name) else { throw .invalid(field: "SSHSIG hash algorithm", reason: "\(name) is not sha256 or sha512") }
        return (ns, hash)
    }

    /// A parsed signature blob.
    public struct Signature: Sendable, Equatable {
        /// The signer's key.
        public let publicKey: SSHPublicKey
        /// The namespace it was made for.
        public let namespace: String
        /// The hash of the message it covers.
        public let hash: Hash
        /// The SSH signature blob (algorithm name and signature).
        public let signature: [UInt8]

        /// Parses an SSHSIG blob (version 1).
        public init(blob: [UInt8]) throws(SSHWireError) {
            guard blob.starts(with: SSHSIG.magic) else { throw .invalid(field: "SSH signature", reason: "no SSHSIG magic") }
            var r = SSHReader(Array(blob.dropFirst(SSHSIG.magic.count)))
            let v = try r.uint32("SSHSIG version")
            guard v == SSHSIG.version else { throw .invalid(field: "SSHSIG version", reason: "\(v) is not 1") }
            publicKey = try SSHPublicKey(blob: try r.string("SSHSIG public key", limit: SSHPublicKey.maximumBlobBytes))
            (namespace, hash) = try SSHSIG.readNamespaceAndHash(&r)
            signature = try r.string("SSHSIG signature", limit: 4096)
            try r.expectEnd("SSHSIG signature")
        }

        /// Whether this is a valid signature of `message` in `namespace`, hashed and checked by `crypto`.
        public func isValid(for message: [UInt8], namespace expected: String, using crypto: any SSHCryptography) -> Bool {
            guard namespace == expected else { return false }
            let data = SSHSIG.signedData(namespace: namespace, hash: hash, messageDigest: hash.digest(message, using: crypto))
            return publicKey.isValidSignature(signature, for: data, using: crypto)
        }
    }
}
