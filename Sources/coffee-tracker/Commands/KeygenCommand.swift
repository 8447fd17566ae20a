import ZeroMQ

enum KeygenCommand {
    static let help = """
        Usage: coffee-tracker keygen

        Prints a new CURVE key pair in Z85 (40 characters each), for the
        security settings of PROTOCOL.md §6: the public key goes on the other
        side's allow-list, the secret key stays with its owner.
        """

    static func run(_ words: [String]) throws -> Int32 {
        let args = try Arguments(words, valued: [], switches: ["help"])
        if args.has("help") {
            print(help)
            return 0
        }
        guard ZMQContext.hasCurve else {
            printError("coffee-tracker keygen: this libzmq (\(ZMQContext.version)) was built without CURVE")
            return 1
        }
        let pair = try CurveKeyPair.generate()
        print("public: \(pair.publicKey)")
        print("secret: \(pair.secretKey)")
        return 0
    }
}
