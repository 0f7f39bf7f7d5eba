import Foundation
import Testing

/// A code search, as a test: no public API of the crypto or custody layers hands out key bytes.
/// Reading a secret's bytes (`withUnsafeBytes`), exporting a key for wrapping (`seed`,
/// `pkcs8DER`, `pkcs8PEM`, `exportForWrapping`) and building a handle from bytes are all
/// `package`: usable inside SiteKeep's own modules, invisible to anything that imports them.
@Suite struct KeyAccessSurfaceTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// Declarations that expose key bytes if they are `public` or `open`.
    static let forbidden = ["func withUnsafeBytes", "func seed(", "func pkcs8DER(", "func pkcs8PEM(",
                            "func exportForWrapping(", "func importWrapped(", "init(taking", "func withVaultSecret",
                            "func withScope"]

    @Test(arguments: ["SiteKeepCrypto", "SiteKeepCustody", "SiteKeepKeyring", "SiteKeepVault", "SiteKeepPartitions", "SiteKeepBridge"])
    func noPublicDeclarationReturnsKeyBytes(module: String) throws {
        let dir = Self.root.appendingPathComponent("Sources/\(module)")
        let files = try #require(FileManager.default.enumerator(at: dir, includingPropertiesForKeys: nil)?.allObjects as? [URL])
        var checked = 0
        for file in files where file.pathExtension == "swift" {
            let lines = try String(contentsOf: file, encoding: .utf8).split(separator: "\n", omittingEmptySubsequences: false)
            for (n, line) in lines.enumerated() {
                let text = line.trimmingCharacters(in: .whitespaces)
                guard text.hasPrefix("public ") || text.hasPrefix("open ") else { continue }
                checked += 1
                for pattern in Self.forbidden where text.contains(pattern) {
                    // `withScope` is public by design: its KeyScope offers seal/open/MAC only, never bytes.
                    if pattern == "func withScope" && module == "SiteKeepCustody" { continue }
                    Issue.record("\(file.lastPathComponent):\(n + 1) is public and exposes key material: \(text)")
                }
                // A public API must not return SecretBytes to callers outside SiteKeep... except
                // the constructors of SecretBytes itself and crypto results that stay guarded.
                if module != "SiteKeepCrypto", text.contains("-> SecretBytes") {
                    Issue.record("\(file.lastPathComponent):\(n + 1) returns SecretBytes publicly above the crypto layer: \(text)")
                }
            }
        }
        #expect(checked > 0 || module == "SiteKeepBridge", "no public declarations found in \(module): wrong path?")
    }
}
