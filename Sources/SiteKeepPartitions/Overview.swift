// SiteKeepPartitions: one isolated, sealed SQLite partition per site.
//
// Decisions recorded here so the code and ARCHITECTURE.md can be checked against them:
//
// - Origins (`Origin`): one parser, one canonical form `scheme://host:port`. IPv4 addresses in any
//   form but canonical dotted decimal (`2130706433`, `0x7f.0.0.1`, `0177.0.0.1`, `127.1`) are
//   refused, not canonicalised: an origin has one spelling, and a refused alias can never match.
//   Ports with leading zeros and an empty port after ':' are refused for the same reason.
//   UTS 46 basics only: NFKC, lower case, ideographic full stops, Punycode (RFC 3492, ours);
//   labels mixing Latin with Cyrillic or Greek are refused; whole-script look-alikes are valid
//   IDNs whose canonical form (xn--...) never equals the Latin one.
// - Layout: `<home>/sites.json` (0600, atomic: temp + fsync + rename + fsync dir; every
//   read-modify-write under an flock of `<home>/sites.json.lock` on a fresh read; every read
//   re-reads it when its stamp changed, so the daemon and CLI commands share one site list) and
//   `<home>/sites/<uuid>/partition.sqlite` (folder 0700, file 0600; SQLite creates -wal/-shm with
//   the same mode).
// - SQLite: WAL, `synchronous=FULL` (an acknowledged write survives kill -9 and power loss;
//   NORMAL would survive kill -9 only), defensive mode, `trusted_schema` off, `secure_delete`
//   on, `cell_size_check` on, busy timeout 5 s, 1 MiB page cache, no mmap. `quick_check` and a
//   sealed header (bound to the site id) are checked on every open.
// - Sealing: every value is XChaCha20-Poly1305 under the site's storage key with associated data
//   "SKP1" || lp(site id) || lp(namespace) || lp(stored row key); the stored row key is
//   HMAC-SHA256(subkey "row-key", lp(namespace) || lp(name)), and the plaintext is
//   lp(name) || value, whose name must match. lp = 4-byte big-endian length prefix.
//   Sizes (for quotas and LRU) and use counters are stored in clear; names and values never are.
// - One connection per partition, owned by a `PartitionCore` behind a `Mutex`; handles
//   (`Partition`) are counted by the registry; batches open the key scopes once.
// - Removal destroys the storage key first (crypto-shredding), then the folder, then the entry.
