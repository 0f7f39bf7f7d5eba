#if canImport(Glibc)
@preconcurrency import Glibc
#endif
import Foundation
import Synchronization

/// Terminal text styles (ANSI SGR), used only when colour is on.
public enum TextStyle: Sendable {
    case bold, dim, red, green, yellow, cyan

    func apply(_ text: String) -> String {
        let code: String = switch self {
        case .bold: "1"
        case .dim: "2"
        case .red: "31"
        case .green: "32"
        case .yellow: "33"
        case .cyan: "36"
        }
        return "\u{1B}[\(code)m\(text)\u{1B}[0m"
    }
}

/// A plain-text table for people: left-aligned columns, a header, two spaces apart.
public struct Table: Sendable {
    public var headers: [String]
    public var rows: [[String]]
    public init(headers: [String], rows: [[String]]) {
        self.headers = headers
        self.rows = rows
    }

    /// Renders the table; `style` decorates the header when colour is on.
    public func render(header style: (String) -> String = { $0 }) -> String {
        let columns = headers.count
        var widths = headers.map { $0.count }
        for row in rows {
            for (i, cell) in row.prefix(columns).enumerated() { widths[i] = max(widths[i], cell.count) }
        }
        func line(_ cells: [String]) -> String {
            var parts: [String] = []
            for i in 0..<columns {
                let cell = i < cells.count ? cells[i] : ""
                parts.append(i == columns - 1 ? cell : cell.padding(toLength: widths[i], withPad: " ", startingAt: 0))
            }
            return parts.joined(separator: "  ")
        }
        var out = [style(line(headers))]
        out += rows.map(line)
        return out.joined(separator: "\n")
    }
}

/// A stderr spinner for work that may take more than a moment (Argon2id, PBKDF2).
final class Spinner: Sendable {
    private let label: String
    private let io: any ToolIO
    private let running = Mutex(false)
    private let finished = Mutex(false)

    init(label: String, io: any ToolIO) {
        self.label = label
        self.io = io
    }

    func start() {
        running.withLock { $0 = true }
        let thread = Thread { [self] in
            let frames = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"]
            var i = 0
            // Only show the spinner if the work takes longer than 150 ms.
            usleep(150_000)
            while running.withLock({ $0 }) {
                io.writeError("\r\(frames[i % frames.count]) \(label)")
                i += 1
                usleep(80_000)
            }
            if i > 0 { io.writeError("\r\u{1B}[2K") }
            finished.withLock { $0 = true }
        }
        thread.start()
    }

    func stop() {
        running.withLock { $0 = false }
        for _ in 0..<100 where !finished.withLock({ $0 }) { usleep(2_000) }
    }
}
