// swift-tools-version:6.0
//
// SiteKeep: a sandboxed multi-site state store with key custody.
//
// Layers (each imports only the layers below it; see docs/ARCHITECTURE.md):
//
//   sitekeep (CLI)  ─ SiteKeepCommandLine
//   SiteKeepAudit   ─ isolation audit, importable by other test suites
//   SiteKeepBridge  ─ op catalogue, dispatcher, socket server
//   SiteKeepPartitions │ SiteKeepVault
//   SiteKeepCustody ─ master key, slots, team/device keys, presence, audit log
//   SiteKeepCrypto  │ SiteKeepKeyring
//   CSodium · COpenSSL · CZlib · CSQLite  (system libraries); CSecretLoader (libsecret by dlopen;
//   the CSecret headers are used only by a test that checks the loader against them)
import PackageDescription

let package = Package(
    name: "SiteKeep",
    products: [
        .library(name: "SiteKeepSystem", targets: ["SiteKeepSystem"]),
        .library(name: "SiteKeepJSON", targets: ["SiteKeepJSON"]),
        .library(name: "SiteKeepCrypto", targets: ["SiteKeepCrypto"]),
        .library(name: "SiteKeepKeyring", targets: ["SiteKeepKeyring"]),
        .library(name: "SiteKeepCustody", targets: ["SiteKeepCustody"]),
        .library(name: "SiteKeepPartitions", targets: ["SiteKeepPartitions"]),
        .library(name: "SiteKeepVault", targets: ["SiteKeepVault"]),
        .library(name: "SiteKeepBridge", targets: ["SiteKeepBridge"]),
        .library(name: "SiteKeepAudit", targets: ["SiteKeepAudit"]),
        .executable(name: "sitekeep", targets: ["sitekeep"]),
    ],
    targets: [
        // C libraries. Module map + shim header only; no Swift.
        .systemLibrary(name: "CSodium", pkgConfig: "libsodium", providers: [.apt(["libsodium-dev"])]),
        .systemLibrary(name: "COpenSSL", pkgConfig: "libcrypto", providers: [.apt(["libssl-dev"])]),
        .systemLibrary(name: "CZlib", pkgConfig: "zlib", providers: [.apt(["zlib1g-dev"])]),
        .systemLibrary(name: "CSQLite", pkgConfig: "sqlite3", providers: [.apt(["libsqlite3-dev"])]),
        .systemLibrary(name: "CSecret", pkgConfig: "libsecret-1", providers: [.apt(["libsecret-1-dev"])]),
        // Header-only Linux shims: prctl, SO_PEERCRED, CLOCK_BOOTTIME.
        .systemLibrary(name: "CLinux"),

        // System plumbing every layer shares: errno as a value, atomic file replacement, whole
        // reads and writes, private folders, file locks, child processes. Glibc only.
        .target(name: "SiteKeepSystem"),
        // Strict JSON: a bounded parser and the exact byte forms (canonical, Python-style) the
        // vault format and the bridge need. Pure Swift, no dependencies.
        .target(name: "SiteKeepJSON"),
        // Crypto: typed primitives on libsodium, OpenSSL only where libsodium lacks them.
        .target(name: "SiteKeepCrypto", dependencies: ["CSodium", "COpenSSL", "CZlib"]),
        // Process hardening every executable calls first.
        .target(name: "SiteKeepHardening", dependencies: ["SiteKeepCrypto", "CLinux"]),
        // Keyring backends: opaque wrapped blobs in the Secret Service or an encrypted file.
        // The Secret Service client, loaded with dlopen only when that keyring is used.
        .target(name: "CSecretLoader"),
        .target(name: "SiteKeepKeyring", dependencies: ["CSecretLoader", "SiteKeepCrypto", "SiteKeepJSON"]),
        // Custody: the only layer that holds unwrapped keys.
        .target(name: "SiteKeepCustody", dependencies: ["SiteKeepCrypto", "SiteKeepKeyring", "SiteKeepJSON", "CLinux"]),
        // One SQLite partition per site, values sealed through custody.
        .target(name: "SiteKeepPartitions", dependencies: ["CSQLite", "SiteKeepCustody"]),
        // sgit-format vault client.
        .target(name: "SiteKeepVault", dependencies: ["SiteKeepCrypto", "SiteKeepCustody", "SiteKeepJSON"]),
        // The bridge: op catalogue, dispatcher, daemon.
        .target(name: "SiteKeepBridge", dependencies: ["SiteKeepJSON", "SiteKeepCustody", "SiteKeepPartitions", "SiteKeepVault", "CLinux"],
                resources: [.copy("ops.json")]),
        // Isolation audit, importable by other test suites.
        .target(name: "SiteKeepAudit", dependencies: ["SiteKeepPartitions", "SiteKeepVault", "SiteKeepBridge"]),
        // Command-line conventions and commands (testable library behind the thin executable).
        .target(name: "SiteKeepCommandLine", dependencies: [
            "SiteKeepHardening", "SiteKeepJSON", "SiteKeepCrypto", "SiteKeepKeyring", "SiteKeepCustody",
            "SiteKeepPartitions", "SiteKeepVault", "SiteKeepBridge", "SiteKeepAudit",
        ]),
        .executableTarget(name: "sitekeep", dependencies: ["SiteKeepCommandLine", "SiteKeepHardening"]),
        // Test helper: streams acknowledged partition writes until killed (the kill -9 test).
        .executableTarget(name: "sitekeep-crashwriter", dependencies: [
            "SiteKeepHardening", "SiteKeepCrypto", "SiteKeepCustody", "SiteKeepPartitions",
        ]),
        // Release-built benchmark driver used by tools/bench. It talks to the C libraries
        // directly as well, to print wrapper-vs-raw ratios.
        .executableTarget(name: "sitekeep-bench", dependencies: [
            "SiteKeepHardening", "SiteKeepCrypto", "SiteKeepKeyring", "SiteKeepCustody",
            "SiteKeepPartitions", "SiteKeepVault", "SiteKeepBridge", "SiteKeepJSON", "CSodium", "COpenSSL", "CSQLite",
        ]),

        // The bridge daemon on in-memory services, spawned by the bridge's process-level tests.
        .executableTarget(name: "sitekeep-bridge-testd", dependencies: ["SiteKeepBridge", "SiteKeepCustody", "SiteKeepCrypto"],
                          path: "Tests/SiteKeepBridgeTestDaemon"),
        .target(name: "SiteKeepTestSupport", dependencies: ["SiteKeepCrypto"], path: "Tests/SiteKeepTestSupport"),
        .testTarget(name: "SiteKeepSystemTests", dependencies: ["SiteKeepSystem"]),
        .testTarget(name: "SiteKeepJSONTests", dependencies: ["SiteKeepJSON"]),
        .testTarget(name: "SiteKeepCryptoTests", dependencies: ["SiteKeepCrypto", "SiteKeepHardening", "SiteKeepTestSupport"]),
        // Links the real libsecret headers (CSecret) only to check CSecretLoader's declarations against them.
        .testTarget(name: "SiteKeepKeyringTests", dependencies: ["SiteKeepKeyring", "SiteKeepTestSupport", "CSecret", "CSecretLoader"]),
        .testTarget(name: "SiteKeepCustodyTests", dependencies: ["SiteKeepCustody", "SiteKeepTestSupport"]),
        .testTarget(name: "SiteKeepPartitionsTests", dependencies: ["SiteKeepPartitions", "SiteKeepTestSupport"]),
        .testTarget(name: "SiteKeepVaultTests", dependencies: ["SiteKeepVault", "SiteKeepTestSupport"]),
        .testTarget(name: "SiteKeepBridgeTests", dependencies: ["SiteKeepBridge", "SiteKeepTestSupport"]),
        .testTarget(name: "SiteKeepAuditTests", dependencies: ["SiteKeepAudit", "SiteKeepTestSupport"]),
        .testTarget(name: "SiteKeepCommandLineTests", dependencies: ["SiteKeepCommandLine", "SiteKeepJSON", "SiteKeepCrypto", "SiteKeepCustody", "SiteKeepPartitions", "SiteKeepTestSupport"]),
        // The adversarial suite (issue 8): leak scan over a full CLI session, permissions, kill -9
        // loops, concurrency stress, hardening checks. Run by tools/test and, repeated, tools/attack.
        .testTarget(name: "SiteKeepAdversarialTests", dependencies: [
            "SiteKeepCommandLine", "SiteKeepJSON", "SiteKeepCrypto", "SiteKeepHardening", "SiteKeepKeyring",
            "SiteKeepCustody", "SiteKeepPartitions", "SiteKeepVault", "SiteKeepBridge", "SiteKeepTestSupport",
        ]),
    ],
    swiftLanguageModes: [.v6]
)

for target in package.targets where target.type != .system {
    target.swiftSettings = (target.swiftSettings ?? []) + [
        .enableUpcomingFeature("InternalImportsByDefault"),
        .enableUpcomingFeature("ExistentialAny"),
        .enableUpcomingFeature("MemberImportVisibility"),
    ]
}
