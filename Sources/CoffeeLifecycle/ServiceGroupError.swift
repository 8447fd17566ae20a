/// Why a `ServiceGroup` ended other than by a requested shutdown, naming
/// the service.
public struct ServiceGroupError: Error, CustomStringConvertible {
    private enum Code {
        case startFailed
        case runFailed
        case finishedEarly
        case drainTimedOut
        case ranTwice
    }
    private let code: Code
    /// The service's name.
    public let service: String
    /// What it threw; nil when it returned before it was asked to.
    public let underlying: (any Error)?

    static func startFailed(_ service: String, _ error: any Error) -> Self {
        Self(code: .startFailed, service: service, underlying: error)
    }
    static func runFailed(_ service: String, _ error: any Error) -> Self {
        Self(code: .runFailed, service: service, underlying: error)
    }
    static func finishedEarly(_ service: String) -> Self {
        Self(code: .finishedEarly, service: service, underlying: nil)
    }
    /// `run()` was called on a group that ran already: its services are not started twice.
    static func ranTwice(_ services: [String]) -> Self {
        Self(code: .ranTwice, service: services.joined(separator: ", "), underlying: nil)
    }
    /// The drain passed the group's deadline; `service` names those still running then.
    static func drainTimedOut(_ services: [String]) -> Self {
        Self(code: .drainTimedOut, service: services.joined(separator: ", "), underlying: nil)
    }

    /// True when the service failed in `start()`: it never ran.
    public var isStartFailure: Bool { code == .startFailed }

    public var description: String {
        switch code {
        case .startFailed: "\(service) could not start: \(underlying.map { "\($0)" } ?? "")"
        case .runFailed: "\(service) failed: \(underlying.map { "\($0)" } ?? "")"
        case .finishedEarly: "\(service) stopped on its own before it was asked to"
        case .drainTimedOut: "the drain passed its deadline; cancelled the services still running: \(service)"
        case .ranTwice: "a service group runs once; it ran already (\(service))"
        }
    }
}
