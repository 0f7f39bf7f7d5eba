public import SiteKeepVocabulary

extension PartitionError {
    /// The partitions layer's error for a name that did not parse: a site identifier keeps its
    /// own case, and so the message it always had; any other name is an invalid value.
    public init(_ error: VocabularyError) {
        switch error {
        case .invalidSiteIdentifier(let text): self = .invalidSiteIdentifier(SiteID.escape(text))
        case .invalidKeyID, .invalidOpName, .unknownItemKind: self = .invalidValue(error.description)
        }
    }
}

extension SiteID {
    /// Parses `text` as ``SiteID/init(parsing:)`` does, for code whose errors are the
    /// partitions layer's.
    /// - Throws: ``PartitionError/invalidSiteIdentifier(_:)``.
    public static func parse(_ text: String) throws(PartitionError) -> SiteID {
        do { return try SiteID(parsing: text) } catch { throw PartitionError(error) }
    }
}
