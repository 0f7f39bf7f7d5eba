public import Foundation

// SiteID itself lives in SiteKeepNames (no Foundation, so custody can name the site that asks);
// its UUID side is here.
extension SiteID {
    /// Wraps a UUID.
    public init(_ uuid: UUID) {
        self.init(canonical: uuid.uuidString.lowercased())
    }

    /// The UUID (the canonical form is always one).
    public var uuid: UUID { UUID(uuidString: string)! }

    /// A new random identifier.
    public static func random() -> SiteID { SiteID(UUID()) }
}
