import Testing
import SiteKeepVault
@testable import SiteKeepVault

/// The commit schemas SiteKeep reads: sgit's commit_v1 and the sites' web client's commit_v2
/// (sg-vault 0.1.x–0.2.3: unsigned, `branch_id` "main" or null), through the one commit parse;
/// any other schema is refused with a message that names it and who writes what is read.
@Suite("Commit schemas")
struct CommitSchemaTests {
    let id = ObjectID("obj-cas-imm-0123456789ab")!
    let tree = "obj-cas-imm-ba9876543210"

    func commit(schema: String?, branch: String = "null") -> [UInt8] {
        let s = schema.map { "\"schema\": \"\($0)\", " } ?? ""
        return Array(#"{\#(s)"parents": [], "tree_id": "\#(tree)", "timestamp_ms": 1765000000000, "message_enc": "", "branch_id": \#(branch), "signature": null}"#.utf8)
    }

    @Test("the web client's commit_v2, as v0.2.3 (branch_id null) and v0.1.4 (\"main\") write it, parses as an unsigned commit")
    func webCommitParses() throws {
        for branch in ["null", "\"main\""] {
            let c = try Commit.parse(commit(schema: "commit_v2", branch: branch), id: id)
            #expect(c.treeID.rawValue == tree && c.parents.isEmpty && c.rawSignature == nil && c.authorKeyID == nil)
            #expect(c.schema == "commit_v2", "the signing bytes keep the schema as stored")
        }
        _ = try Commit.parse(commit(schema: "commit_v1"), id: id)
    }

    @Test("an unknown or absent schema is refused, naming it and the writers of what SiteKeep reads")
    func unknownSchemaIsRefused() {
        for schema in ["commit_v3", "commit_v9", "tree_v1", nil] as [String?] {
            let e = #expect(throws: VaultError.self) { try Commit.parse(commit(schema: schema), id: id) }
            let text = e?.description ?? ""
            #expect(text.contains("commit_v1") && text.contains("commit_v2") && text.contains("sg-vault") && text.contains("sgit"), "\(text)")
            if let schema { #expect(text.contains(schema), "\(text)") } else { #expect(text.contains("no schema"), "\(text)") }
        }
    }
}
