/// What the writer's connection knows of the drinks that SQLite's index by
/// date does not hold yet (`StoreSchema.deferredDateIndex`), and when they
/// go in: the rule, apart from the statements that carry it out
/// (`Statements+DateIndex.swift`).
///
/// A commit of at most `largestDeferred` changes (a drink or two from the
/// bus, a tap on the page) writes its drinks with `indexed = 0`, so that it
/// writes the table's last leaf and a leaf of the UUIDs' index, not a leaf
/// of the index by date too: at 1,000 drinks a second each commit wrote
/// three pages of the WAL where the C peer's writes two. Once some
/// `settleEvery` rows lie above `date_indexed`, the commit that finds so
/// sets them to 1 (a few table leaves and index leaves, once) and moves
/// `date_indexed` to the highest anchor, so that a read by date never takes
/// more than about that many rows by anchor besides the index's range. A
/// larger commit, which writes the index anyway, does the same at once
/// (one page of `meta` more, over more than `largestDeferred` rows), so
/// that the rows by anchor are only ever ones left out.
struct DateIndexDeferral: Sendable {
    /// Commits of at most this many changes leave their drinks out of the index.
    static let largestDeferred = 16
    /// Rows written above `date_indexed` before a commit puts them in the index.
    static let settleEvery = 1024

    /// Whether the commit under way leaves its drinks out of the index.
    var deferring = false
    /// `date_indexed` as last committed; nil until read.
    private(set) var through: Int64?
    /// The highest anchor a drink was written at out of the index since
    /// `through` moved (`Int64.max` when not known: after opening the file).
    private(set) var lastDeferred: Int64 = 0
    /// Rows written since `through` moved.
    private(set) var rowsSince = 0

    /// `date_indexed` read from the file: what was written out of the index
    /// before is not known, so the first commit that writes puts it all in.
    mutating func opened(through: Int64) {
        self.through = through
        lastDeferred = .max
        rowsSince = Self.settleEvery
    }

    /// A drink written at `anchor`; its `indexed`.
    mutating func wrote(at anchor: Int64) -> Int64 {
        guard deferring else { return 1 }
        lastDeferred = max(lastDeferred, anchor)
        return 0
    }

    /// Whether a commit that wrote `rows` more rows puts the drinks out of
    /// the index into it (a commit that does not defer always does): which
    /// anchors, if any, to set (above `through`, up to the last one left out).
    func settles(after rows: Int) -> (settle: Bool, anchors: ClosedRange<Int64>?) {
        guard rows > 0, let through, !deferring || rowsSince + rows >= Self.settleEvery else { return (false, nil) }
        return (true, lastDeferred > through ? (through + 1)...lastDeferred : nil)
    }

    /// After a commit: `through` moved to `movedTo`, or `rows` more lie above it.
    mutating func committed(rows: Int, movedTo: Int64?) {
        if let movedTo {
            (through, lastDeferred, rowsSince) = (movedTo, 0, 0)
        } else {
            rowsSince += rows
        }
    }
}
