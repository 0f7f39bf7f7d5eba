internal import CSodium
import Synchronization

/// Primitives over a key that is already readable (inside a `SecretBytes.withUnsafeBytes`
/// scope), for custody's batch scopes. `package`: not part of the public API.
package enum RawKeyOps {
    /// XChaCha20-Poly1305 seal with a random nonce: `nonce || ciphertext || tag`.
    package static func seal(_ plaintext: [UInt8], key: UnsafeRawBufferPointer, ad: [UInt8]) throws(CryptoError) -> [UInt8] {
        guard key.count == 32 else { throw .invalidKeyLength(expected: 32, actual: key.count) }
        let n = XChaCha20Poly1305.nonceByteCount
        var out = [UInt8](repeating: 0, count: n + plaintext.count + XChaCha20Poly1305.tagByteCount)
        out.withUnsafeMutableBufferPointer { o in
            NonceSource.fill(o.baseAddress!, count: n)
            var produced: UInt64 = 0
            crypto_aead_xchacha20poly1305_ietf_encrypt(
                o.baseAddress! + n, &produced, plaintext, UInt64(plaintext.count), ad, UInt64(ad.count), nil,
                o.baseAddress!, key.baseAddress!.assumingMemoryBound(to: UInt8.self))
        }
        return out
    }

    /// XChaCha20-Poly1305 open of `nonce || ciphertext || tag`.
    package static func open(_ sealed: [UInt8], key: UnsafeRawBufferPointer, ad: [UInt8]) throws(CryptoError) -> [UInt8] {
        guard key.count == 32 else { throw .invalidKeyLength(expected: 32, actual: key.count) }
        let n = XChaCha20Poly1305.nonceByteCount, t = XChaCha20Poly1305.tagByteCount
        guard sealed.count >= n + t else { throw .authenticationFailed }
        var rc: Int32 = -1
        let out = [UInt8](unsafeUninitializedCapacity: sealed.count - n - t) { o, initialized in
            rc = sealed.withUnsafeBufferPointer { s in
                crypto_aead_xchacha20poly1305_ietf_decrypt(
                    o.baseAddress, nil, nil, s.baseAddress! + n, UInt64(sealed.count - n), ad, UInt64(ad.count),
                    s.baseAddress!, key.baseAddress!.assumingMemoryBound(to: UInt8.self))
            }
            // libsodium writes nothing on failure; zero the buffer so no garbage escapes.
            if rc != 0, let base = o.baseAddress { base.update(repeating: 0, count: o.count) }
            initialized = o.count
        }
        guard rc == 0 else { throw .authenticationFailed }
        return out
    }
}

extension RawKeyOps {
    /// XChaCha20-Poly1305 seal of `plaintext` into `out` (exactly `plaintext.count + 40` bytes)
    /// as `nonce || ciphertext || tag`, with a fresh random nonce. For callers that build the
    /// plaintext and associated data in scratch memory and store the result straight away,
    /// without an array per row.
    package static func seal(_ plaintext: UnsafeRawBufferPointer, key: UnsafeRawBufferPointer, ad: UnsafeRawBufferPointer,
                             into out: UnsafeMutableRawBufferPointer) throws(CryptoError) {
        guard key.count == 32 else { throw .invalidKeyLength(expected: 32, actual: key.count) }
        let n = XChaCha20Poly1305.nonceByteCount
        guard out.count == n + plaintext.count + XChaCha20Poly1305.tagByteCount, let o = out.baseAddress else {
            throw .invalidLength(what: "sealed output", detail: "must be the plaintext plus 40 bytes")
        }
        let p = o.assumingMemoryBound(to: UInt8.self)
        NonceSource.fill(p, count: n)
        crypto_aead_xchacha20poly1305_ietf_encrypt(
            p + n, nil, plaintext.baseAddress?.assumingMemoryBound(to: UInt8.self), UInt64(plaintext.count),
            ad.baseAddress?.assumingMemoryBound(to: UInt8.self), UInt64(ad.count), nil,
            p, key.baseAddress!.assumingMemoryBound(to: UInt8.self))
    }

    /// XChaCha20-Poly1305 open of `nonce || ciphertext || tag` into `out` (exactly
    /// `sealed.count - 40` bytes). On failure `out` is zeroed and nothing else happens.
    package static func open(_ sealed: UnsafeRawBufferPointer, key: UnsafeRawBufferPointer, ad: UnsafeRawBufferPointer,
                             into out: UnsafeMutableRawBufferPointer) throws(CryptoError) {
        guard key.count == 32 else { throw .invalidKeyLength(expected: 32, actual: key.count) }
        let n = XChaCha20Poly1305.nonceByteCount, t = XChaCha20Poly1305.tagByteCount
        guard sealed.count >= n + t, let s = sealed.baseAddress?.assumingMemoryBound(to: UInt8.self) else { throw .authenticationFailed }
        guard out.count == sealed.count - n - t else {
            throw .invalidLength(what: "opened output", detail: "must be the sealed size less 40 bytes")
        }
        // libsodium accepts a null output for an empty message; it never writes past `out`.
        let rc = crypto_aead_xchacha20poly1305_ietf_decrypt(
            out.baseAddress?.assumingMemoryBound(to: UInt8.self), nil, nil, s + n, UInt64(sealed.count - n),
            ad.baseAddress?.assumingMemoryBound(to: UInt8.self), UInt64(ad.count),
            s, key.baseAddress!.assumingMemoryBound(to: UInt8.self))
        guard rc == 0 else {
            SecureMemory.zero(out)
            throw .authenticationFailed
        }
    }
}

extension HMACSHA256 {
    /// HMAC-SHA256 under a key that is already readable. `package`: for custody's scopes.
    package static func authenticationCode(for message: [UInt8], rawKey: UnsafeRawBufferPointer) -> [UInt8] {
        mac(message: message, key: rawKey)
    }
}

/// Random nonces from a buffer refilled 4 KiB at a time by `randombytes_buf`, so sealing a
/// small value does not pay a `getrandom` system call each time. Nonces are public (they are
/// stored beside the ciphertext); the buffer only has to be unpredictable and never reused,
/// and each byte is handed out once and then zeroed.
package enum NonceSource {
    private static let state = Mutex<(buffer: [UInt8], offset: Int)>(([UInt8](repeating: 0, count: 4096), 4096))

    /// Fills `count` bytes (at most 256) at `pointer` with fresh random bytes.
    package static func fill(_ pointer: UnsafeMutablePointer<UInt8>, count: Int) {
        guard count <= 256 else { randombytes_buf(pointer, count); return }
        state.withLock { s in
            if s.offset + count > s.buffer.count {
                s.buffer.withUnsafeMutableBytes { randombytes_buf($0.baseAddress!, $0.count) }
                s.offset = 0
            }
            s.buffer.withUnsafeMutableBufferPointer { b in
                pointer.update(from: b.baseAddress! + s.offset, count: count)
                (b.baseAddress! + s.offset).update(repeating: 0, count: count)
            }
            s.offset += count
        }
    }
}

/// HMAC-SHA256 with the key's inner and outer states computed once (the two SHA-256 blocks
/// of `key ⊕ ipad` and `key ⊕ opad`), for keys that MAC many short messages. The states are
/// key-equivalent, so they live in guarded memory like the key itself. `package`: custody's.
package enum PrecomputedHMAC {
    /// The size of the precomputed state.
    package static var stateByteCount: Int { MemoryLayout<crypto_auth_hmacsha256_state>.size }

    /// A guarded, pinned state for `key`.
    package static func state(forKey key: borrowing SecretBytes) throws(CryptoError) -> SecretBytes {
        try key.withUnsafeBytes { (k: UnsafeRawBufferPointer) throws(CryptoError) -> SecretBytes in
            var s = try SecretBytes(count: stateByteCount, initializingWith: { (out: UnsafeMutableRawBufferPointer) throws(CryptoError) in
                let st = out.baseAddress!.assumingMemoryBound(to: crypto_auth_hmacsha256_state.self)
                crypto_auth_hmacsha256_init(st, k.baseAddress!.assumingMemoryBound(to: UInt8.self), k.count)
            })
            s.pinReadOnly()
            return s
        }
    }

    /// The MAC of `message`, starting from a precomputed state (copied to the stack and wiped).
    package static func mac(_ message: [UInt8], state: UnsafeRawBufferPointer) -> [UInt8] {
        message.withUnsafeBytes { m in
            [UInt8](unsafeUninitializedCapacity: 32) { out, n in
                mac(m, state: state, into: UnsafeMutableRawBufferPointer(out))
                n = 32
            }
        }
    }

    /// The MAC of `message` written to `out` (32 bytes), starting from a precomputed state
    /// (copied to the stack and wiped).
    package static func mac(_ message: UnsafeRawBufferPointer, state: UnsafeRawBufferPointer, into out: UnsafeMutableRawBufferPointer) {
        precondition(out.count == 32 && state.count >= stateByteCount, "HMAC output is 32 bytes")   // programming error
        var st = crypto_auth_hmacsha256_state()
        withUnsafeMutableBytes(of: &st) { $0.copyMemory(from: UnsafeRawBufferPointer(rebasing: state[0..<stateByteCount])) }
        defer { sodium_memzero(&st, MemoryLayout<crypto_auth_hmacsha256_state>.size) }
        _ = crypto_auth_hmacsha256_update(&st, message.baseAddress?.assumingMemoryBound(to: UInt8.self) ?? UnsafePointer(bitPattern: 1)!,
                                          UInt64(message.count))
        crypto_auth_hmacsha256_final(&st, out.baseAddress!.assumingMemoryBound(to: UInt8.self))
    }
}
