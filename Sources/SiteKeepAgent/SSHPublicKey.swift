public import SiteKeepNames
public import SiteKeepEncoding

/// An SSH public key in the forms OpenSSH uses: the wire blob (RFC 4253 §6.6, RFC 5656 §3.1,
/// RFC 8709 §4), the `authorized_keys` line and the `SHA256:` fingerprint `ssh-keygen -l` prints.
///
/// SiteKeep's team keys are `ssh-ed25519` and `ecdsa-sha2-nistp256`. The other kinds are read so
/// that an SSH server's host key (ECDSA P-384/P-521, RSA, or a host certificate, whose embedded
/// key is taken as OpenSSH takes it) can be checked in `session-bind@openssh.com`.
public enum SSHPublicKey: Sendable, Hashable {
    /// `ssh-ed25519`: the 32-byte key.
    case ed25519([UInt8])
    /// `ecdsa-sha2-nistpNNN`: the curve and the SEC 1 uncompressed point.
    case ecdsa(SSHCurve, point: [UInt8])
    /// `ssh-rsa`: exponent and modulus, unsigned big-endian.
    case rsa(exponent: [UInt8], modulus: [UInt8])

    /// The longest key blob read (an RSA key of 16384 bits is ~2 KiB; a certificate more).
    public static let maximumBlobBytes = 16 * 1024

    /// The key type name (`ssh-ed25519`, `ecdsa-sha2-nistp256`, `ssh-rsa`).
    public var typeName: String {
        switch self {
        case .ed25519: "ssh-ed25519"
        case .ecdsa(let curve, _): "ecdsa-sha2-\(curve.rawValue)"
        case .rsa: "ssh-rsa"
        }
    }

    /// The key's size in bits, as `ssh-keygen -l` prints it.
    public var bits: Int {
        switch self {
        case .ed25519: return 256
        case .ecdsa(let curve, _):
            switch curve { case .p256: return 256; case .p384: return 384; case .p521: return 521 }
        case .rsa(_, let modulus):
            guard let top = modulus.first else { return 0 }
            return (modulus.count - 1) * 8 + (8 - top.leadingZeroBitCount)
        }
    }

    /// The short family name `ssh-keygen -l` puts in parentheses (`ED25519`, `ECDSA`, `RSA`).
    public var family: String {
        switch self {
        case .ed25519: "ED25519"
        case .ecdsa: "ECDSA"
        case .rsa: "RSA"
        }
    }

    /// The wire blob.
    public var blob: [UInt8] {
        var w = SSHWriter(capacity: 128)
        w.string(typeName)
        switch self {
        case .ed25519(let key):
            w.string(key)
        case let .ecdsa(curve, point):
            w.string(curve.rawValue)
            w.string(point)
        case let .rsa(exponent, modulus):
            w.mpint(unsigned: exponent)
            w.mpint(unsigned: modulus)
        }
        return w.bytes
    }

    /// `SHA256:` and the unpadded base64 of SHA-256 of the blob, as `ssh-keygen -l` prints it.
    public func fingerprint(using crypto: any SSHCryptography) -> String { Self.fingerprint(ofBlob: blob, using: crypto) }

    /// The `SHA256:` fingerprint of any key blob.
    public static func fingerprint(ofBlob blob: [UInt8], using crypto: any SSHCryptography) -> String {
        "SHA256:" + String(Base64.encode(crypto.sha256(blob)).prefix { $0 != "=" })
    }

    /// The `authorized_keys` / `allowed_signers` form: type, base64 blob and a comment.
    public func authorizedKeysLine(comment: String? = nil) -> String {
        let line = typeName + " " + Base64.encode(blob)
        guard let comment, !comment.isEmpty else { return line }
        return line + " " + comment
    }

    /// Parses a key blob of any kind named in the type's discussion.
    ///
    /// - Parameter acceptingCertificates: whether an OpenSSH certificate
    ///   (`...-cert-v01@openssh.com`) stands for the key it certifies (as it does for a host
    ///   key; its CA signature is not this layer's to check).
    /// - Throws: ``SSHWireError`` for anything malformed, unknown or with bytes left over.
    public init(blob: [UInt8], acceptingCertificates: Bool = false) throws(SSHWireError) {
        guard blob.count <= Self.maximumBlobBytes else { throw .invalid(field: "public key", reason: "longer than \(Self.maximumBlobBytes) bytes") }
        var r = SSHReader(blob)
        var type = try r.name("key type", limit: 64)
        let certificateSuffix = "-cert-v01@openssh.com"
        let isCertificate = type.hasSuffix(certificateSuffix)
        if isCertificate {
            guard acceptingCertificates else { throw .invalid(field: "key type", reason: "a certificate where a plain key is expected") }
            type = String(type.dropLast(certificateSuffix.count))
            _ = try r.string("certificate nonce", limit: 1024)
        }
        switch type {
        case "ssh-ed25519":
            let key = try r.string("Ed25519 key")
            guard key.count == 32 else { throw .invalid(field: "Ed25519 key", reason: "\(key.count) bytes, not 32") }
            self = .ed25519(key)
        case "ecdsa-sha2-nistp256", "ecdsa-sha2-nistp384", "ecdsa-sha2-nistp521":
            let curveName = try r.name("ECDSA curve", limit: 16)
            guard let curve = SSHCurve(rawValue: curveName), type == "ecdsa-sha2-\(curveName)" else {
                throw .invalid(field: "ECDSA curve", reason: "\(curveName) does not match \(type)")
            }
            let point = try r.string("ECDSA point", limit: 1 + 2 * curve.coordinateByteCount)
            guard point.count == 1 + 2 * curve.coordinateByteCount, point.first == 0x04 else {
                throw .invalid(field: "ECDSA point", reason: "not an uncompressed \(curveName) point")
            }
            self = .ecdsa(curve, point: point)
        case "ssh-rsa":
            let e = try r.mpint("RSA exponent", limit: 9)
            let n = try r.mpint("RSA modulus")
            guard !e.isEmpty, !n.isEmpty else { throw .invalid(field: "RSA key", reason: "zero exponent or modulus") }
            self = .rsa(exponent: e, modulus: n)
        default:
            throw .invalid(field: "key type", reason: "\(type) is not supported")
        }
        // A certificate goes on with serial, type, key id, principals, validity, options, CA and
        // signature; only the certified key matters here.
        if !isCertificate { try r.expectEnd("public key") }
    }

    /// Parses an `authorized_keys`-style line: `TYPE BASE64 [COMMENT]` (no options).
    /// - Returns: the key and its comment.
    public static func parse(line: String) throws(SSHWireError) -> (key: SSHPublicKey, comment: String) {
        let fields = line.split(separator: " ", maxSplits: 2, omittingEmptySubsequences: true)
        guard fields.count >= 2 else { throw .invalid(field: "public key line", reason: "expected 'TYPE BASE64 [COMMENT]'") }
        guard let blob = try? Base64.decode(String(fields[1])) else { throw .invalid(field: "public key line", reason: "the key is not base64") }
        let key = try SSHPublicKey(blob: blob)
        guard key.typeName == fields[0] else { throw .invalid(field: "public key line", reason: "the type does not match the key") }
        return (key, fields.count > 2 ? String(fields[2]).trimmingSpacesAtEnd() : "")
    }

    /// Whether `signatureBlob` (an SSH signature: algorithm name and signature, RFC 4253 §6.6)
    /// is a valid signature of `data` by this key. RSA must be `rsa-sha2-256` or `rsa-sha2-512`
    /// (`ssh-rsa`, SHA-1, is refused); ECDSA's name must match the key's curve. The signature
    /// itself is checked by `crypto`.
    public func isValidSignature(_ signatureBlob: [UInt8], for data: [UInt8], using crypto: any SSHCryptography) -> Bool {
        var r = SSHReader(signatureBlob)
        guard let name = try? r.name("signature algorithm", limit: 64), let sig = try? r.string("signature", limit: 4096),
              r.isAtEnd else { return false }
        switch self {
        case .ed25519(let key):
            guard name == "ssh-ed25519" else { return false }
            return crypto.isValidEd25519(signature: sig, of: data, publicKey: key)
        case let .ecdsa(curve, point):
            guard name == typeName else { return false }
            var inner = SSHReader(sig)
            guard let rr = try? inner.mpint("ECDSA r", limit: 67), let ss = try? inner.mpint("ECDSA s", limit: 67), inner.isAtEnd else { return false }
            return crypto.isValidECDSA(curve: curve, point: point, r: rr, s: ss, message: data)
        case let .rsa(exponent, modulus):
            let hash: SSHRSAHash
            switch name {
            case "rsa-sha2-256": hash = .sha256
            case "rsa-sha2-512": hash = .sha512
            default: return false
            }
            return crypto.isValidRSA(modulus: modulus, exponent: exponent, signature: sig, message: data, hash: hash)
        }
    }
}

/// The SSH signature blob of a signature custody made (RFC 8709 §6 for `ssh-ed25519`; RFC 5656
/// §3.1.2 for `ecdsa-sha2-nistp256`: `r` and `s` as `mpint`s inside a `string`).
public enum SSHSignatureBlob {
    /// Wraps a raw signature: 64 bytes of Ed25519, or P-256 `r || s`.
    /// - Throws: ``SSHWireError/invalid(field:reason:)`` when it is not 64 bytes.
    public static func make(algorithm: SigningAlgorithm, raw: [UInt8]) throws(SSHWireError) -> [UInt8] {
        guard raw.count == 64 else { throw .invalid(field: "signature", reason: "\(raw.count) bytes, not 64") }
        var w = SSHWriter(capacity: 100)
        switch algorithm {
        case .ed25519:
            w.string("ssh-ed25519")
            w.string(raw)
        case .p256:
            w.string("ecdsa-sha2-nistp256")
            var inner = SSHWriter(capacity: 72)
            inner.mpint(unsigned: raw[0..<32])
            inner.mpint(unsigned: raw[32..<64])
            w.string(inner.bytes)
        }
        return w.bytes
    }
}

extension String {
    func trimmingSpacesAtEnd() -> String {
        var s = Substring(self)
        while let last = s.last, last == " " || last == "\n" || last == "\r" || last == "\t" { s = s.dropLast() }
        return String(s)
    }
}
