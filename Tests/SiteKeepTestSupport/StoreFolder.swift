public import Foundation

/// A throw-away folder for one test store: the store's home (`home`, not created) and a
/// passphrase file beside it, removed with the object. Each suite's `CLIStore` adds how it
/// runs the command line (in-process, or as the built executable).
open class StoreFolder: @unchecked Sendable {
    // @unchecked: used by one test at a time.
    /// The folder.
    public let dir: URL
    /// The store's home in it.
    public var home: String { dir.appendingPathComponent("home").path }
    /// A file holding the passphrase `correct horse battery` and a newline.
    public var passFile: String { dir.appendingPathComponent("pass.txt").path }

    /// A fresh folder named `label-UUID` in the temporary folder, with the passphrase file.
    public init(label: String) throws {
        dir = FileManager.default.temporaryDirectory.appendingPathComponent("\(label)-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        try Data("correct horse battery\n".utf8).write(to: URL(fileURLWithPath: passFile))
    }
    deinit { try? FileManager.default.removeItem(at: dir) }

    /// Writes `bytes` to the file `name` in the folder; its path.
    public func file(_ name: String, _ bytes: [UInt8]) throws -> String {
        let url = dir.appendingPathComponent(name)
        try Data(bytes).write(to: url)
        return url.path
    }
}
