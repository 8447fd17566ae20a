import CZeroMQ

/// libzmq's own proxy (`zmq_proxy_steerable`): forwards between a frontend
/// and a backend in both directions on the calling thread, copies each
/// frame to `capture` (before forwarding it), and obeys `PAUSE`, `RESUME`,
/// `TERMINATE` and `STATISTICS` sent to `control`.
public enum ZMQProxy {
    /// Runs the proxy until `TERMINATE` arrives on `control` (returns) or
    /// the context is terminated (throws). The sockets belong to the
    /// calling thread for the whole call.
    ///
    /// - Throws: `ZMQError` when the proxy stops on an error.
    public static func runSteerable(
        frontend: ZMQSocket, backend: ZMQSocket, capture: ZMQSocket?, control: ZMQSocket
    ) throws(ZMQError) {
        let rc = zmq_proxy_steerable(frontend.handle, backend.handle, capture?.handle, control.handle)
        // libzmq returns 0 after TERMINATE; -1 with ETERM when the context ends.
        if rc != 0 { throw ZMQError.last("zmq_proxy_steerable") }
    }
}
