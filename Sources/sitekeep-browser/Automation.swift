import CWebKitGTK
import Foundation
import SiteKeepBrowserCore
import SiteKeepJSON

/// `--automation`: one JSON object per line on stdout for what happens (`ready`, `loaded`,
/// `kept`, `external`, `note`, `result`, `quit`), and commands on stdin, one JSON object per line:
///
/// ```
/// {"cmd": "eval", "id": 1, "tab": 0, "js": "document.title"}      page world; "world": "relay" for the relay's
/// {"cmd": "screenshot", "id": 2, "path": "/tmp/b.png"}             the whole window as PNG
/// {"cmd": "select", "tab": 1}   {"cmd": "address", "text": "https://…"}
/// {"cmd": "key", "name": "ctrl+shift+t"}                           a key typed through the X server
/// {"cmd": "click", "selector": "#a", "button": 2, "modifiers": "ctrl"}   a click through the X server
/// {"cmd": "click", "tabLabel": 1}                                  a click on a tab's label on the strip
/// {"cmd": "close"}     the window manager's close request      {"cmd": "state", "id": 3}   {"cmd": "quit"}
/// ```
///
/// `key` and `click` are real input: XTest events through the X server (Xvfb), which GDK and
/// GTK handle as the reader's own, answered once the window has received them. `state`
/// answers with the tabs (site, url, source, scroll), the index of the one shown (`active`),
/// the window's `title`, where the keyboard is (`focus`: page, address, strip, other, none),
/// the tab strip (`tabStrip`), the address bar (`address`: shown, focused, text, selection)
/// and the reading list panel (`readingList`: shown, lines):
///
/// ```
/// {"event": "result", "id": 3, "tabStrip": "shown", "active": 0, "address": {"shown": false, …}, …}
/// ```
///
/// For tests and scripts driving the browser; off unless asked for, and only its own stdin
/// can drive it.
@MainActor
final class Automation {
    private let out = Mutex_()

    func emit(_ value: JSONValue) {
        out.write(JSONSerializer.string(value, style: .compact) + "\n")
    }

    func start(_ browser: Browser) {
        Thread.detachNewThread {
            while let line = readLine(strippingNewline: true) {
                guard let cmd = try? JSONParser.parse(Array(line.utf8), limits: .document) else { continue }
                let box = UncheckedBox(cmd)
                onMainLoop { browser.automationCommand(box.value) }
            }
        }
    }
}

/// Serialises writes to stdout from the main thread.
final class Mutex_: @unchecked Sendable {
    // @unchecked: every write holds `lock`.
    private let lock = NSLock()
    func write(_ s: String) {
        lock.lock(); defer { lock.unlock() }
        FileHandle.standardOutput.write(Data(s.utf8))
    }
}

extension Browser {
    func automationCommand(_ cmd: JSONValue) {
        let id = cmd["id"] ?? .null
        let tabIndex = cmd["tab"]?.intValue.map(Int.init) ?? 0
        let tab = tabs.indices.contains(tabIndex) ? tabs[tabIndex] : nil
        switch cmd["cmd"]?.stringValue {
        case "eval":
            guard let tab, let js = cmd["js"]?.stringValue else { reply(id, error: "no such tab or no js"); return }
            let world = cmd["world"]?.stringValue == "relay" ? PageScripts.worldName : nil
            evaluate(tab, js, world: world) { [weak self] json in
                self?.reply(id, ["value": json.map { .string($0) } ?? .null])
            }
        case "screenshot":
            guard let path = cmd["path"]?.stringValue else { reply(id, error: "no path"); return }
            reply(id, ["ok": .bool(screenshot(path)), "path": .string(path)])
        case "select":
            select(tabIndex)
            reply(id, ["ok": true])
        case "key":
            // A real key press through the X server; answered once the window has handled it.
            guard let name = cmd["name"]?.stringValue else { reply(id, error: "no name"); return }
            typeKey(name) { [weak self] ok in
                if ok { self?.reply(id, ["ok": true]) } else { self?.reply(id, error: "the key \(name) was not typed into the window") }
            }
        case "click":
            // A real click through the X server on the middle of `selector` in the shown tab.
            if let label = cmd["tabLabel"]?.intValue {
                clickTabLabel(Int(label)) { [weak self] ok in
                    if ok { self?.reply(id, ["ok": true]) } else { self?.reply(id, error: "no click on tab \(label)'s label reached the window") }
                }
                return
            }
            guard let selector = cmd["selector"]?.stringValue else { reply(id, error: "no selector"); return }
            let button = UInt32(cmd["button"]?.intValue ?? 1)
            click(selector: selector, button: button, modifiers: cmd["modifiers"]?.stringValue ?? "") { [weak self] ok in
                if ok { self?.reply(id, ["ok": true]) } else { self?.reply(id, error: "no click on \(selector) reached the window") }
            }
        case "close":
            // The window manager's close request (WM_DELETE_WINDOW).
            if requestClose() { reply(id, ["ok": true]) } else { reply(id, error: "no close request reached the window") }
        case "address":
            // As if typed into the address bar (Ctrl+L) and Enter pressed.
            guard let text = cmd["text"]?.stringValue else { reply(id, error: "no text"); return }
            enterAddress(text)
            reply(id, ["ok": true])
        case "state":
            reply(id, ["tabStrip": .string(tabStripShown ? "shown" : "hidden"), "active": activeIndex.map { .int(Int64($0)) } ?? .null,
                       "title": .string(windowTitle), "focus": .string(focusState),
                       "address": addressState, "readingList": readingListState, "tabs": .array(tabs.map { t in
                ["site": .string(t.site.name), "url": .string(t.uri ?? ""), "source": .string(t.source.rawValue), "scroll": .double(t.scroll)]
            })])
        case "quit":
            quit()
        default:
            reply(id, error: "unknown command")
        }
    }

    private func reply(_ id: JSONValue, _ members: JSONValue = [:], error: String? = nil) {
        var list: [JSONMember] = [JSONMember(key: "event", value: "result"), JSONMember(key: "id", value: id)]
        if let error { list.append(JSONMember(key: "error", value: .string(error))) }
        if case .object(let m) = members { list += m }
        automationEmit(.object(list))
    }
}
