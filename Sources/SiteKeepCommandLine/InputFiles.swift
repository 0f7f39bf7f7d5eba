internal import SiteKeepSystem

/// The one reader of the (non-secret) files an option names: `--message-file`, `vault write
/// --file`, `agenda load FILE`. A regular file, links followed (the person named it), at most
/// `limit` bytes; a FIFO, a device or a folder is refused at once instead of hanging the command
/// or filling memory (``FileIO/readRegularFile(_:limit:followLinks:)``). Secrets have their own
/// reader, ``SecretReader``, which keeps them in guarded memory.
enum InputFile {
    /// The bytes of `path`, named by `option` in errors.
    /// - Throws: ``CommandFailure`` naming the file, what was wrong and the fix.
    static func read(_ path: String, option: String, limit: Int) throws -> [UInt8] {
        let result: FileIO.ReadResult
        do throws(SystemError) {
            result = try FileIO.readRegularFile(path, limit: limit, followLinks: true)
        } catch {
            throw CommandFailure("cannot read \(path) (\(option)): \(error.cause)",
                                 remedy: "give a regular file of at most \(limit >> 20) MiB, or '-' and the bytes on standard input", code: "bad_input")
        }
        guard case .bytes(let bytes) = result else {
            throw CommandFailure("cannot read \(path) (\(option)): there is no such file", remedy: "check the path", code: "not_found")
        }
        return bytes
    }
}
