/// A long-running part of the service: the store, a socket, the model, the inbox.
///
/// The shape of swift-service-lifecycle's `Service`, with a start phase of
/// its own: a `ServiceGroup` calls `start()` on each service in order and
/// begins the next only when it returns, so a part can rely on every part
/// before it being up (the store open, the publisher bound). `run()` then
/// runs until the service's graceful shutdown is triggered
/// (`gracefulShutdown()` returns), finishes the service's own work (a
/// producer commits what it submitted, a publisher sends what it holds) and
/// returns. Cancellation means "stop now".
public protocol Service: Sendable {
    /// For logs and errors: "store", "ingest".
    var name: String { get }

    /// Opens files, binds sockets, loads state. The group starts the next
    /// service only after this returns.
    ///
    /// - Throws: anything that keeps the service from starting; the group
    ///   then shuts down the services started before it and reports this
    ///   error under the service's name.
    func start() async throws

    /// Runs until `gracefulShutdown()` returns, then drains and returns.
    /// Returning earlier, or throwing, ends the whole group.
    func run() async throws
}

extension Service {
    public func start() async throws {}
}
