internal import SiteKeepCustody
internal import SiteKeepDaemon

/// `doctor`'s word on the store's FIDO2 slots (those `slot add fido2` made): a key gives its
/// `hmac-secret` output without its PIN to any program of the user that asks, with no touch,
/// so a slot made without the PIN opens for any of them while the key is plugged in.
extension DoctorExtensions {
    /// One check per FIDO2 slot of the store in `inv`'s home: fine with the key's PIN, a warning
    /// without it or when the slot does not say (made before SiteKeep recorded it). No check
    /// when there is no store or no such slot; the store is only read (slot headers are public).
    static func fido2SlotChecks(_ inv: Invocation) -> [DoctorCheck] {
        guard StoreOpening.exists(home: inv.settings.home), let store = try? StoreContext.open(inv),
              let slots = try? store.custodian.listSlots() else { return [] }
        return slots.filter { $0.kind == .prf && $0.relyingPartyID == Custodian.fido2RelyingPartyID }.map { slot in
            let name = "FIDO2 slot \(slot.id)"
            let remedy = "set a PIN on the key ('fido2-token -S /dev/hidrawN'), add a slot with it ('sitekeep slot add fido2 --pin'), "
                + "then remove this one ('sitekeep slot remove \(slot.id)')"
            switch slot.fido2PIN {
            case true?:
                return DoctorCheck(group: "store", name: name, ok: true, detail: "opens with the key's PIN and a touch")
            case false?:
                return DoctorCheck(group: "store", name: name, ok: true,
                                   detail: "made without the key's PIN (--no-pin): any program of yours can open it with no touch while the key is plugged in; " + remedy,
                                   warning: true)
            case nil:
                return DoctorCheck(group: "store", name: name, ok: true,
                                   detail: "made before SiteKeep recorded whether it needs the key's PIN: if the key had no PIN then, any program of yours can open it with no touch while the key is plugged in; " + remedy,
                                   warning: true)
            }
        }
    }
}
