public import Foundation

/// Known-answer fixtures kept as JSON data in the package's top-level `Fixtures/` folder.
///
/// The folder is found from this file's own path (`#filePath`), walking up to the directory
/// that holds `Package.swift`, so it works from any test target and any working directory.
/// A missing or empty fixture is an error, never a skip: a test that `try`s a load fails.
public enum Fixtures {
    /// Why a fixture could not be loaded.
    public enum LoadError: Error, CustomStringConvertible, Equatable {
        case packageRootNotFound(from: String)
        case missing(String)
        case empty(String)
        case invalidHex(String)

        public var description: String {
            switch self {
            case .packageRootNotFound(let from):
                "no Package.swift above \(from); run the tests from a SiteKeep checkout"
            case .missing(let path):
                "fixture \(path) is missing; restore it from git (Fixtures/tools/generate.py regenerates it)"
            case .empty(let path):
                "fixture \(path) is empty; restore it from git (Fixtures/tools/generate.py regenerates it)"
            case .invalidHex(let text):
                "fixture field is not hex: \(text.prefix(40))"
            }
        }
    }

    /// The package root: the nearest directory above this file that contains `Package.swift`.
    public static func packageRoot(filePath: String = #filePath) throws -> URL {
        var dir = URL(fileURLWithPath: filePath).deletingLastPathComponent()
        while dir.path != "/" {
            if FileManager.default.fileExists(atPath: dir.appendingPathComponent("Package.swift").path) {
                return dir
            }
            dir = dir.deletingLastPathComponent()
        }
        throw LoadError.packageRootNotFound(from: filePath)
    }

    /// The `Fixtures/` directory.
    public static func directory() throws -> URL {
        try packageRoot().appendingPathComponent("Fixtures", isDirectory: true)
    }

    /// The bytes of `Fixtures/<name>`; throws if the file is missing or empty.
    public static func data(_ name: String) throws -> Data {
        let url = try directory().appendingPathComponent(name)
        guard FileManager.default.fileExists(atPath: url.path) else { throw LoadError.missing(url.path) }
        let data = try Data(contentsOf: url)
        guard !data.isEmpty else { throw LoadError.empty(url.path) }
        return data
    }

    /// The text of `Fixtures/<name>`.
    public static func text(_ name: String) throws -> String {
        String(decoding: try data(name), as: UTF8.self)
    }

    /// Decodes `Fixtures/<name>` as JSON.
    public static func load<T: Decodable>(_ type: T.Type, from name: String) throws -> T {
        try JSONDecoder().decode(T.self, from: data(name))
    }

    /// Decodes lower- or upper-case hex, independently of the code under test.
    public static func hex(_ text: String) throws -> [UInt8] {
        let chars = Array(text.utf8)
        guard chars.count % 2 == 0 else { throw LoadError.invalidHex(text) }
        func nibble(_ c: UInt8) throws -> UInt8 {
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): return c - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): return c - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): return c - UInt8(ascii: "A") + 10
            default: throw LoadError.invalidHex(text)
            }
        }
        var out: [UInt8] = []
        out.reserveCapacity(chars.count / 2)
        var i = 0
        while i < chars.count {
            out.append(try nibble(chars[i]) << 4 | nibble(chars[i + 1]))
            i += 2
        }
        return out
    }

    /// A fresh temporary directory for one test; the caller removes it.
    public static func temporaryDirectory(_ label: String = "sitekeep-test") throws -> URL {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("\(label)-\(UUID().uuidString)", isDirectory: true)
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }
}
