import Foundation
import Testing
import SiteKeepCore

/// `capture.save`'s note, owned by the core.
@Suite struct CaptureNoteTests {
    @Test func aNoteIsMarkdownAtAPathNamedForItsTitleAndTime() throws {
        let note = try CaptureNote(title: "Lisbon: Day 2!", text: "body", url: "https://promptugal.news/a")
        #expect(note.markdown == "# Lisbon: Day 2!\n\n<https://promptugal.news/a>\n\nbody\n")
        #expect(try CaptureNote(title: "", text: "t", url: nil).markdown == "# \n\nt\n")
        let at = Date(timeIntervalSince1970: 1_796_000_000)
        #expect(note.path(at: at, tag: 0x0a3f) == "captures/20261130-005320-lisbon--day-2--0a3f.md")
        #expect(try CaptureNote(title: "Ünï 7", text: "", url: nil).path(at: at, tag: 0xbeef) == "captures/20261130-005320--n--7-beef.md")
        #expect(try CaptureNote(title: "", text: "", url: nil).path(at: at, tag: 1).hasSuffix("-note-0001.md"))
    }

    @Test func aTitleOrURLWithAControlCharacterIsRefusedNamingTheField() {
        #expect(throws: CoreFieldError("args.title", "holds a control character; a title is one line")) {
            try CaptureNote(title: "a\n# injected", text: "", url: nil, path: "args")
        }
        #expect(throws: CoreFieldError("args.url", "holds a control character")) {
            try CaptureNote(title: "a", text: "", url: "https://x/\r\n", path: "args")
        }
    }
}
