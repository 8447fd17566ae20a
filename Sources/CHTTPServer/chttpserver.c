// The HTTP endpoint's server over libmicrohttpd and GnuTLS (see chttpserver.h).
//
// Locking: one mutex per server guards every exchange's and connection's
// shared fields and the list of event streams. libmicrohttpd's suspend is
// called with it held (so that no resume can come before it); resume is
// called without it, counted in `resuming` so that a stop waits for those
// still under way before it stops the daemon.
#define _GNU_SOURCE
#include "chttpserver.h"

#include <arpa/inet.h>
#include <errno.h>
#include <gnutls/abstract.h>
#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>

enum phase { PHASE_HEAD, PHASE_BODY, PHASE_WAITING, PHASE_ANSWERED };

/// One connection: the deadline its next head must meet.
struct link {
    int fd;
    int64_t deadline_ms;  // 0: none (a request being answered, or a stream)
    unsigned requests;
    struct link *prev, *next;
};

struct cth_exchange {
    cth_server *server;
    struct MHD_Connection *connection;
    struct link *link;
    int refs;  // libmicrohttpd's, and the handler's while it owes an answer
    enum phase phase;
    int suspended;
    char *target;
    char method[16];
    char peer[INET6_ADDRSTRLEN];
    uint8_t *body;
    size_t body_length, body_capacity;
    // A body past the limit (chunked: its length was not known): read on and
    // dropped, up to as much again, to be answered 413; past that, closed.
    size_t dropped;
    int too_large;
    // The answer.
    int answered, stream, close;
    unsigned status;
    char *headers;
    uint8_t *answer;
    size_t answer_length;
    // An event stream's bytes not yet sent.
    uint8_t *pending;
    size_t pending_start, pending_end, pending_capacity;
    int stream_ended;
    // A plain (not TLS) stream's socket: while the stream is suspended, and so
    // libmicrohttpd leaves its socket alone, an event is sent on it at once.
    int direct_fd;
    struct cth_exchange *prev_stream, *next_stream;
    // Waiting for its answer (a stop answers those still waiting).
    int is_waiting;
    struct cth_exchange *prev_waiting, *next_waiting;
};

/// A certificate chain and its key, as handshakes take them.
struct credentials {
    gnutls_pcert_st certificates[16];
    unsigned count;
    gnutls_privkey_t key;
    struct credentials *retired;  // older ones: a handshake under way may hold them
};

struct cth_server {
    struct MHD_Daemon *daemon;
    cth_config config;
    cth_request_fn on_request;
    cth_log_fn on_log;
    void *context;
    pthread_mutex_t lock;
    pthread_cond_t changed;
    struct link *links;
    int connections;
    cth_exchange *streams;
    int stream_count;
    cth_exchange *waiting;
    int resuming;
    int stopping;
    int exchanges;  // alive: the server is freed after the last
    int stopped;
    pthread_t sweeper;
};

// GnuTLS's certificate callback has no argument of ours: the credentials are
// the process's (one HTTP endpoint per process).
static pthread_mutex_t credentials_lock = PTHREAD_MUTEX_INITIALIZER;
static struct credentials *current_credentials;

static int64_t now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static void say(cth_server *server, const char *format, ...) {
    char line[512];
    va_list ap;
    va_start(ap, format);
    vsnprintf(line, sizeof line, format, ap);
    va_end(ap);
    if (server->on_log) server->on_log(server->context, line);
}

static void library_log(void *cls, const char *format, va_list ap) {
    cth_server *server = cls;
    char line[512];
    vsnprintf(line, sizeof line, format, ap);
    size_t n = strlen(line);
    while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r')) line[--n] = 0;
    if (server->on_log) server->on_log(server->context, line);
}

static void free_server(cth_server *server) {
    pthread_mutex_destroy(&server->lock);
    pthread_cond_destroy(&server->changed);
    free(server);
}

/// Drops one reference; the caller holds the lock, which this releases.
static void release_and_unlock(cth_exchange *exchange) {
    cth_server *server = exchange->server;
    int last = --exchange->refs == 0;
    int free_server_too = 0;
    if (last) free_server_too = --server->exchanges == 0 && server->stopped;
    pthread_mutex_unlock(&server->lock);
    if (!last) return;
    free(exchange->target);
    free(exchange->body);
    free(exchange->headers);
    free(exchange->answer);
    free(exchange->pending);
    free(exchange);
    if (free_server_too) free_server(server);
}

/// Takes `exchange` off the waiting list; the caller holds the lock.
static void stop_waiting(cth_exchange *exchange) {
    cth_server *server = exchange->server;
    if (!exchange->is_waiting) return;
    exchange->is_waiting = 0;
    if (exchange->prev_waiting) exchange->prev_waiting->next_waiting = exchange->next_waiting;
    else server->waiting = exchange->next_waiting;
    if (exchange->next_waiting) exchange->next_waiting->prev_waiting = exchange->prev_waiting;
    exchange->prev_waiting = exchange->next_waiting = NULL;
}

static void finish_resume(cth_server *server, int count) {
    pthread_mutex_lock(&server->lock);
    server->resuming -= count;
    pthread_cond_broadcast(&server->changed);
    pthread_mutex_unlock(&server->lock);
}

// ---- connections and their deadlines

static void notify_connection(
    void *cls, struct MHD_Connection *connection, void **socket_context, enum MHD_ConnectionNotificationCode code) {
    cth_server *server = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        struct link *link = calloc(1, sizeof *link);
        if (!link) return;
        const union MHD_ConnectionInfo *info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
        link->fd = info ? info->connect_fd : -1;
        link->deadline_ms = now_ms() + server->config.head_timeout_ms;
        pthread_mutex_lock(&server->lock);
        // Past the limit: closed at once (libmicrohttpd's own limit, set higher,
        // would leave it waiting in the backlog instead).
        if (server->connections >= (int)server->config.max_connections && link->fd >= 0) shutdown(link->fd, SHUT_RDWR);
        link->next = server->links;
        if (server->links) server->links->prev = link;
        server->links = link;
        server->connections++;
        pthread_mutex_unlock(&server->lock);
        *socket_context = link;
    } else if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
        struct link *link = *socket_context;
        if (!link) return;
        pthread_mutex_lock(&server->lock);
        if (link->prev) link->prev->next = link->next;
        else server->links = link->next;
        if (link->next) link->next->prev = link->prev;
        server->connections--;
        pthread_mutex_unlock(&server->lock);
        free(link);
        *socket_context = NULL;
    }
}

/// The request line is in: the exchange begins, and a later request's head has its deadline.
static void *request_line(void *cls, const char *uri, struct MHD_Connection *connection) {
    cth_server *server = cls;
    cth_exchange *exchange = calloc(1, sizeof *exchange);
    if (!exchange) return NULL;
    exchange->server = server;
    exchange->connection = connection;
    exchange->target = strdup(uri ? uri : "/");
    exchange->refs = 1;
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    exchange->link = info ? info->socket_context : NULL;
    pthread_mutex_lock(&server->lock);
    server->exchanges++;
    if (exchange->link && exchange->link->requests > 0)
        exchange->link->deadline_ms = now_ms() + server->config.head_timeout_ms;
    pthread_mutex_unlock(&server->lock);
    return exchange;
}

/// Every half second: a head past its deadline gets its connection shut
/// (libmicrohttpd then closes it); every 15 s, a comment to every event stream.
static void *sweep(void *cls) {
    cth_server *server = cls;
    int64_t next_comment = now_ms() + 15000;
    pthread_mutex_lock(&server->lock);
    while (!server->stopping) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += 250 * 1000000L;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec += 1;
            until.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&server->changed, &server->lock, &until);
        if (server->stopping) break;
        int64_t now = now_ms();
        int closed = 0;
        for (struct link *link = server->links; link; link = link->next) {
            if (link->deadline_ms != 0 && now >= link->deadline_ms && link->fd >= 0) {
                shutdown(link->fd, SHUT_RDWR);  // the fd stays libmicrohttpd's: it closes it, and tells us first
                link->deadline_ms = 0;
                closed++;
            }
        }
        if (closed) {
            pthread_mutex_unlock(&server->lock);
            say(server, "closed %d connection(s) whose request did not arrive in time", closed);
            pthread_mutex_lock(&server->lock);
        }
        if (now >= next_comment) {
            next_comment = now + 15000;
            pthread_mutex_unlock(&server->lock);
            static const char comment[] = ": keep-alive\n\n";
            cth_server_broadcast(server, (const uint8_t *)comment, sizeof comment - 1);
            pthread_mutex_lock(&server->lock);
        }
    }
    pthread_mutex_unlock(&server->lock);
    return NULL;
}

// ---- the request's head, checked

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
static const char *check_head(
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

// ---- answers

static enum MHD_Result add_headers(struct MHD_Response *response, const char *headers) {
    if (!headers) return MHD_YES;
    const char *line = headers;
    while (*line) {
        const char *end = strchr(line, '\n');
        size_t length = end ? (size_t)(end - line) : strlen(line);
        const char *colon = memchr(line, ':', length);
        if (colon) {
            char name[128], value[2048];
            size_t name_length = (size_t)(colon - line);
            const char *v = colon + 1;
            while (v < line + length && *v == ' ') v++;
            size_t value_length = (size_t)(line + length - v);
            if (name_length < sizeof name && value_length < sizeof value) {
                memcpy(name, line, name_length);
                name[name_length] = 0;
                memcpy(value, v, value_length);
                value[value_length] = 0;
                if (MHD_add_response_header(response, name, value) != MHD_YES) return MHD_NO;
            }
        }
        line += length;
        if (*line == '\n') line++;
    }
    return MHD_YES;
}

static enum MHD_Result queue_bytes(
    struct MHD_Connection *connection, unsigned status, const char *headers, const void *body, size_t length,
    int close) {
    struct MHD_Response *response = MHD_create_response_from_buffer(length, (void *)body, MHD_RESPMEM_MUST_COPY);
    if (!response) return MHD_NO;
    add_headers(response, headers);
    if (close) MHD_add_response_header(response, MHD_HTTP_HEADER_CONNECTION, "close");
    enum MHD_Result queued = MHD_queue_response(connection, status, response);
    MHD_destroy_response(response);
    return queued;
}

/// A refusal: its status, and §12's body (`too_large` for 413, else
/// `bad_request`) with the reason; the connection is closed after it, so that
/// nothing sent behind the request is read as another.
static enum MHD_Result refuse(cth_exchange *exchange, unsigned status, const char *reason) {
    exchange->phase = PHASE_ANSWERED;
    char body[512];
    int n = snprintf(
        body, sizeof body, "{\"ok\":false,\"error\":{\"code\":\"%s\",\"message\":\"%.*s\"}}\n",
        status == 413 ? "too_large" : "bad_request", (int)strcspn(reason, "\n"), reason);
    return queue_bytes(exchange->connection, status, "Content-Type: application/json\n", body, (size_t)n, 1);
}

static ssize_t stream_read(void *cls, uint64_t position, char *buffer, size_t max) {
    (void)position;
    cth_exchange *exchange = cls;
    cth_server *server = exchange->server;
    pthread_mutex_lock(&server->lock);
    if (exchange->pending_end > exchange->pending_start) {
        size_t n = exchange->pending_end - exchange->pending_start;
        if (n > max) n = max;
        memcpy(buffer, exchange->pending + exchange->pending_start, n);
        exchange->pending_start += n;
        if (exchange->pending_start == exchange->pending_end) exchange->pending_start = exchange->pending_end = 0;
        pthread_mutex_unlock(&server->lock);
        return (ssize_t)n;
    }
    if (exchange->stream_ended || server->stopping) {
        pthread_mutex_unlock(&server->lock);
        return MHD_CONTENT_READER_END_OF_STREAM;
    }
    exchange->suspended = 1;
    MHD_suspend_connection(exchange->connection);
    pthread_mutex_unlock(&server->lock);
    return 0;
}

/// Appends to a stream's pending bytes; the caller holds the lock. 0, or -1 past the backlog.
static int append_pending(cth_exchange *exchange, const uint8_t *bytes, size_t length) {
    size_t held = exchange->pending_end - exchange->pending_start;
    if (held + length > exchange->server->config.max_stream_backlog) return -1;
    if (exchange->pending_start > 0) {
        memmove(exchange->pending, exchange->pending + exchange->pending_start, held);
        exchange->pending_start = 0;
        exchange->pending_end = held;
    }
    if (held + length > exchange->pending_capacity) {
        size_t capacity = (held + length) * 2;
        uint8_t *grown = realloc(exchange->pending, capacity);
        if (!grown) return -1;
        exchange->pending = grown;
        exchange->pending_capacity = capacity;
    }
    memcpy(exchange->pending + exchange->pending_end, bytes, length);
    exchange->pending_end += length;
    return 0;
}

static enum MHD_Result queue_answer(cth_exchange *exchange) {
    cth_server *server = exchange->server;
    exchange->phase = PHASE_ANSWERED;
    if (!exchange->stream)
        return queue_bytes(
            exchange->connection, exchange->status, exchange->headers, exchange->answer, exchange->answer_length,
            exchange->close);
    pthread_mutex_lock(&server->lock);
    append_pending(exchange, exchange->answer, exchange->answer_length);
    exchange->next_stream = server->streams;
    if (server->streams) server->streams->prev_stream = exchange;
    server->streams = exchange;
    server->stream_count++;
    if (exchange->link) exchange->link->deadline_ms = 0;
    exchange->direct_fd = !server->config.tls && exchange->link ? exchange->link->fd : -1;
    pthread_mutex_unlock(&server->lock);
    struct MHD_Response *response = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, stream_read, exchange, NULL);
    if (!response) return MHD_NO;
    // No chunked framing: the events go on the wire as they are, and the stream's end is the connection's.
    MHD_set_response_options(response, MHD_RF_HTTP_1_0_COMPATIBLE_STRICT, MHD_RO_END);
    add_headers(response, exchange->headers);
    enum MHD_Result queued = MHD_queue_response(exchange->connection, exchange->status, response);
    MHD_destroy_response(response);
    return queued;
}

static enum MHD_Result on_access(
    void *cls, struct MHD_Connection *connection, const char *url, const char *method, const char *version,
    const char *upload_data, size_t *upload_data_size, void **req_cls) {
    (void)url;
    cth_server *server = cls;
    cth_exchange *exchange = *req_cls;
    if (!exchange) return MHD_NO;
    switch (exchange->phase) {
    case PHASE_HEAD: {
        exchange->phase = PHASE_BODY;
        pthread_mutex_lock(&server->lock);
        if (exchange->link) exchange->link->deadline_ms = 0;
        pthread_mutex_unlock(&server->lock);
        snprintf(exchange->method, sizeof exchange->method, "%s", method);
        const union MHD_ConnectionInfo *info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
        if (info && info->client_addr) {
            const struct sockaddr *address = info->client_addr;
            if (address->sa_family == AF_INET)
                inet_ntop(AF_INET, &((const struct sockaddr_in *)address)->sin_addr, exchange->peer, sizeof exchange->peer);
            else if (address->sa_family == AF_INET6)
                inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)address)->sin6_addr, exchange->peer, sizeof exchange->peer);
        }
        unsigned status;
        const char *refusal = check_head(server, connection, version, &status);
        return refusal ? refuse(exchange, status, refusal) : MHD_YES;
    }
    case PHASE_BODY:
        if (*upload_data_size > 0) {
            size_t length = *upload_data_size;
            *upload_data_size = 0;
            if (exchange->too_large || exchange->body_length + length > server->config.max_body_bytes) {
                // libmicrohttpd takes no answer while a body arrives: the 413 waits for its end.
                exchange->too_large = 1;
                exchange->dropped += length;
                return exchange->dropped > server->config.max_body_bytes ? MHD_NO : MHD_YES;
            }
            if (exchange->body_length + length > exchange->body_capacity) {
                size_t capacity = (exchange->body_length + length) * 2;
                uint8_t *grown = realloc(exchange->body, capacity);
                if (!grown) return MHD_NO;
                exchange->body = grown;
                exchange->body_capacity = capacity;
            }
            memcpy(exchange->body + exchange->body_length, upload_data, length);
            exchange->body_length += length;
            return MHD_YES;
        }
        if (exchange->too_large) return refuse(exchange, 413, "the body is over limits.maxMessageBytes\n");
        pthread_mutex_lock(&server->lock);
        if (server->stopping) {
            pthread_mutex_unlock(&server->lock);
            exchange->phase = PHASE_ANSWERED;
            return queue_bytes(connection, 503, "Retry-After: 1\n", "stopping\n", 9, 1);
        }
        exchange->phase = PHASE_WAITING;
        exchange->refs++;  // the handler's, until it answers
        exchange->suspended = 1;
        exchange->is_waiting = 1;
        exchange->next_waiting = server->waiting;
        if (server->waiting) server->waiting->prev_waiting = exchange;
        server->waiting = exchange;
        MHD_suspend_connection(connection);
        pthread_mutex_unlock(&server->lock);
        server->on_request(server->context, exchange);
        return MHD_YES;
    case PHASE_WAITING: {
        pthread_mutex_lock(&server->lock);
        int answered = exchange->answered;
        pthread_mutex_unlock(&server->lock);
        if (!answered) {  // resumed by a stop
            exchange->phase = PHASE_ANSWERED;
            return queue_bytes(connection, 503, "Retry-After: 1\n", "stopping\n", 9, 1);
        }
        return queue_answer(exchange);
    }
    case PHASE_ANSWERED:
    default:
        return MHD_NO;
    }
}

static void on_completed(void *cls, struct MHD_Connection *connection, void **req_cls, enum MHD_RequestTerminationCode toe) {
    (void)connection;
    (void)toe;
    cth_server *server = cls;
    cth_exchange *exchange = *req_cls;
    if (!exchange) return;
    *req_cls = NULL;
    pthread_mutex_lock(&server->lock);
    if (exchange->link) {
        exchange->link->requests++;
        // The next request line must come within the idle time, however slowly it trickles.
        exchange->link->deadline_ms = now_ms() + (int64_t)server->config.idle_timeout_s * 1000;
    }
    if (exchange->stream && exchange->phase == PHASE_ANSWERED &&
        (exchange->prev_stream || exchange->next_stream || server->streams == exchange)) {
        if (exchange->prev_stream) exchange->prev_stream->next_stream = exchange->next_stream;
        else server->streams = exchange->next_stream;
        if (exchange->next_stream) exchange->next_stream->prev_stream = exchange->prev_stream;
        server->stream_count--;
    }
    stop_waiting(exchange);
    exchange->connection = NULL;
    exchange->link = NULL;
    release_and_unlock(exchange);
}

// ---- TLS

static int pick_certificate(
    gnutls_session_t session, const gnutls_datum_t *req_ca_dn, int nreqs, const gnutls_pk_algorithm_t *algorithms,
    int algorithm_count, gnutls_pcert_st **certificates, unsigned int *count, gnutls_privkey_t *key) {
    (void)session;
    (void)req_ca_dn;
    (void)nreqs;
    (void)algorithms;
    (void)algorithm_count;
    pthread_mutex_lock(&credentials_lock);
    struct credentials *current = current_credentials;
    pthread_mutex_unlock(&credentials_lock);
    if (!current) return -1;
    *certificates = current->certificates;
    *count = current->count;
    *key = current->key;
    return 0;
}

static int fail(char *error, size_t error_length, const char *what, int code) {
    snprintf(error, error_length, "%s: %s", what, gnutls_strerror(code));
    return -1;
}

static int read_credentials(
    const char *certificate_pem, size_t certificate_length, const char *key_pem, size_t key_length,
    struct credentials **out, char *error, size_t error_length) {
    gnutls_datum_t certificate = {(unsigned char *)certificate_pem, (unsigned)certificate_length};
    gnutls_datum_t key = {(unsigned char *)key_pem, (unsigned)key_length};
    gnutls_certificate_credentials_t check;
    int rc = gnutls_certificate_allocate_credentials(&check);
    if (rc < 0) return fail(error, error_length, "credentials", rc);
    rc = gnutls_certificate_set_x509_key_mem2(check, &certificate, &key, GNUTLS_X509_FMT_PEM, NULL, 0);
    gnutls_certificate_free_credentials(check);
    if (rc < 0) return fail(error, error_length, "the certificate and key", rc);
    if (!out) return 0;
    struct credentials *made = calloc(1, sizeof *made);
    if (!made) return fail(error, error_length, "memory", GNUTLS_E_MEMORY_ERROR);
    made->count = 16;
    rc = gnutls_pcert_list_import_x509_raw(made->certificates, &made->count, &certificate, GNUTLS_X509_FMT_PEM, 0);
    if (rc < 0) {
        free(made);
        return fail(error, error_length, "the certificate", rc);
    }
    rc = gnutls_privkey_init(&made->key);
    if (rc >= 0) rc = gnutls_privkey_import_x509_raw(made->key, &key, GNUTLS_X509_FMT_PEM, NULL, 0);
    if (rc < 0) {
        for (unsigned i = 0; i < made->count; i++) gnutls_pcert_deinit(&made->certificates[i]);
        if (made->key) gnutls_privkey_deinit(made->key);
        free(made);
        return fail(error, error_length, "the key", rc);
    }
    *out = made;
    return 0;
}

int cth_tls_check(
    const char *certificate_pem, size_t certificate_length, const char *key_pem, size_t key_length, char *error,
    size_t error_length) {
    return read_credentials(certificate_pem, certificate_length, key_pem, key_length, NULL, error, error_length);
}

int cth_tls_load(
    cth_server *server, const char *certificate_pem, size_t certificate_length, const char *key_pem, size_t key_length,
    char *error, size_t error_length) {
    (void)server;
    struct credentials *made;
    if (read_credentials(certificate_pem, certificate_length, key_pem, key_length, &made, error, error_length) < 0) return -1;
    pthread_mutex_lock(&credentials_lock);
    made->retired = current_credentials;  // kept: a handshake under way may hold them
    current_credentials = made;
    pthread_mutex_unlock(&credentials_lock);
    return 0;
}

// ---- the server

cth_server *cth_server_start(
    const cth_config *config, cth_request_fn on_request, cth_log_fn on_log, void *context, char *error,
    size_t error_length) {
    cth_server *server = calloc(1, sizeof *server);
    if (!server) {
        snprintf(error, error_length, "out of memory");
        return NULL;
    }
    server->config = *config;
    server->on_request = on_request;
    server->on_log = on_log;
    server->context = context;
    pthread_mutex_init(&server->lock, NULL);
    pthread_cond_init(&server->changed, NULL);
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG;
    if (config->tls) {
        pthread_mutex_lock(&credentials_lock);
        int have = current_credentials != NULL;
        pthread_mutex_unlock(&credentials_lock);
        if (!have) {
            snprintf(error, error_length, "TLS without a certificate loaded");
            free_server(server);
            return NULL;
        }
        flags |= MHD_USE_TLS;
    }
    struct MHD_OptionItem options[] = {
        {MHD_OPTION_EXTERNAL_LOGGER, (intptr_t)library_log, server},  // first, so that every message comes here
        {MHD_OPTION_LISTEN_SOCKET, config->listen_fd, NULL},
        {MHD_OPTION_CONNECTION_LIMIT, config->max_connections * 2 + 64, NULL},  // split among the pool's threads
        {MHD_OPTION_CONNECTION_TIMEOUT, config->idle_timeout_s, NULL},
        {MHD_OPTION_THREAD_POOL_SIZE, 2, NULL},
        // Each connection's pool, zeroed whole after every request (so a kept-alive
        // connection costs all of it): room for a head at the limit and the
        // answer's header, so that a head a little over it is named by the check above.
        {MHD_OPTION_CONNECTION_MEMORY_LIMIT, (intptr_t)(config->max_head_bytes + 8192), NULL},
        {MHD_OPTION_NOTIFY_CONNECTION, (intptr_t)notify_connection, server},
        {MHD_OPTION_NOTIFY_COMPLETED, (intptr_t)on_completed, server},
        {MHD_OPTION_URI_LOG_CALLBACK, (intptr_t)request_line, server},
        {config->tls ? MHD_OPTION_HTTPS_CERT_CALLBACK : MHD_OPTION_END, (intptr_t)pick_certificate,
         (void *)pick_certificate},
        {MHD_OPTION_END, 0, NULL},
    };
    server->daemon = MHD_start_daemon(
        flags, 0, NULL, NULL, on_access, server, MHD_OPTION_ARRAY, options, MHD_OPTION_END);
    if (!server->daemon) {
        snprintf(error, error_length, "libmicrohttpd could not start (see the lines before)");
        free_server(server);
        return NULL;
    }
    if (pthread_create(&server->sweeper, NULL, sweep, server) != 0) {
        MHD_stop_daemon(server->daemon);
        snprintf(error, error_length, "could not start the sweeper thread");
        free_server(server);
        return NULL;
    }
    return server;
}

void cth_server_stop(cth_server *server) {
    pthread_mutex_lock(&server->lock);
    server->stopping = 1;
    pthread_cond_broadcast(&server->changed);
    // Every suspended connection is resumed: a stream to end, a request to be answered 503.
    int count = 0;
    for (cth_exchange *s = server->streams; s; s = s->next_stream) count++;
    for (cth_exchange *w = server->waiting; w; w = w->next_waiting) count++;
    struct MHD_Connection **resume = calloc((size_t)count + 1, sizeof *resume);
    int n = 0;
    for (cth_exchange *s = server->streams; s && resume; s = s->next_stream)
        if (s->suspended) {
            s->suspended = 0;
            resume[n++] = s->connection;
        }
    for (cth_exchange *w = server->waiting; w && resume; w = w->next_waiting)
        if (w->suspended) {
            w->suspended = 0;
            resume[n++] = w->connection;
        }
    server->resuming += n;
    pthread_mutex_unlock(&server->lock);
    for (int i = 0; i < n; i++) MHD_resume_connection(resume[i]);
    free(resume);
    finish_resume(server, n);
    pthread_join(server->sweeper, NULL);
    pthread_mutex_lock(&server->lock);
    while (server->resuming > 0) pthread_cond_wait(&server->changed, &server->lock);
    pthread_mutex_unlock(&server->lock);
    MHD_stop_daemon(server->daemon);
    pthread_mutex_lock(&server->lock);
    server->stopped = 1;
    int last = server->exchanges == 0;
    pthread_mutex_unlock(&server->lock);
    if (last) free_server(server);
}

void cth_respond(
    cth_exchange *exchange, unsigned status, const char *headers, const uint8_t *body, size_t length, int stream,
    int close) {
    cth_server *server = exchange->server;
    uint8_t *copy = length ? malloc(length) : NULL;
    if (copy) memcpy(copy, body, length);
    char *header_copy = headers ? strdup(headers) : NULL;
    pthread_mutex_lock(&server->lock);
    exchange->status = status;
    exchange->headers = header_copy;
    exchange->answer = copy;
    exchange->answer_length = copy ? length : 0;
    exchange->stream = stream;
    exchange->close = close;
    exchange->answered = 1;
    stop_waiting(exchange);
    struct MHD_Connection *connection = NULL;
    if (exchange->suspended && exchange->connection) {
        exchange->suspended = 0;
        connection = exchange->connection;
        server->resuming++;
    }
    release_and_unlock(exchange);  // still held by libmicrohttpd while suspended
    if (connection) {
        MHD_resume_connection(connection);
        finish_resume(server, 1);
    }
}

void cth_server_broadcast(cth_server *server, const uint8_t *bytes, size_t length) {
    pthread_mutex_lock(&server->lock);
    if (server->stopping || server->stream_count == 0) {
        pthread_mutex_unlock(&server->lock);
        return;
    }
    struct MHD_Connection **resume = calloc((size_t)server->stream_count, sizeof *resume);
    int n = 0;
    for (cth_exchange *s = server->streams; s; s = s->next_stream) {
        if (s->stream_ended) continue;
        size_t sent = 0;
        // Suspended with nothing pending: libmicrohttpd has handed all it had to
        // the kernel and leaves the socket alone, so the event goes out now,
        // without waking its thread (the connection stays suspended).
        if (s->suspended && s->direct_fd >= 0 && s->pending_end == s->pending_start) {
            ssize_t n_sent;
            do n_sent = send(s->direct_fd, bytes, length, MSG_DONTWAIT | MSG_NOSIGNAL);
            while (n_sent < 0 && errno == EINTR);
            if (n_sent == (ssize_t)length) continue;
            if (n_sent < 0 && errno != EAGAIN && errno != EWOULDBLOCK) s->stream_ended = 1;  // the client is gone
            else if (n_sent > 0) sent = (size_t)n_sent;
        }
        // The rest waits for libmicrohttpd, which sends it when the socket takes it.
        if (!s->stream_ended && append_pending(s, bytes + sent, length - sent) < 0) s->stream_ended = 1;
        if (s->suspended && resume) {  // to send what is pending, or to end
            s->suspended = 0;
            resume[n++] = s->connection;
        }
    }
    server->resuming += n;
    pthread_mutex_unlock(&server->lock);
    for (int i = 0; i < n; i++) MHD_resume_connection(resume[i]);
    free(resume);
    if (n) finish_resume(server, n);
}

int cth_server_streams(cth_server *server) {
    pthread_mutex_lock(&server->lock);
    int n = server->stream_count;
    pthread_mutex_unlock(&server->lock);
    return n;
}

int cth_server_connections(cth_server *server) {
    pthread_mutex_lock(&server->lock);
    int n = server->connections;
    pthread_mutex_unlock(&server->lock);
    return n;
}

const char *cth_request_method(cth_exchange *exchange) { return exchange->method; }
const char *cth_request_target(cth_exchange *exchange) { return exchange->target; }
const char *cth_request_peer(cth_exchange *exchange) { return exchange->peer; }

const char *cth_request_header(cth_exchange *exchange, const char *name) {
    return exchange->connection ? MHD_lookup_connection_value(exchange->connection, MHD_HEADER_KIND, name) : NULL;
}

const uint8_t *cth_request_body(cth_exchange *exchange, size_t *length) {
    *length = exchange->body_length;
    return exchange->body;
}

int cth_sha256(const void *data, size_t length, uint8_t digest[32]) {
    return gnutls_hash_fast(GNUTLS_DIG_SHA256, data, length, digest) < 0 ? -1 : 0;
}

int cth_random(void *buffer, size_t length) { return gnutls_rnd(GNUTLS_RND_KEY, buffer, length) < 0 ? -1 : 0; }
