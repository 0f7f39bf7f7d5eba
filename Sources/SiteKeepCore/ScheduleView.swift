/// One pick joined with the agenda: the item it names, or the fact that the agenda lacks it.
public struct ScheduleEntry: Sendable, Equatable {
    public let pick: SchedulePick
    /// nil when the agenda has no item with the pick's id (shown as such, never dropped).
    public let item: AgendaItem?

    public var isKnownToAgenda: Bool { item != nil }
}

extension ScheduleDocument {
    /// Every pick with its agenda item, in the agenda's order (by start); picks the agenda lacks
    /// follow, in the order they were picked.
    public func entries(in agenda: Agenda) -> [ScheduleEntry] {
        var known: [ScheduleEntry] = [], unknown: [ScheduleEntry] = []
        for p in picks {
            if let item = agenda.item(id: p.id) { known.append(ScheduleEntry(pick: p, item: item)) } else { unknown.append(ScheduleEntry(pick: p, item: nil)) }
        }
        known.sort { a, b in
            let x = a.item!, y = b.item!
            return x.start != y.start ? x.start < y.start : x.id.utf8.lexicographicallyPrecedes(y.id.utf8)
        }
        return known + unknown
    }
}
