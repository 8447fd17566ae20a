import Foundation

extension InboxFormat {
    /// An Apple Health export's `export.xml` (docs/protocol.md §5).
    public static let healthExport = InboxFormat(
        "an Apple Health export", extensions: [".xml"], streams: true, skipsBadRecords: true, sizeLimit: .export
    ) { input, context throws(InboxFileError) in
        try HealthExportReader(source: HealthExportSource(xml: fileDescriptor(input)), context: context)
    }

    /// The `export.zip` the Health app writes, holding `apple_health_export/export.xml`.
    public static let healthExportZip = InboxFormat(
        "an Apple Health export (zip)", extensions: [".zip"], streams: true, skipsBadRecords: true, sizeLimit: .export
    ) { input, context throws(InboxFileError) in
        try HealthExportReader(source: HealthExportSource(zip: fileDescriptor(input)), context: context)
    }

    private static func fileDescriptor(_ input: Input) throws(InboxFileError) -> Int32 {
        guard case .file(let file) = input else { throw InboxFileError("a Health export is read from its file, as a stream") }
        return file.fileDescriptor
    }
}

extension HealthExportReader {
    convenience init(source: HealthExportSource, context: InboxFormat.Context) throws(InboxFileError) {
        try self.init(source: source, validator: context.parser.decoder.validator, now: context.now)
    }
}
