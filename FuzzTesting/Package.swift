// swift-tools-version:6.0
//
// SiteKeep's fuzz targets, kept out of the main package so that nothing here can clash with the
// `sitekeep` executable's `main` (see docs/STYLE.md §10, the one recipe that works with SwiftPM on
// Linux). Each target is an executable whose only code is `@_cdecl("LLVMFuzzerTestOneInput")`;
// built with `swift build -c release --sanitize fuzzer --sanitize address`, SwiftPM links
// libFuzzer's own `main`. Run them with `tools/fuzz <Target> [seconds]`.
//
// Adding a target: add `.executableTarget(name: "Fuzz<Layer>", dependencies: [...])` below, a
// `Sources/Fuzz<Layer>/Fuzz<Layer>.swift` (not `main.swift`), and seeds under
// `Fixtures/fuzz-corpus/Fuzz<Layer>/`.
import PackageDescription

let package = Package(
    name: "SiteKeepFuzzTesting",
    dependencies: [
        .package(name: "SiteKeep", path: ".."),
    ],
    targets: [
        // PEM, DER (SPKI, PKCS#8, ECDSA signatures), base64/base64url/hex and zlib parsing.
        .executableTarget(name: "FuzzCrypto", dependencies: [
            .product(name: "SiteKeepCrypto", package: "SiteKeep"),
        ]),
        // Site origins (`Origin(parsing:)`): what a page or a site list hands the registry.
        .executableTarget(name: "FuzzOrigin", dependencies: [
            .product(name: "SiteKeepVocabulary", package: "SiteKeep"),
        ]),
        // Slot headers read back from the keyring, through the custodian's public API.
        .executableTarget(name: "FuzzSlotHeader", dependencies: [
            .product(name: "SiteKeepCustody", package: "SiteKeep"),
            .product(name: "SiteKeepKeyring", package: "SiteKeep"),
            .product(name: "SiteKeepCrypto", package: "SiteKeep"),
        ]),
        // sgit vault objects: the envelope (v1, sgz1), refs, commits, trees, branch indexes.
        .executableTarget(name: "FuzzVaultObjects", dependencies: [
            .product(name: "SiteKeepVault", package: "SiteKeep"),
            .product(name: "SiteKeepCustody", package: "SiteKeep"),
            .product(name: "SiteKeepCrypto", package: "SiteKeep"),
        ]),
        // Team key `#key=` links and key files (`TeamKeyMaterial.webLink` / `.detect`).
        .executableTarget(name: "FuzzKeyLink", dependencies: [
            .product(name: "SiteKeepCustody", package: "SiteKeep"),
            .product(name: "SiteKeepCrypto", package: "SiteKeep"),
        ]),
        // Bridge request frames through the dispatcher (in-memory services): decoder, envelope,
        // catalogue shapes, binding and every handler.
        .executableTarget(name: "FuzzBridge", dependencies: [
            .product(name: "SiteKeepBridge", package: "SiteKeep"),
            .product(name: "SiteKeepJSON", package: "SiteKeep"),
            .product(name: "SiteKeepTestSupport", package: "SiteKeep"),
        ]),
        // The ssh-agent protocol: framing, request decoding, the connection handler (with a fixed
        // key source), key blobs, SSHSIG, login requests and session-bind.
        .executableTarget(name: "FuzzAgent", dependencies: [
            .product(name: "SiteKeepAgent", package: "SiteKeep"),
            .product(name: "SiteKeepCustody", package: "SiteKeep"),
        ]),
    ],
    swiftLanguageModes: [.v6]
)
