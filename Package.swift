// swift-tools-version:6.0
//
// SiteKeep: a sandboxed multi-site state store with key custody.
//
// Layers (each imports only the layers below it, and declares each here: tools/check-imports;
// see docs/ARCHITECTURE.md):
//
//   sitekeep (CLI)  ─ SiteKeepCommandLine (command parsing and printing)
//   SiteKeepDaemon  ─ the composition root: opens a store, wires the bridge's modules, starts the daemon
//   SiteKeepAudit   ─ isolation audit, importable by other test suites
//   SiteKeepWiring  ─ the bridge's and the agent's protocols on the engines (adapters), the one module registry
//   SiteKeepBridge  ─ op catalogue, dispatcher over op modules, service protocols, the bridge socket server
//                     (no custody, partitions, keyring, SQLite or OpenSSL in its closure: tools/check-imports)
//   SiteKeepVaultRemotes ─ vault server HTTP API (over SiteKeepHTTP), folder/static remotes, push queue
//   SiteKeepHTTP    ─ the one HTTP client: libcurl by dlopen (CCurlLoader), bounded, no redirects
//   SiteKeepCore    ─ domain types and rules (schedule, reminders, tabs, reading, ...), on JSON alone
//   SiteKeepPartitions (a generic sealed store: open namespaces) │ SiteKeepVault │ SiteKeepAgent (ssh-agent protocol over
//   a key source it declares: no custody or crypto library in its closure)
//   SiteKeepCustody ─ master key, slots, team/device keys, presence, audit log
//   SiteKeepCrypto  │ SiteKeepKeyring
//   SiteKeepVocabulary ─ the names: Origin (with Punycode), SiteID's UUID side; re-exports SiteKeepNames
//   (SiteID, KeyID, OpName, ItemKind, SigningAlgorithm, SSHAgentPolicy: no Foundation, so custody and
//   sitekeep-read stay without it); SiteKeepEncoding ─ Base64, Hex, PEM armour, CryptoError (no C)
//   CSodium · COpenSSL · CZlib · CSQLite  (system libraries); CSecretLoader (libsecret by dlopen;
//   the CSecret headers are used only by a test that checks the loader against them);
//   CCurlLoader (libcurl by dlopen, built against libcurl4-openssl-dev's headers); CTPMLoader
//   (tpm2-tss's ESAPI by dlopen, built against libtss2-dev's headers) under SiteKeepTPM, below custody
//
//   sitekeep-browser ─ CWebKitGTK (GTK 4 + WebKitGTK 6.0) · SiteKeepBrowserCore ─ SiteKeepJSON, SiteKeepVocabulary
//   (a client of the daemon: it links the bridge's wire, never custody, crypto or SQLite)
import PackageDescription
import Foundation

/// Whether the browser (GTK 4 + WebKitGTK 6.0; Debian: libgtk-4-dev, libwebkitgtk-6.0-dev, about
/// 220 MB) is part of the package. `SITEKEEP_BROWSER=1` includes it (a build then fails, naming
/// the packages, where they are missing: tools/test sets it, so CI never skips the browser),
/// `SITEKEEP_BROWSER=0` leaves it out, and otherwise it is there when pkg-config finds both.
/// Without them the CLI builds as before. SwiftPM caches this answer per environment: after
/// installing the packages, build with SITEKEEP_BROWSER=1 (or `swift package purge-cache`).
let browserAvailable: Bool = {
    switch ProcessInfo.processInfo.environment["SITEKEEP_BROWSER"] {
    case "1": return true
    case "0": return false
    default: break
    }
    let pkgConfig = Process()
    pkgConfig.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    pkgConfig.arguments = ["pkg-config", "--exists", "webkitgtk-6.0", "gtk4"]
    pkgConfig.standardOutput = FileHandle.nullDevice
    pkgConfig.standardError = FileHandle.nullDevice
    do { try pkgConfig.run() } catch { return false }
    pkgConfig.waitUntilExit()
    return pkgConfig.terminationStatus == 0
}()

/// The audit's fault switches (`AuditFaults`: checks turned off to prove the audit notices) exist
/// only in debug builds, where the tests run: a release build has neither the switches nor the
/// code paths they select.
let faultsInDebugOnly: [SwiftSetting] = [.define("SITEKEEP_FAULTS", .when(configuration: .debug))]

/// Release executables are linked by lld (shipped with the Swift toolchain) with packed relative
/// relocations (DT_RELR, glibc 2.36): the dynamic loader applies the tens of thousands of
/// relative relocations of a static-stdlib PIE from a bitmap instead of one table entry each,
/// which is most of a short command's start-up (BENCHMARKS.md, "The daemon client"). Still PIE.
let packedRelocations: [LinkerSetting] = [
    .unsafeFlags(["-use-ld=lld", "-Xlinker", "-z", "-Xlinker", "pack-relative-relocs"], .when(configuration: .release)),
]

let package = Package(
    name: "SiteKeep",
    products: [
        .library(name: "SiteKeepSystem", targets: ["SiteKeepSystem"]),
        .library(name: "SiteKeepJSON", targets: ["SiteKeepJSON"]),
        .library(name: "SiteKeepEncoding", targets: ["SiteKeepEncoding"]),
        .library(name: "SiteKeepVocabulary", targets: ["SiteKeepVocabulary"]),
        .library(name: "SiteKeepNames", targets: ["SiteKeepNames"]),
        .library(name: "SiteKeepCrypto", targets: ["SiteKeepCrypto"]),
        .library(name: "SiteKeepKeyring", targets: ["SiteKeepKeyring"]),
        .library(name: "SiteKeepCustody", targets: ["SiteKeepCustody"]),
        .library(name: "SiteKeepPartitions", targets: ["SiteKeepPartitions"]),
        .library(name: "SiteKeepVault", targets: ["SiteKeepVault"]),
        .library(name: "SiteKeepVaultRemotes", targets: ["SiteKeepVaultRemotes"]),
        .library(name: "SiteKeepCore", targets: ["SiteKeepCore"]),
        .library(name: "SiteKeepAgent", targets: ["SiteKeepAgent"]),
        .library(name: "SiteKeepSocket", targets: ["SiteKeepSocket"]),
        .library(name: "SiteKeepBridgeProtocol", targets: ["SiteKeepBridgeProtocol"]),
        .library(name: "SiteKeepBridge", targets: ["SiteKeepBridge"]),
        .library(name: "SiteKeepWiring", targets: ["SiteKeepWiring"]),
        .library(name: "SiteKeepAudit", targets: ["SiteKeepAudit"]),
        .library(name: "SiteKeepDaemon", targets: ["SiteKeepDaemon"]),
        // Test support (in-memory services and keys, fixtures, child processes), for the fuzz
        // package; never linked by a production executable.
        .library(name: "SiteKeepTestSupport", targets: ["SiteKeepTestSupport"]),
        // `sitekeep` is the daemon client people run; when no daemon serves the store it execs
        // `sitekeep-read` (a one-shot `vault cat`) or `sitekeep-main`, the whole tool. The three
        // ship together, in one folder.
        .executable(name: "sitekeep", targets: ["sitekeep"]),
        .executable(name: "sitekeep-main", targets: ["sitekeep-main"]),
        .executable(name: "sitekeep-read", targets: ["sitekeep-read"]),
    ] + (browserAvailable ? [.executable(name: "sitekeep-browser", targets: ["sitekeep-browser"])] : []),
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
        // reads and writes, private folders, file locks, child processes. Glibc, and the
        // header-only Linux shims (renameat2).
        .target(name: "SiteKeepSystem", dependencies: ["CLinux"]),
        // Strict JSON: a bounded parser and the exact byte forms (canonical, Python-style) the
        // vault format and the bridge need. Pure Swift, no dependencies.
        .target(name: "SiteKeepJSON"),
        // The byte-to-text encodings: Base64 (standard and URL-safe) and Hex, constant-time, in
        // Swift, PEM armour, and CryptoError (the one error of the crypto layer, which their decoders
        // throw).
        // Pure Swift, no dependencies: the bridge and the ssh-agent protocol encode without
        // linking libsodium; SiteKeepSecureMemory (and so SiteKeepCrypto) re-exports it.
        .target(name: "SiteKeepEncoding"),
        // The names every layer passes around, each parsed once at the edge into a type: a web
        // origin (`Origin`, the one origin parser: UTS 46 basics and Punycode), a site id, and
        // (re-exported from SiteKeepNames) a key id, a bridge op name, a keyring item kind.
        // Foundation (NFKC, UUID) and SiteKeepNames only.
        .target(name: "SiteKeepVocabulary", dependencies: ["SiteKeepNames"]),
        // The vocabulary's names that need no Foundation: SiteID, KeyID, OpName, ItemKind and their
        // VocabularyError, and the signing algorithms and SSH policy custody keeps and the ssh-agent
        // protocol offers (SigningAlgorithm, SSHAgentPolicy). Pure Swift, no dependencies: custody names
        // sites, key ids, ops and item kinds through it, so sitekeep-read (custody, keyring, vault)
        // still loads no Foundation.
        .target(name: "SiteKeepNames"),
        // Guarded memory for secrets (SecretBytes), libsodium's start, and the hardening they rely
        // on (not dumpable, no core dumps); re-exports SiteKeepEncoding (CryptoError, Base64, Hex). libsodium only: the `sitekeep`
        // front end holds a relayed secret without loading OpenSSL or zlib, whose dynamic
        // loading was a third of its start-up (BENCHMARKS.md, "The one-shot start-up").
        .target(name: "SiteKeepSecureMemory", dependencies: ["SiteKeepEncoding", "CSodium", "CLinux"]),
        // Crypto: typed primitives on libsodium, OpenSSL only where libsodium lacks them.
        // Re-exports SiteKeepSecureMemory.
        .target(name: "SiteKeepCrypto", dependencies: ["SiteKeepSecureMemory", "CSodium", "COpenSSL", "CZlib"]),
        // Process hardening every executable but the front end calls first (the secure memory's,
        // then OpenSSL's secure heap).
        .target(name: "SiteKeepHardening", dependencies: ["SiteKeepSecureMemory", "SiteKeepCrypto"]),
        // Keyring backends: opaque wrapped blobs in the Secret Service or an encrypted file.
        // The Secret Service client, loaded with dlopen only when that keyring is used.
        .target(name: "CSecretLoader"),
        .target(name: "SiteKeepKeyring", dependencies: ["SiteKeepSystem", "CSecretLoader", "SiteKeepCrypto", "SiteKeepJSON"]),
        // tpm2-tss's ESAPI reached through dlopen on first use (a TPM is optional hardware: no
        // executable needs libtss2 to start); the whole ESAPI sequence of seal and unseal is in
        // its C. Its headers come from libtss2-dev (tools/setup).
        .target(name: "CTPMLoader"),
        // TPM 2.0 sealing for custody's TPM slots: seal and unseal under the owner's storage
        // primary, PIN and PCR policy, the dictionary-attack state; typed errors. No Foundation.
        .target(name: "SiteKeepTPM", dependencies: ["CTPMLoader", "SiteKeepSecureMemory"]),
        // Custody: the only layer that holds unwrapped keys.
        .target(name: "SiteKeepCustody", dependencies: ["SiteKeepNames", "SiteKeepSystem", "SiteKeepCrypto", "SiteKeepKeyring", "SiteKeepJSON", "CLinux", "SiteKeepTPM", "SiteKeepFIDO2"]),
        // One SQLite partition per site, values sealed through custody.
        .target(name: "SiteKeepPartitions", dependencies: ["SiteKeepVocabulary", "SiteKeepSystem", "CSQLite", "SiteKeepCustody", "SiteKeepCrypto", "SiteKeepJSON"], swiftSettings: faultsInDebugOnly),
        // The ssh-agent protocol (RFC 9987): wire codec, OpenSSH key, signature and SSHSIG
        // encodings, session bindings, the connection handler, its socket. Over a key source and
        // the cryptography it declares (AgentKeySource, SSHCryptography), which SiteKeepWiring
        // implements on custody and the crypto layer: no custody, keyring or crypto library here.
        .target(name: "SiteKeepAgent", dependencies: ["SiteKeepNames", "SiteKeepEncoding", "SiteKeepSocket", "SiteKeepSystem", "CLinux"]),
        // sgit-format vault client.
        .target(name: "SiteKeepVault", dependencies: ["SiteKeepSystem", "SiteKeepCrypto", "SiteKeepCustody", "SiteKeepJSON"]),
        // Vault remotes: the vault server's HTTP API, folder and static remotes, clone/pull/push
        // orchestration and the durable push queue. HTTP goes through SiteKeepHTTP (libcurl).
        .target(name: "SiteKeepVaultRemotes", dependencies: ["SiteKeepVault", "SiteKeepCustody", "SiteKeepCrypto", "SiteKeepJSON", "SiteKeepSystem", "SiteKeepHTTP"]),
        // libcurl reached through dlopen on the first request (so no executable maps libcurl and
        // its ~30 libraries at start-up); the whole transfer policy is in its C: no redirects, the
        // body bounded while it streams, https or loopback http, no proxy, time-outs. Its headers
        // come from libcurl4-openssl-dev (tools/setup).
        .target(name: "CCurlLoader"),
        // libfido2 reached through dlopen on first use (a security key is optional hardware: no
        // executable needs libfido2 to start), and the Unix-socket carrier of the software
        // authenticator behind libfido2's transport hooks. Its headers come from libfido2-dev.
        .target(name: "CFIDO2Loader"),
        // FIDO2 security keys: list, make an hmac-secret credential, its hmac-secret (and WebAuthn
        // PRF) output in guarded memory, a verified touch for presence; typed errors. Below custody,
        // which uses it for `slot add fido2`, `unlock --fido2` and keys that need a touch.
        .target(name: "SiteKeepFIDO2", dependencies: ["CFIDO2Loader", "SiteKeepSecureMemory", "SiteKeepCrypto"]),
        // SiteKeep's one HTTP client (vault remotes, agenda fetches) over CCurlLoader; credential
        // headers from guarded memory (SiteKeepSecureMemory).
        .target(name: "SiteKeepHTTP", dependencies: ["CCurlLoader", "SiteKeepSecureMemory"]),
        // The native core's domain types and rules: schedule (nr.schedule.v1), agenda, reminders
        // and their leads, calendar export, "what is next", workflows, inbox, identity, tabs,
        // reading state and capture notes. Swift on JSON, SiteKeepSystem and Foundation only: no
        // partitions, custody, SQLite or C, so the bridge carries its types without linking them
        // (SiteKeepWiring keeps tabs and reading state in the partitions' sealed rows, and the
        // partition document). The daemon fills its interfaces (fetcher, caches, sinks).
        .target(name: "SiteKeepCore", dependencies: ["SiteKeepVocabulary", "SiteKeepSystem", "SiteKeepJSON"]),
        // Desktop notifications: the freedesktop Notifications D-Bus API through GIO, loaded with
        // dlopen on first use (CGioLoader), with a printing fallback.
        .target(name: "CGioLoader"),
        .target(name: "SiteKeepDesktop", dependencies: ["CGioLoader", "SiteKeepCore"]),
        // Unix-socket plumbing shared by the bridge, control and ssh-agent sockets: listening in a
        // private folder, socket activation, SO_PEERCRED, the client's owner checks, an accept
        // loop with one thread per connection and a draining stop.
        .target(name: "SiteKeepSocket", dependencies: ["SiteKeepSystem", "CLinux"]),
        // The bridge's wire without its engine: messages, error codes, BridgeClient, the control
        // socket's protocol and where a store's daemon listens. JSON and sockets only, so a
        // web-view host links it without custody, SQLite or OpenSSL.
        .target(name: "SiteKeepBridgeProtocol", dependencies: ["SiteKeepJSON", "SiteKeepSocket", "SiteKeepSystem"]),
        // The bridge: the op catalogue, the dispatcher, the service protocols its modules call
        // and the bridge socket server (the control socket's server is the daemon's). The engines
        // behind the protocols are wired in SiteKeepWiring: nothing of custody, the partitions, the
        // keyring, SQLite or OpenSSL is in its closure (tools/check-imports).
        .target(name: "SiteKeepBridge", dependencies: ["SiteKeepVocabulary", "SiteKeepBridgeProtocol", "SiteKeepSocket", "SiteKeepSystem", "SiteKeepJSON", "SiteKeepCore", "SiteKeepEncoding"],
                resources: [.copy("ops.json")]),
        // The bridge's service protocols implemented on the engines: custody, the partitions, the
        // vault library and the native core (the adapters, and the error mapping from each engine's
        // typed errors to the bridge's codes), and the one registry of the modules a store serves.
        // Also the core's state in a site's partition (TabsStore, ReadingStore, PartitionDocument),
        // and the ssh-agent's key source on custody (CustodyAgentKeys) and its cryptography.
        // The composition root (the daemon), the audit and the command line use it; the bridge
        // itself knows only its protocols.
        .target(name: "SiteKeepWiring", dependencies: ["SiteKeepVocabulary", "SiteKeepSystem", "SiteKeepSocket", "SiteKeepBridge", "SiteKeepCrypto", "SiteKeepCustody", "SiteKeepPartitions", "SiteKeepVault", "SiteKeepCore", "SiteKeepJSON", "SiteKeepFIDO2", "SiteKeepAgent", "SiteKeepNames"]),
        // Isolation audit, importable by other test suites.
        .target(name: "SiteKeepAudit", dependencies: ["SiteKeepVocabulary", "SiteKeepPartitions", "SiteKeepCore", "SiteKeepCustody", "SiteKeepVault", "SiteKeepBridge", "SiteKeepWiring", "SiteKeepJSON", "SiteKeepSystem"], swiftSettings: faultsInDebugOnly),
        // The composition root: opens a store and wires custody, the site registry, the vault
        // library, the native core and the bridge's modules into one daemon (bridge, control and
        // ssh-agent sockets, reminders, vault sync, the session-lock watch). The CLI's `serve`
        // and any host start it through `Daemon`; it never imports the command line.
        .target(name: "SiteKeepDaemon", dependencies: [
            "SiteKeepVocabulary", "SiteKeepSystem", "SiteKeepJSON", "SiteKeepCrypto", "SiteKeepKeyring", "SiteKeepCustody", "SiteKeepPartitions",
            "SiteKeepVault", "SiteKeepVaultRemotes", "SiteKeepCore", "SiteKeepDesktop", "SiteKeepAgent", "SiteKeepSocket",
            "SiteKeepBridgeProtocol", "SiteKeepBridge", "SiteKeepWiring", "SiteKeepFIDO2", "CLinux",
        ]),
        // Command-line conventions and commands (testable library behind the thin executable).
        .target(name: "SiteKeepCommandLine", dependencies: [
            "SiteKeepVocabulary", "SiteKeepSystem", "SiteKeepHardening", "SiteKeepJSON", "SiteKeepCrypto", "SiteKeepKeyring", "SiteKeepCustody",
            "SiteKeepPartitions", "SiteKeepVault", "SiteKeepVaultRemotes", "SiteKeepBridge", "SiteKeepWiring", "SiteKeepBridgeProtocol", "SiteKeepSocket", "SiteKeepAudit", "SiteKeepCore", "SiteKeepDesktop", "SiteKeepAgent",
            "SiteKeepDaemon",
            "SiteKeepRunClient",
            "SiteKeepHTTP", "SiteKeepFIDO2",
        ]),
        .executableTarget(name: "sitekeep-main", dependencies: ["SiteKeepCommandLine", "SiteKeepHardening"], linkerSettings: packedRelocations),
        // A command run inside the daemon, from the client's side: the `run` relay and the
        // process's terminal. Glibc, JSON, sockets and guarded memory only: no Foundation, no OpenSSL.
        .target(name: "SiteKeepRunClient", dependencies: ["SiteKeepBridgeProtocol", "SiteKeepSocket", "SiteKeepJSON", "SiteKeepSystem", "SiteKeepSecureMemory"]),
        // The `sitekeep` front end: runs a command in its store's daemon, else execs sitekeep-read
        // or sitekeep-main.
        // It must never link Foundation, OpenSSL or zlib (DaemonClientTests checks): its start-up is the point.
        .executableTarget(name: "sitekeep", dependencies: ["SiteKeepRunClient", "SiteKeepBridgeProtocol", "SiteKeepSystem", "SiteKeepSecureMemory"],
                          linkerSettings: packedRelocations),
        // `sitekeep-read`: the one-shot `vault cat NAME PATH --prf-file F` the front end hands it when
        // no daemon runs (custody, the keyring and the vault; no Foundation, no SQLite), else sitekeep-main.
        .executableTarget(name: "sitekeep-read", dependencies: [
            "SiteKeepRunClient", "SiteKeepBridgeProtocol", "SiteKeepSystem", "SiteKeepSecureMemory", "SiteKeepCrypto", "SiteKeepKeyring",
            "SiteKeepCustody", "SiteKeepHardening", "SiteKeepVault",
        ], linkerSettings: packedRelocations),
        // The browser's logic that needs no GTK: sites and navigation rules, the page's bridge
        // scripts, the tab session, the kept-page cache, the daemon link. Only the vocabulary (its
        // `Origin` decides every origin question), JSON and System below it.
        .target(name: "SiteKeepBrowserCore", dependencies: ["SiteKeepVocabulary", "SiteKeepSystem", "SiteKeepJSON", "SiteKeepSocket", "SiteKeepBridgeProtocol"]),
        // Test helper: streams acknowledged partition writes until killed (the kill -9 test).
        .executableTarget(name: "sitekeep-crashwriter", dependencies: [
            "SiteKeepVocabulary", "SiteKeepHardening", "SiteKeepCrypto", "SiteKeepCustody", "SiteKeepPartitions",
        ]),
        // Release-built benchmark driver used by tools/bench. It talks to the C libraries
        // directly as well, to print wrapper-vs-raw ratios.
        .executableTarget(name: "sitekeep-bench", dependencies: [
            "SiteKeepVocabulary", "SiteKeepHardening", "SiteKeepCrypto", "SiteKeepKeyring", "SiteKeepCustody", "SiteKeepSystem",
            "SiteKeepPartitions", "SiteKeepVault", "SiteKeepVaultRemotes", "SiteKeepBridge", "SiteKeepWiring", "SiteKeepAgent", "SiteKeepJSON", "SiteKeepCore", "CSodium", "COpenSSL", "CSQLite",
            "SiteKeepTestSupport", "SiteKeepSocket", "SiteKeepFIDO2", "SiteKeepSoftFIDO2", "SiteKeepTPM", "SiteKeepNames",
        ]),

        // The bridge daemon on in-memory services, spawned by the bridge's process-level tests.
        .executableTarget(name: "sitekeep-bridge-testd", dependencies: ["SiteKeepBridge", "SiteKeepCustody", "SiteKeepCrypto", "SiteKeepTestSupport"],
                          path: "Tests/SiteKeepBridgeTestDaemon"),
        // The one test-support target, kept out of Sources/: fixtures, child processes, a pty, a
        // FIFO watchdog and a fake daemon, and the in-memory stand-ins (bridge services, site
        // storage keys, vault keys, a signing audit file) for tests, the test daemon, the fuzz
        // targets and the benchmarks.
        .target(name: "SiteKeepTestSupport", dependencies: ["SiteKeepVocabulary", "SiteKeepBridge", "SiteKeepBridgeProtocol", "SiteKeepWiring", "SiteKeepCore", "SiteKeepJSON", "SiteKeepCustody", "SiteKeepCrypto",
                                                            "SiteKeepPartitions", "SiteKeepVault", "SiteKeepSystem", "SiteKeepSocket", "SiteKeepSoftFIDO2", "SiteKeepFIDO2"],
                path: "Tests/SiteKeepTestSupport"),
        // The software CTAP2 authenticator (CTAPHID messages over a Unix socket, hmac-secret, the
        // PIN protocols, a touch the test decides), test-side only: the library and its runner.
        .target(name: "SiteKeepSoftFIDO2", dependencies: ["COpenSSL"], path: "Tests/SiteKeepSoftFIDO2"),
        .executableTarget(name: "sitekeep-soft-fido2", dependencies: ["SiteKeepSoftFIDO2"], path: "Tests/SiteKeepSoftFIDO2Runner"),
        .testTarget(name: "SiteKeepFIDO2Tests", dependencies: ["SiteKeepFIDO2", "SiteKeepSoftFIDO2", "SiteKeepCrypto", "SiteKeepCustody", "SiteKeepKeyring", "SiteKeepSystem", "SiteKeepTestSupport", "SiteKeepNames"]),
        .testTarget(name: "SiteKeepSystemTests", dependencies: ["SiteKeepSystem", "SiteKeepTestSupport"]),
        .testTarget(name: "SiteKeepSocketTests", dependencies: ["SiteKeepSocket", "SiteKeepSystem", "SiteKeepTestSupport"]),
        .testTarget(name: "SiteKeepJSONTests", dependencies: ["SiteKeepJSON"]),
        // The vocabulary's parsers: origins (UTS 46 basics, Punycode), site ids, key ids, op names, item kinds.
        .testTarget(name: "SiteKeepVocabularyTests", dependencies: ["SiteKeepVocabulary", "SiteKeepNames"]),
        // Unit tests of the browser's core, and the browser itself under Xvfb against local sites
        // and a real `sitekeep serve` (they run the built executables; no GTK is linked here).
        .testTarget(name: "SiteKeepBrowserTests", dependencies: ["SiteKeepBrowserCore", "SiteKeepVocabulary", "SiteKeepBridgeProtocol", "SiteKeepSocket", "SiteKeepJSON", "SiteKeepCrypto", "SiteKeepTestSupport"],
                    exclude: ["png_colours.py"]),
        .testTarget(name: "SiteKeepCryptoTests", dependencies: ["SiteKeepCrypto", "SiteKeepHardening", "SiteKeepTestSupport", "CSodium"]),
        // Links the real libsecret headers (CSecret) only to check CSecretLoader's declarations against them.
        .testTarget(name: "SiteKeepKeyringTests", dependencies: ["SiteKeepKeyring", "SiteKeepSystem", "SiteKeepTestSupport", "CSecret", "CSecretLoader"]),
        .testTarget(name: "SiteKeepCustodyTests", dependencies: ["SiteKeepVocabulary", "SiteKeepCustody", "SiteKeepSystem", "SiteKeepTestSupport", "SiteKeepCrypto", "SiteKeepKeyring", "SiteKeepTPM"]),
        .testTarget(name: "SiteKeepPartitionsTests", dependencies: ["SiteKeepVocabulary", "SiteKeepPartitions", "SiteKeepTestSupport", "SiteKeepCustody"]),
        .testTarget(name: "SiteKeepVaultTests", dependencies: ["SiteKeepVault", "SiteKeepTestSupport", "SiteKeepCrypto", "SiteKeepCustody", "SiteKeepJSON", "SiteKeepKeyring", "SiteKeepSystem"]),
        .testTarget(name: "SiteKeepVaultRemotesTests", dependencies: ["SiteKeepVaultRemotes", "SiteKeepHTTP", "SiteKeepVault", "SiteKeepCustody", "SiteKeepCrypto", "SiteKeepJSON", "SiteKeepTestSupport"],
                    exclude: ["bad_vault_server.py", "hostile_http_server.py", "hostile_lane_server.py"]),
        .testTarget(name: "SiteKeepCoreTests", dependencies: ["SiteKeepCore", "SiteKeepJSON", "SiteKeepTestSupport"]),
        // The core's state kept in a partition by SiteKeepWiring: tabs, reading state, the partition document.
        .testTarget(name: "SiteKeepWiringTests", dependencies: ["SiteKeepWiring", "SiteKeepCore", "SiteKeepJSON", "SiteKeepPartitions", "SiteKeepTestSupport"]),
        .testTarget(name: "SiteKeepBridgeTests", dependencies: ["SiteKeepVocabulary", "SiteKeepBridge", "SiteKeepWiring", "SiteKeepBridgeProtocol", "SiteKeepSocket", "SiteKeepJSON", "SiteKeepTestSupport", "SiteKeepCore", "SiteKeepCrypto", "SiteKeepCustody", "SiteKeepKeyring", "SiteKeepPartitions"]),
        .testTarget(name: "SiteKeepAuditTests", dependencies: ["SiteKeepAudit", "SiteKeepTestSupport", "SiteKeepPartitions", "SiteKeepJSON"], swiftSettings: faultsInDebugOnly),
        .testTarget(name: "SiteKeepCommandLineTests", dependencies: ["SiteKeepCommandLine", "SiteKeepDaemon", "SiteKeepDesktop", "SiteKeepBridgeProtocol", "SiteKeepSocket", "SiteKeepJSON", "SiteKeepCrypto", "SiteKeepKeyring", "SiteKeepCustody", "SiteKeepPartitions", "SiteKeepVault", "SiteKeepBridge", "SiteKeepWiring", "SiteKeepAgent", "SiteKeepRunClient", "SiteKeepTestSupport", "SiteKeepSoftFIDO2", "SiteKeepFIDO2"]),
        // The daemon as a library (started through SiteKeepDaemon's API alone, as a host starts it) and
        // as a process (the built `sitekeep serve`, with the built `sitekeep-main` for the commands
        // around it): no command line linked.
        .testTarget(name: "SiteKeepDaemonTests", dependencies: ["SiteKeepDaemon", "SiteKeepBridgeProtocol", "SiteKeepCrypto", "SiteKeepCustody",
                                                               "SiteKeepJSON", "SiteKeepKeyring", "SiteKeepPartitions", "SiteKeepSocket", "SiteKeepTestSupport",
                                                               "SiteKeepSoftFIDO2"]),
        .testTarget(name: "SiteKeepAgentTests", dependencies: ["SiteKeepAgent", "SiteKeepWiring", "SiteKeepSocket", "SiteKeepCustody", "SiteKeepCrypto", "SiteKeepKeyring", "SiteKeepTestSupport"]),
        // The adversarial suite (issue 8): leak scan over a full CLI session, permissions, kill -9
        // loops, concurrency stress, hardening checks. Run by tools/test and, repeated, tools/attack.
        .testTarget(name: "SiteKeepAdversarialTests", dependencies: [
            "SiteKeepVocabulary", "SiteKeepCommandLine", "SiteKeepJSON", "SiteKeepCrypto", "SiteKeepHardening", "SiteKeepKeyring",
            "SiteKeepCustody", "SiteKeepPartitions", "SiteKeepVault", "SiteKeepBridge", "SiteKeepWiring", "SiteKeepSocket", "SiteKeepTestSupport",
        ]),
    ],
    swiftLanguageModes: [.v6]
)

if browserAvailable {
    package.targets += [
        // GTK 4 + WebKitGTK 6.0: module map and a header of typed helpers (signals, g_object_new, g_idle_add).
        .systemLibrary(name: "CWebKitGTK", pkgConfig: "webkitgtk-6.0", providers: [.apt(["libwebkitgtk-6.0-dev", "libgtk-4-dev"])]),
        // The focused browser: a web view per tab, a network session per site, the bridge in the page.
        .executableTarget(name: "sitekeep-browser", dependencies: ["CWebKitGTK", "SiteKeepBrowserCore", "SiteKeepBridgeProtocol", "SiteKeepVocabulary", "SiteKeepJSON", "SiteKeepSystem"]),
    ]
}

for target in package.targets where target.type != .system {
    target.swiftSettings = (target.swiftSettings ?? []) + [
        .enableUpcomingFeature("InternalImportsByDefault"),
        .enableUpcomingFeature("ExistentialAny"),
        .enableUpcomingFeature("MemberImportVisibility"),
    ]
}
