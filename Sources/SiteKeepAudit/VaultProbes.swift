import SiteKeepVault
import SiteKeepPartitions
import SiteKeepVocabulary

/// Vault paths a caller (the empty path is the vault's root and is allowed) (a page through `vault.load`, or the CLI) might use to leave the vault's
/// tree or confuse it: every one must be refused before any file is touched.
public struct VaultPathProbe: Probe {
    public let name = "vault-paths"
    public let summary = "vault paths with '..', absolute paths, NUL, empty segments or control characters are refused before any read"

    public init() {}

    /// The hostile paths, with the subject's own host woven in so each site tries its own.
    static func hostile(for host: String) -> [String] {
        ["../\(host).json", "sitekeep/../../\(host)", "/etc/passwd", "/\(host)", "docs/\u{0}\(host)", "docs//\(host)",
         "./\(host)", "docs/./x", "docs/..", "..", ".", "docs/\u{1b}[2J", "docs/x\n../y", "docs/\u{7f}"]
    }

    public func run(subject: AuditSite, context: AuditContext) throws -> ProbeOutcome {
        for path in Self.hostile(for: subject.origin.host) {
            if (try? VaultPath(validating: path)) != nil {
                return .leak("the vault path \(String(reflecting: path)) was accepted")
            }
        }
        // A well-formed path still passes (a probe that refuses everything proves nothing).
        guard (try? VaultPath(validating: "sitekeep/sites/page.json")) != nil else { return .error("a normal vault path was refused") }
        return .pass
    }
}
