import CZeroMQ

extension ZMQSocket {
    public enum PollItem {
        case socket(ZMQSocket)
        case fd(Int32)
    }

    /// Waits until one of `items` is ready or `timeoutMs` passes (-1: forever).
    /// Returns which items are readable.
    public static func poll(_ items: [PollItem], timeoutMs: Int) throws(ZMQError) -> [Bool] {
        var set = PollSet(items)
        try set.wait(timeoutMs: timeoutMs)
        return items.indices.map(set.isReadable)
    }

    /// Items to poll, kept from one wait to the next: a loop that polls on
    /// every turn (`SocketLoop`) built the C array and the answers afresh
    /// each time, two allocations per turn.
    public struct PollSet {
        private var raw: [zmq_pollitem_t]

        public init(_ items: [PollItem]) {
            raw = items.map { item in
                switch item {
                case .socket(let s): zmq_pollitem_t(socket: s.handle, fd: 0, events: Int16(ZMQ_POLLIN), revents: 0)
                case .fd(let fd): zmq_pollitem_t(socket: nil, fd: fd, events: Int16(ZMQ_POLLIN), revents: 0)
                }
            }
        }

        /// Waits until an item is readable or `timeoutMs` passes (-1:
        /// forever); then `isReadable` answers for each. An interrupted
        /// wait returns with none readable.
        public mutating func wait(timeoutMs: Int) throws(ZMQError) {
            let rc = raw.withUnsafeMutableBufferPointer { zmq_poll($0.baseAddress, Int32($0.count), timeoutMs) }
            guard rc < 0 else { return }
            let error = ZMQError.last("polling")
            guard error.isInterrupted else { throw error }
            for i in raw.indices { raw[i].revents = 0 }
        }

        /// Whether the item at `index` was readable at the last wait.
        public func isReadable(_ index: Int) -> Bool { raw[index].revents & Int16(ZMQ_POLLIN) != 0 }
    }
}
