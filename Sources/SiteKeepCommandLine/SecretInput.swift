#if canImport(Glibc)
@preconcurrency import Glibc
#endif
internal import SiteKeepCrypto
internal import SiteKeepSystem

/// What a secret's bytes must look like.
enum SecretFormat: Sendable, Equatable {
    /// Text: a passphrase, a recovery code, a key. See ``SecretReader`` for the line-ending rule.
    case text
    /// WebAuthn PRF output: exactly 32 raw bytes, or 64 hexadecimal digits.
    case prf
}

/// One secret the command line reads: the option that names its file, what to call it in
/// messages, its format and the most bytes its input may hold.
struct SecretSource: Sendable, Equatable {
    /// The option (`--passphrase-file`); its value is a path, or `-` for standard input.
    let option: String
    /// The secret's name in messages ("new passphrase").
    let noun: String
    let format: SecretFormat
    /// The largest input accepted, line ending included; a larger one is refused.
    let limit: Int

    static let passphrase = SecretSource(option: "--passphrase-file", noun: "passphrase", format: .text, limit: 64 << 10)
    static let newPassphrase = SecretSource(option: "--new-passphrase-file", noun: "new passphrase", format: .text, limit: 64 << 10)
    static let prf = SecretSource(option: "--prf-file", noun: "PRF output", format: .prf, limit: 4096)
    static let newPRF = SecretSource(option: "--new-prf-file", noun: "new PRF output", format: .prf, limit: 4096)
    static let recoveryCode = SecretSource(option: "--recovery-file", noun: "recovery code", format: .text, limit: 4096)
    static let key = SecretSource(option: "--key-file", noun: "key", format: .text, limit: 64 << 10)
    static let token = SecretSource(option: "--token-file", noun: "access token", format: .text, limit: 64 << 10)
    /// A TPM 2.0 slot's PIN (with `--tpm2`) or a security key's (with `--fido2`).
    static let pin = SecretSource(option: "--pin-file", noun: "PIN", format: .text, limit: 4096)
    /// A new TPM 2.0 slot's PIN (`slot add tpm2`).
    static let newPIN = SecretSource(option: "--new-pin-file", noun: "new TPM PIN", format: .text, limit: 4096)

    /// Every secret option the command line has.
    static let all: [SecretSource] = [passphrase, newPassphrase, prf, newPRF, recoveryCode, key, token, pin, newPIN]
}

/// The one reader of secrets for every option of the command line, and the terminal prompt.
///
/// ## The rule
///
/// A secret comes from the file its option names, from standard input when the option is `-`,
/// or, where the command allows it, from a prompt on the terminal without echo. Its bytes are
/// the input's bytes with **one line ending removed from the end: a final `\n`, and then a final
/// `\r`**. So `pass`, `pass\n`, `pass\r\n` (and `pass\r`) all give `pass`. Nothing else is
/// changed: leading and trailing spaces and tabs, a second newline (`pass\n\n` gives `pass\n`),
/// and a `\r` before that final one (`pass\r\r\n` gives `pass\r`) stay part of the secret. A
/// prompt's line is taken as if it ended in `\n`. An empty result is refused.
///
/// PRF output (`--prf-file`, `--new-prf-file`) has a fixed length: an input of exactly 32 bytes
/// is the raw output; any other input must be, after the same line-ending rule, exactly 64
/// hexadecimal digits (either case).
///
/// Each input is bounded by ``SecretSource/limit``; a larger one is refused with an error naming
/// the option and the limit. It is read with `read(2)` straight into guarded memory (a
/// `SecretBytes` scratch region of `limit + 1` bytes, wiped when freed) and the secret is copied
/// from there into its own guarded region: it never passes through Foundation `Data`, `String`
/// or a growing array.
enum SecretReader {
    /// Reads `source` from `path` (`-`: standard input).
    static func read(_ source: SecretSource, path: String, io: any ToolIO) throws -> SecretBytes {
        let origin = path == "-" ? "standard input (\(source.option) -)" : "\(source.option) \(path)"
        var count = 0
        let scratch = try fill(source, count: &count) { buffer in
            path == "-" ? try io.readSecretInput(into: buffer) : try readFile(path, source, into: buffer)
        }
        guard count <= source.limit else { throw tooLarge(source, origin) }
        return try finish(scratch, count: count, source, origin: origin)
    }

    /// Prompts for `source` on the terminal (twice with `confirm`; the entries must match).
    static func prompt(_ source: SecretSource, prompt: String, confirm: Bool, io: any ToolIO) throws -> SecretBytes {
        let first = try promptOnce(source, prompt, io: io)
        if confirm {
            let second = try promptOnce(source, "Again: ", io: io)
            guard first.constantTimeEquals(second) else {
                throw CommandFailure("the two entries differ", remedy: "run the command again", code: "bad_secret")
            }
        }
        return first
    }

    private static func promptOnce(_ source: SecretSource, _ prompt: String, io: any ToolIO) throws -> SecretBytes {
        var count = 0
        let scratch = try fill(source, count: &count) { buffer in try io.promptSecret(prompt, into: buffer) }
        guard count <= source.limit else { throw tooLarge(source, "the terminal") }
        return try finish(scratch, count: count, source, origin: "the terminal")
    }

    /// A guarded scratch region of `limit + 1` bytes filled by `body`; `count` is set to how
    /// many bytes it wrote.
    private static func fill(_ source: SecretSource, count: inout Int,
                             _ body: (UnsafeMutableRawBufferPointer) throws -> Int) throws -> SecretBytes {
        var failure: (any Error)? = nil
        var written = 0
        let scratch = try SecretBytes(count: source.limit + 1, initializingWith: { (buffer: UnsafeMutableRawBufferPointer) throws(CryptoError) in
            do { written = min(try body(buffer), buffer.count) } catch { failure = error }
        })
        if let failure { throw failure }
        count = written
        return scratch
    }

    /// The secret in the first `count` bytes of `scratch`, by the rule of `source.format`.
    static func finish(_ scratch: borrowing SecretBytes, count: Int, _ source: SecretSource, origin: String) throws -> SecretBytes {
        try scratch.withUnsafeBytes { (all: UnsafeRawBufferPointer) throws -> SecretBytes in
            let input = UnsafeRawBufferPointer(rebasing: all[0..<count])
            switch source.format {
            case .text:
                let length = textLength(input)
                guard length > 0 else {
                    throw CommandFailure("the \(source.noun) from \(origin) is empty", remedy: "give a non-empty \(source.noun)", code: "bad_secret")
                }
                return try copy(UnsafeRawBufferPointer(rebasing: input[0..<length]))
            case .prf:
                guard let output = try PRFOutput.decode(input) else {
                    throw CommandFailure("the \(source.noun) from \(origin) holds \(count) bytes, not 32 raw bytes or 64 hex characters",
                                         remedy: "write the passkey's 32-byte PRF output (or its hex) to the file", code: "bad_secret")
                }
                return output
            }
        }
    }

    /// The length of `bytes` without one trailing line ending: a final `\n`, then a final `\r`.
    static func textLength(_ bytes: UnsafeRawBufferPointer) -> Int {
        var length = bytes.count
        if length > 0, bytes[length - 1] == 0x0a { length -= 1 }
        if length > 0, bytes[length - 1] == 0x0d { length -= 1 }
        return length
    }

    private static func copy(_ bytes: UnsafeRawBufferPointer) throws(CryptoError) -> SecretBytes {
        try SecretBytes(count: bytes.count, initializingWith: { (out: UnsafeMutableRawBufferPointer) throws(CryptoError) in
            out.copyMemory(from: bytes)
        })
    }

    private static func tooLarge(_ source: SecretSource, _ origin: String) -> CommandFailure {
        CommandFailure("the \(source.noun) from \(origin) is larger than \(source.limit) bytes",
                       remedy: "check that \(source.option) names a file holding only the \(source.noun)", code: "bad_secret")
    }

    /// Reads the file at `path` into `buffer` (``FileIO/readNamedInput(_:into:acceptPipes:)``:
    /// a regular file, or a pipe a program writes to, such as `<(…)`; a FIFO nobody writes to,
    /// a device or a folder is refused at once, never waited on); returns the byte count,
    /// `buffer.count` meaning "at least that many".
    static func readFile(_ path: String, _ source: SecretSource, into buffer: UnsafeMutableRawBufferPointer) throws -> Int {
        var info = stat()
        if stat(path, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG, Int(info.st_size) > source.limit {
            throw tooLarge(source, "\(source.option) \(path)")
        }
        do throws(SystemError) {
            return try FileIO.readNamedInput(path, into: buffer)
        } catch {
            throw CommandFailure("cannot read the \(source.noun) file \(path) (\(source.option)): \(error.cause)",
                                 remedy: "give a regular file holding only the \(source.noun), or '-' and the \(source.noun) on standard input",
                                 code: "no_secret")
        }
    }

    /// Reads `fd` into `buffer` until end of input or the buffer is full; returns the byte count.
    static func readAll(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer, what: String) throws -> Int {
        do throws(Errno) { return try FileIO.readFully(fd, into: buffer) } catch {
            throw CommandFailure("cannot read \(what): \(error)", code: "no_secret")
        }
    }
}

extension UnlockInput {
    /// How many times a passphrase typed at the prompt is asked for before the command gives up
    /// (as `ssh-add` does); the custodian's back-off lets three failures through without a wait.
    static let promptTries = 3

    /// Reads the invocation's unlock secret and hands it to `attempt`. When the passphrase was
    /// typed at the terminal prompt and `attempt` says it is wrong (`isWrong`), asks again, up
    /// to ``promptTries`` times in all; a secret from a file or standard input is tried once.
    /// `deviceCheck`: who says a device unlock can be tried (``read(_:deviceCheck:)``).
    static func attempt(_ inv: Invocation, deviceCheck: DeviceCheck? = nil, isWrong: (any Error) -> Bool,
                        _ attempt: (UnlockInput) throws -> Void) throws {
        let prompted = !UnlockKinds.given(inv) && inv.io.canPrompt
        var tries = 0
        while true {
            tries += 1
            do {
                return try attempt(try read(inv, deviceCheck: deviceCheck))
            } catch where prompted && tries < promptTries && isWrong(error) {
                inv.note("That passphrase does not unlock this store; try again (\(promptTries - tries) more attempt\(promptTries - tries == 1 ? "" : "s")).")
            }
        }
    }
}

/// The warning a new passphrase earns when it is short (as `ssh-keygen` warns): the store's
/// keys are only as strong as it. Written to standard error; the passphrase is still taken.
enum PassphraseAdvice {
    static let shortLength = 12

    /// Notes on stderr when `passphrase` has fewer than ``shortLength`` characters.
    static func check(_ passphrase: borrowing SecretBytes, inv: Invocation) {
        let count = passphrase.withUnsafeBytes { raw in
            // Characters, not bytes: count the bytes that do not continue a UTF-8 sequence.
            raw.reduce(0) { $0 + ($1 & 0xC0 == 0x80 ? 0 : 1) }
        }
        if count < shortLength {
            inv.note("warning: the new passphrase has only \(count) character\(count == 1 ? "" : "s"); a passphrase of \(shortLength) or more (several words) resists guessing far better if the store's files are copied")
        }
    }
}
