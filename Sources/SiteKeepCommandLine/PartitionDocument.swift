internal import SiteKeepCore
internal import SiteKeepWiring
internal import SiteKeepPartitions
internal import SiteKeepVault
import SiteKeepVocabulary

/// A rebuild source reading a site's ``PartitionDocument`` (the core's `sitekeep_partition_v1`)
/// from a vault's HEAD.
struct VaultPartitionSource: PartitionRebuildSource {
    let vault: Vault
    let path: String
    func contents(forSite site: SiteID) throws -> PartitionContents {
        try PartitionDocument(bytes: try vault.read(path: path)).contents()
    }
}
