import Foundation
import ZeroMQ

extension ConfigurationLoader {
    /// The `follow` section (docs/protocol.md §11): the primary's query and
    /// update endpoints, and under CURVE its public key and this standby's
    /// own key file.
    static func follow(_ s: Object, _ reader: Reader, _ folder: String) throws -> ServiceConfiguration.Follow {
        func endpoint(_ key: String) throws -> String {
            guard let v = try reader.string(s, "follow." + key) else {
                throw reader.fail("follow." + key, "is required with follow (the primary's \(key) endpoint)")
            }
            return resolveIPC(try reader.endpoint(v, "follow." + key), folder)
        }
        let serverKey = try reader.string(s, "follow.serverKey")
        if let serverKey, !CurveKeyPair.isKey(serverKey) {
            throw reader.fail("follow.serverKey", "must be a 40-character Z85 public key, got \"\(serverKey)\"")
        }
        let keyFile = try reader.string(s, "follow.keyFile").map { resolve($0, folder) }
        if keyFile != nil, serverKey == nil {
            throw reader.fail("follow.keyFile", "needs follow.serverKey, the primary's public key")
        }
        var follow = ServiceConfiguration.Follow(
            query: try endpoint("query"), updates: try endpoint("updates"), serverKey: serverKey, keyFile: keyFile)
        follow.adopt = try reader.bool(s, "follow.adopt") ?? false
        return follow
    }
}
