internal import CSodium

/// CPU features libsodium detected at `sodium_init()`, for `sitekeep doctor`.
public enum CPUFeatures: Sendable {
    /// `name: present` for the features that change which code paths run.
    public static var all: [(name: String, present: Bool)] {
        try? Sodium.ensureInitialized()
        return [
            ("AES-NI", sodium_runtime_has_aesni() == 1),
            ("PCLMUL", sodium_runtime_has_pclmul() == 1),
            ("SSE4.1", sodium_runtime_has_sse41() == 1),
            ("AVX2", sodium_runtime_has_avx2() == 1),
            ("AVX-512F", sodium_runtime_has_avx512f() == 1),
        ]
    }
}
