// The request's head, checked against what libmicrohttpd 0.9.75 lets through of RFC 9112.
#include "internal.h"

struct head_scan {
    unsigned lines;
    int folded;
    unsigned content_lengths;
    int lengths_differ;
    char first_length[64];
    unsigned transfer_encodings;
    int not_chunked;
};

/// Whether `name` is a field name (RFC 9110 section 5.1: tchar only), and
/// not one the service or the framing reads with more behind it.
/// libmicrohttpd 0.9.75 appends an obsolete folded line (RFC 9112 section 5.2)
/// to the field's *name* ("Authorization: Bearer" CRLF " T" becomes the field
/// "AuthorizationT"), so such a name is the only trace a fold leaves.
static int is_field_name(const char *name) {
    static const char *read[] = {"content-length", "transfer-encoding", "host", "authorization", "cookie",
                                 "connection", "expect", "content-type", "x-forwarded-for", "x-forwarded-proto"};
    if (!*name) return 0;
    for (const char *c = name; *c; c++)
        if (!(('a' <= *c && *c <= 'z') || ('A' <= *c && *c <= 'Z') || ('0' <= *c && *c <= '9') ||
              strchr("!#$%&'*+-.^_`|~", *c)))
            return 0;
    for (size_t i = 0; i < sizeof read / sizeof *read; i++) {
        size_t n = strlen(read[i]);
        if (strlen(name) > n && strncasecmp(name, read[i], n) == 0) return 0;
    }
    return 1;
}

static enum MHD_Result scan_field(void *cls, enum MHD_ValueKind kind, const char *key, const char *value) {
    (void)kind;
    struct head_scan *scan = cls;
    scan->lines++;
    if (!value) value = "";
    if (!is_field_name(key)) scan->folded = 1;
    if (strcasecmp(key, "Content-Length") == 0) {
        if (scan->content_lengths++ == 0) snprintf(scan->first_length, sizeof scan->first_length, "%s", value);
        else if (strcmp(scan->first_length, value) != 0) scan->lengths_differ = 1;
    } else if (strcasecmp(key, "Transfer-Encoding") == 0) {
        scan->transfer_encodings++;
        if (strcasecmp(value, "chunked") != 0) scan->not_chunked = 1;
    }
    return MHD_YES;
}

/// What of RFC 9112's rules the head breaks, with its status; NULL when none.
const char *chs_check_head(
    cth_server *server, struct MHD_Connection *connection, const char *version, unsigned *status) {
    struct head_scan scan = {0};
    MHD_get_connection_values(connection, MHD_HEADER_KIND, scan_field, &scan);
    const union MHD_ConnectionInfo *size = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_REQUEST_HEADER_SIZE);
    *status = 431;
    if (size && size->header_size > server->config.max_head_bytes) return "the request's head is over 8 KiB\n";
    if (scan.lines > server->config.max_head_lines) return "the request has more than 100 header lines\n";
    *status = 400;
    if (scan.folded) return "a header line that is no field: obsolete line folding is refused (RFC 9112 section 5.2)\n";
    if (scan.content_lengths && scan.transfer_encodings)
        return "both Content-Length and Transfer-Encoding (RFC 9112 section 6.3)\n";
    if (scan.lengths_differ) return "two different Content-Length values\n";
    if (scan.transfer_encodings > 1) return "more than one Transfer-Encoding\n";
    // RFC 9112 section 3.2 (libmicrohttpd 0.9.75's own check of it writes its status line twice).
    if (version && strcmp(version, MHD_HTTP_VERSION_1_1) == 0 &&
        !MHD_lookup_connection_value(connection, MHD_HEADER_KIND, MHD_HTTP_HEADER_HOST))
        return "an HTTP/1.1 request without Host (RFC 9112 section 3.2)\n";
    *status = 501;
    if (scan.not_chunked) return "a Transfer-Encoding other than chunked\n";
    if (scan.content_lengths) {
        char *end = NULL;
        errno = 0;
        unsigned long long length = strtoull(scan.first_length, &end, 10);
        *status = 400;
        if (errno || end == scan.first_length || *end) return "Content-Length is not a number\n";
        *status = 413;
        if (length > server->config.max_body_bytes) return "the body is over limits.maxMessageBytes\n";
    }
    return NULL;
}
