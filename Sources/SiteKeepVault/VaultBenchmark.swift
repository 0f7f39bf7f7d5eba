public import SiteKeepCustody
public import SiteKeepCrypto

/// Reusable measurements of the vault client, for `sitekeep-bench` / tools/bench.
public enum VaultBenchmark: Sendable {
    /// Latency statistics in microseconds.
    public struct Latency: Sendable, CustomStringConvertible {
        public let iterations: Int
        public let p50: Double, p99: Double, mean: Double, min: Double
        public var description: String {
            "n=\(iterations) p50=\(fmt(p50)) µs p99=\(fmt(p99)) µs mean=\(fmt(mean)) µs min=\(fmt(min)) µs"
        }

        init(_ samples: [Double]) {
            let s = samples.sorted()
            iterations = s.count
            p50 = s.isEmpty ? 0 : s[s.count / 2]
            p99 = s.isEmpty ? 0 : s[Swift.min(s.count - 1, Int((Double(s.count) * 0.99).rounded(.up)) - 1)]
            mean = s.isEmpty ? 0 : s.reduce(0, +) / Double(s.count)
            self.min = s.first ?? 0
        }
    }

    /// Throughput of one AES-256-GCM decryption path in MB/s (10^6 bytes per second).
    public struct Throughput: Sendable, CustomStringConvertible {
        public let viaHandleMBps: Double
        public let rawMBps: Double
        public let bytes: Int
        public var description: String {
            "AES-256-GCM open of \(bytes) B: handle \(fmt(viaHandleMBps)) MB/s, raw \(fmt(rawMBps)) MB/s (handle/raw \(fmt(viaHandleMBps / Swift.max(rawMBps, 1e-9) * 100))%)"
        }
    }

    static func micros(_ d: Duration) -> Double {
        Double(d.components.seconds) * 1e6 + Double(d.components.attoseconds) / 1e12
    }

    /// What `vault cat` costs in-process with keys already derived: each iteration opens the
    /// vault afresh (no cache: HEAD, index, ref, commit, signature, trees) and reads `file`.
    public static func catLatency(vaultPath: String, keys: SgitKeys, file: String, iterations: Int = 200) throws(VaultError) -> Latency {
        let clock = ContinuousClock()
        var samples: [Double] = []
        samples.reserveCapacity(iterations)
        for _ in 0..<Swift.max(1, iterations) {
            let start = clock.now
            let vault = try Vault.open(path: vaultPath, keys: keys)
            _ = try vault.read(path: file)
            samples.append(micros(clock.now - start))
        }
        return Latency(samples)
    }

    /// What `vault.load` costs on an open vault (the daemon's case): HEAD re-read, cached trees
    /// and commit, the blob read and checked, the reply built.
    public static func loadLatency(vault: Vault, file: String, iterations: Int = 2000) throws(VaultError) -> Latency {
        let clock = ContinuousClock()
        _ = try VaultBridgeReplies.load(vault, path: file)
        var samples: [Double] = []
        samples.reserveCapacity(iterations)
        for _ in 0..<Swift.max(1, iterations) {
            let start = clock.now
            _ = try VaultBridgeReplies.load(vault, path: file)
            samples.append(micros(clock.now - start))
        }
        return Latency(samples)
    }

    /// AES-256-GCM decryption through a ``SymmetricKeyHandle`` against the crypto layer's call
    /// on the same key (`AES256GCM.open`, automatic backend), on `bytes`-byte messages.
    public static func aesGCMDecrypt(bytes: Int = 1 << 20, iterations: Int = 50) throws(CryptoError) -> Throughput {
        let raw = try SecretBytes(randomCount: 32)
        let handle = try SymmetricKeyHandle(taking: raw.duplicate())
        let nonce = SecureRandom.bytes(count: 12)
        let sealed = try AES256GCM.seal(SecureRandom.bytes(count: bytes), using: raw, nonce: nonce)
        let clock = ContinuousClock()
        let n = Swift.max(1, iterations)
        _ = try handle.aesGCMOpen(sealed, nonce: nonce)
        var start = clock.now
        for _ in 0..<n { _ = try handle.aesGCMOpen(sealed, nonce: nonce) }
        let viaHandle = micros(clock.now - start)
        start = clock.now
        for _ in 0..<n { _ = try AES256GCM.open(sealed, using: raw, nonce: nonce) }
        let direct = micros(clock.now - start)
        let total = Double(bytes) * Double(n)
        return Throughput(viaHandleMBps: total / viaHandle, rawMBps: total / direct, bytes: bytes)
    }
}

private func fmt(_ x: Double) -> String {
    let r = (x * 10).rounded() / 10
    return String(r)
}
