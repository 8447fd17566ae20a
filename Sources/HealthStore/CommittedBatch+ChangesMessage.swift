import CoffeeDomain

extension CommittedBatch {
    /// `resolved()` as a `changes` message (`WireFormat.changesMessage`, with
    /// the commit's identity and anchors), appended to `out`. A commit with
    /// no UUID in its log twice is written straight from the log, without
    /// making `resolved()`'s arrays: the publisher writes every commit, and at
    /// 1,000 drinks a second those were three of an event's allocations.
    public func writeChangesMessage(into out: inout [UInt8]) {
        guard !replacesRecords else {
            let changes = resolved()
            out += WireFormat.changesMessage(
                identity: identity, anchor: anchor, previousAnchor: previousAnchor, added: changes.added,
                addedAnchors: changes.addedAnchors, deleted: changes.deleted, deletedAnchors: changes.deletedAnchors,
                kept: changes.kept)
            return
        }
        // Room for the whole message at once: a commit of thousands of
        // drinks grew its body by doubling, each step a copy of all before.
        out.reserveCapacity(out.count + Self.messageHeadBytes + log.count * Self.changeBytes)
        WireFormat.writeChangesMessage(identity: identity, anchor: anchor, previousAnchor: previousAnchor, into: &out) {
            out in
            JSONBytes.append(#""added":"#, to: &out)
            WireFormat.appendArray(
                log.indices.lazy.compactMap { i -> (Drink, Int64)? in
                    guard case .added(let drink) = log[i] else { return nil }
                    return (drink, anchor(at: i))
                }, into: &out
            ) { WireFormat.write($0, anchor: $1, into: &$2) }
            JSONBytes.append(#","deleted":"#, to: &out)
            WireFormat.appendArray(
                log.indices.lazy.compactMap { i -> (Tombstone, Int64)? in
                    guard case .deleted(let tombstone) = log[i] else { return nil }
                    return (tombstone, anchor(at: i))
                }, into: &out
            ) { WireFormat.write($0, anchor: $1, into: &$2) }
        }
        WireFormat.writeChangesEnd(kept: kept, into: &out)
    }

    /// The message's members other than its changes (the identity, the anchors).
    static let messageHeadBytes = 256
    /// A drink as `changes` writes it, without a source: 150 to 170 bytes.
    static let changeBytes = 176
}
