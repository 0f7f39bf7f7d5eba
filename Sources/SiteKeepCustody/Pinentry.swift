#if canImport(Glibc)
@preconcurrency import Glibc
#endif
import CLinux
internal import SiteKeepSystem
package import SiteKeepCrypto

/// A client of a pinentry program (GnuPG's dialog helper) over the Assuan protocol, as
/// gpg-agent uses it: `CONFIRM` for an approval, `GETPIN` where a secret is asked.
///
/// The program is run directly (no shell), in its own process group, with its standard input
/// and output on one end of a socket pair and its standard error on `/dev/null`. Every read is
/// bounded (a line is at most ``maximumLine`` bytes, a conversation at most ``maximumLines``
/// lines). The program is told ``timeout`` (`SETTIMEOUT`), so it closes its dialog itself and
/// a text-mode pinentry restores the screen it drew over; a program still silent ``grace``
/// after that has its process group killed. A `GETPIN` answer is decoded straight into guarded memory
/// (``SecretBytes``) and every buffer that held it is wiped; it is never logged or put in an
/// error.
public struct PinentryClient: Sendable {
    /// The program's absolute path.
    public let program: String
    /// The terminal a text-mode pinentry draws on (`--ttyname`), if any.
    public let ttyName: String?
    /// The terminal's type (`--ttytype`, `TERM`), if any.
    public let ttyType: String?
    /// The environment the program runs with (`NAME=value`): the display variables decide
    /// whether a graphical pinentry can show its dialog.
    public let environment: [String]
    /// How long the whole conversation may take (the user's answer included).
    public let timeout: Duration

    /// Assuan's longest line (1000 bytes including the newline); a longer line is refused.
    public static let maximumLine = 1000
    /// The most lines a conversation may hold (status and comment lines included).
    public static let maximumLines = 256
    /// `GPG_ERR_CANCELED` in gpg-error's `GPG_ERR_SOURCE_PINENTRY` source: the user chose Cancel.
    public static let cancelled = 83886179
    /// `GPG_ERR_NOT_CONFIRMED`: the user did not confirm.
    public static let notConfirmed = 83886194
    /// `GPG_ERR_TIMEOUT`: the pinentry's own time limit (`SETTIMEOUT`) passed; it closed its
    /// dialog (a text-mode one restoring the screen it drew over) and answered.
    public static let timedOut = 83886142
    /// How long past the pinentry's own time limit it may take to answer before its process
    /// group is killed: a pinentry that ends by itself restores the terminal it drew on, a
    /// killed `pinentry-curses` leaves its dialog on the screen.
    public static let grace: Duration = .seconds(2)

    /// The dialog's words: a title, the description (lines separated by `\n`), and the buttons.
    public struct Dialog: Sendable {
        public var title: String
        public var description: String
        public var ok: String
        public var cancel: String
        /// The label beside the passphrase field (`GETPIN` only).
        public var prompt: String?

        public init(title: String, description: String, ok: String = "Allow", cancel: String = "Deny", prompt: String? = nil) {
            self.title = title
            self.description = description
            self.ok = ok
            self.cancel = cancel
            self.prompt = prompt
        }
    }

    /// - Parameters:
    ///   - environment: the program's environment as `NAME=value` strings.
    public init(program: String, ttyName: String? = nil, ttyType: String? = nil, environment: [String], timeout: Duration = .seconds(60)) {
        self.program = program
        self.ttyName = ttyName
        self.ttyType = ttyType
        self.environment = environment
        self.timeout = timeout
    }

    /// Shows `dialog` with its two buttons and no passphrase field (`CONFIRM`).
    /// - Returns: true when the user chose OK, false when they chose Cancel.
    /// - Throws: ``CustodyError/presenceTimedOut(seconds:)`` or
    ///   ``CustodyError/presenceUnavailable(_:)`` (the program cannot run, or broke the protocol).
    public func confirm(_ dialog: Dialog) throws(CustodyError) -> Bool {
        let session = try Session(self)
        defer { session.close() }
        try session.setUp(dialog, client: self)
        switch try session.command("CONFIRM", data: nil) {
        case .ok: return true
        case .err(let code, _) where code == Self.cancelled || code == Self.notConfirmed: return false
        case .err(let code, _) where code == Self.timedOut: throw .presenceTimedOut(seconds: Int(timeout.components.seconds))
        case .err(let code, let text): throw .presenceUnavailable("the pinentry \(program) failed to ask (\(code) \(text))")
        }
    }

    /// Asks for a secret (`GETPIN`).
    /// - Returns: the typed bytes in guarded memory, or nil when the user chose Cancel.
    /// - Throws: as ``confirm(_:)``; an empty answer is returned as nil too.
    package func getPin(_ dialog: Dialog) throws(CustodyError) -> SecretBytes? {
        let session = try Session(self)
        defer { session.close() }
        try session.setUp(dialog, client: self)
        var data: [UInt8] = []
        defer { SecureMemory.zero(&data) }
        switch try session.command("GETPIN", data: &data) {
        case .ok:
            guard !data.isEmpty else { return nil }
            do { return try SecretBytes(consumingAndZeroing: &data) } catch {
                throw .presenceUnavailable("no guarded memory for the answer")
            }
        case .err(let code, _) where code == Self.cancelled || code == Self.notConfirmed: return nil
        case .err(let code, _) where code == Self.timedOut: throw .presenceTimedOut(seconds: Int(timeout.components.seconds))
        case .err(let code, let text): throw .presenceUnavailable("the pinentry \(program) failed to ask (\(code) \(text))")
        }
    }

    /// An Assuan argument: `%`, CR and LF (and every other control character) as `%XX`.
    public static func escape(_ text: String) -> String {
        var out: [UInt8] = []
        for byte in text.utf8 {
            if byte == UInt8(ascii: "%") || byte < 0x20 || byte == 0x7f {
                out += Array(("%" + (byte < 16 ? "0" : "") + String(byte, radix: 16, uppercase: true)).utf8)
            } else {
                out.append(byte)
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Decodes the `%XX` escapes of a `D` line's payload into `out`.
    /// - Returns: false when an escape is malformed.
    static func unescape(_ bytes: ArraySlice<UInt8>, into out: inout [UInt8]) -> Bool {
        var i = bytes.startIndex
        while i < bytes.endIndex {
            let b = bytes[i]
            if b == UInt8(ascii: "%") {
                guard i + 2 < bytes.endIndex, let hi = hexValue(bytes[i + 1]), let lo = hexValue(bytes[i + 2]) else { return false }
                out.append(hi << 4 | lo)
                i += 3
            } else {
                out.append(b)
                i += 1
            }
        }
        return true
    }

    private static func hexValue(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): c - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): c - UInt8(ascii: "A") + 10
        default: nil
        }
    }

    /// What a command ended with.
    enum Reply: Equatable {
        case ok
        case err(Int, String)
    }

    /// One running pinentry and the parent's end of its socket pair.
    private final class Session {
        let child: ChildProcess
        let fd: Int32
        let program: String
        let deadline: ContinuousClock.Instant
        let timeoutSeconds: Int
        var buffer: [UInt8] = []
        var lines = 0

        init(_ client: PinentryClient) throws(CustodyError) {
            program = client.program
            timeoutSeconds = Int(client.timeout.components.seconds)
            // The pinentry ends its own dialog at the time limit (SETTIMEOUT); it is killed only
            // if it has not answered a little after that.
            deadline = Clocks.monotonicNow() + client.timeout + PinentryClient.grace
            var pair: [Int32] = [-1, -1]
            guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &pair) == 0 else {
                throw .presenceUnavailable("cannot make a socket pair for the pinentry")
            }
            var arguments: [String] = []
            if let tty = client.ttyName { arguments += ["--ttyname", tty] }
            if let type = client.ttyType { arguments += ["--ttytype", type] }
            do {
                // No signal blocked: its time limit is an alarm (SIGALRM), which the thread that
                // asks may block (a Dispatch worker does).
                child = try ChildProcess.spawn(client.program, arguments: arguments, environment: client.environment,
                                               stdin: .descriptor(pair[1]), stdout: .descriptor(pair[1]), stderr: .null,
                                               unblockingSignals: true)
            } catch {
                Glibc.close(pair[0]); Glibc.close(pair[1])
                throw .presenceUnavailable("cannot run the pinentry \(client.program): \(error.cause)")
            }
            Glibc.close(pair[1])
            fd = pair[0]
        }

        func close() {
            SecureMemory.zero(&buffer)
            Glibc.close(fd)
            if child.poll() == nil {
                // A pinentry ends on end of file; give it a moment, then stop its group.
                if child.wait(timeout: .milliseconds(500)) == nil { /* stopped by wait(timeout:) */ }
            }
        }

        /// The greeting, then the dialog's words and the terminal options.
        func setUp(_ dialog: Dialog, client: PinentryClient) throws(CustodyError) {
            guard try reply(data: nil) == .ok else { throw .presenceUnavailable("the pinentry \(program) did not greet with OK") }
            var commands = ["SETTITLE " + escape(dialog.title), "SETDESC " + escape(dialog.description),
                            "SETOK " + escape(dialog.ok), "SETCANCEL " + escape(dialog.cancel)]
            if let prompt = dialog.prompt { commands.append("SETPROMPT " + escape(prompt)) }
            // Its own time limit, so it closes its dialog and restores the screen itself.
            if timeoutSeconds > 0 { commands.append("SETTIMEOUT \(timeoutSeconds)") }
            if let tty = client.ttyName { commands.append("OPTION ttyname=" + escape(tty)) }
            if let type = client.ttyType { commands.append("OPTION ttytype=" + escape(type)) }
            commands.append("OPTION lc-ctype=C.UTF-8")
            for c in commands {
                // An OPTION a pinentry does not know is answered ERR; the dialog still works.
                if case .err(let code, let text) = try command(c, data: nil), !c.hasPrefix("OPTION "), !c.hasPrefix("SETTIMEOUT ") {
                    throw .presenceUnavailable("the pinentry \(program) refused \(c.prefix(while: { $0 != " " })) (\(code) \(text))")
                }
            }
        }

        func command(_ line: String, data: UnsafeMutablePointer<[UInt8]>?) throws(CustodyError) -> Reply {
            try send(line)
            return try reply(data: data)
        }

        func command(_ line: String, data: inout [UInt8]) throws(CustodyError) -> Reply {
            try send(line)
            return try withUnsafeMutablePointer(to: &data) { (p) throws(CustodyError) -> Reply in try reply(data: p) }
        }

        private func send(_ line: String) throws(CustodyError) {
            let bytes = Array(line.utf8) + [0x0a]
            guard bytes.count <= PinentryClient.maximumLine else { throw .presenceUnavailable("a pinentry line is too long") }
            var sent = 0
            while sent < bytes.count {
                let n = bytes[sent...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                if n < 0 && errno == EINTR { continue }
                guard n > 0 else { throw .presenceUnavailable("the pinentry \(program) stopped reading") }
                sent += n
            }
        }

        /// Reads lines up to `OK` or `ERR`: `D` lines go (decoded) into `data` when given, status
        /// and comment lines are skipped, anything else breaks the protocol.
        private func reply(data: UnsafeMutablePointer<[UInt8]>?) throws(CustodyError) -> Reply {
            while true {
                var line = try readLine()
                defer { SecureMemory.zero(&line) }
                lines += 1
                guard lines <= PinentryClient.maximumLines else {
                    throw .presenceUnavailable("the pinentry \(program) sent more than \(PinentryClient.maximumLines) lines")
                }
                if line == Array("OK".utf8) || line.starts(with: Array("OK ".utf8)) { return .ok }
                if line.starts(with: Array("ERR ".utf8)) {
                    let rest = line.dropFirst(4)
                    let digits = rest.prefix { $0 >= 0x30 && $0 <= 0x39 }
                    let code = Int(String(decoding: digits.prefix(10), as: UTF8.self)) ?? -1
                    let text = PresenceText.escaped(String(decoding: rest.dropFirst(digits.count).drop { $0 == 0x20 }, as: UTF8.self), limit: 120)
                    return .err(code, text)
                }
                if line.starts(with: Array("D ".utf8)) {
                    guard let data else { throw .presenceUnavailable("the pinentry \(program) sent data that was not asked for") }
                    guard data.pointee.count + line.count <= 4096,
                          PinentryClient.unescape(line.dropFirst(2), into: &data.pointee) else {
                        throw .presenceUnavailable("the pinentry \(program) sent a malformed or oversized data line")
                    }
                    continue
                }
                // pinentry-curses 1.2 says its own time limit passed in a status line
                // (`S ERROR curses.? 83886142`), having closed its dialog, and answers nothing more.
                if line.starts(with: Array("S ERROR ".utf8)),
                   line.split(separator: 0x20).last.map({ Int(String(decoding: $0, as: UTF8.self)) == PinentryClient.timedOut }) == true {
                    return .err(PinentryClient.timedOut, "Timeout")
                }
                if line.first == UInt8(ascii: "#") || line.starts(with: Array("S ".utf8)) || line == Array("S".utf8) { continue }
                throw .presenceUnavailable("the pinentry \(program) broke the Assuan protocol (a line starting "
                    + "'\(PresenceText.escaped(String(decoding: line.prefix(12), as: UTF8.self), limit: 12))')")
            }
        }

        /// One line without its newline, waiting at most until the deadline.
        private func readLine() throws(CustodyError) -> [UInt8] {
            while true {
                if let nl = buffer.firstIndex(of: 0x0a) {
                    let line = Array(buffer[..<nl])
                    for i in 0...nl { buffer[i] = 0 }
                    buffer.removeFirst(nl + 1)
                    return line
                }
                guard buffer.count < PinentryClient.maximumLine else {
                    throw .presenceUnavailable("the pinentry \(program) sent a line longer than \(PinentryClient.maximumLine) bytes")
                }
                let left = deadline - Clocks.monotonicNow()
                guard left > .zero else { child.stop(); throw .presenceTimedOut(seconds: timeoutSeconds) }
                let ms = Int32(clamping: left.components.seconds * 1000 + left.components.attoseconds / 1_000_000_000_000_000 + 1)
                var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
                let ready = poll(&pfd, 1, ms)
                if ready < 0 && errno == EINTR { continue }
                guard ready > 0 else { continue }
                var chunk = [UInt8](repeating: 0, count: PinentryClient.maximumLine)
                defer { SecureMemory.zero(&chunk) }
                let n = chunk.withUnsafeMutableBytes { Glibc.recv(fd, $0.baseAddress, $0.count, 0) }
                if n < 0 && errno == EINTR { continue }
                guard n > 0 else {
                    let how = child.wait(timeout: .milliseconds(500)).map { " (it \($0))" } ?? ""
                    throw .presenceUnavailable("the pinentry \(program) ended without answering\(how)")
                }
                buffer += chunk[0..<n]
            }
        }
    }
}
