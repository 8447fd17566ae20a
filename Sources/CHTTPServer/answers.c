// Answers: a body at once, an event stream fed by `cth_server_broadcast`, or
// a body sent as it is made (bodies.c).
#include "internal.h"

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

enum MHD_Result chs_queue_bytes(
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
enum MHD_Result chs_refuse(cth_exchange *exchange, unsigned status, const char *reason) {
    exchange->phase = PHASE_ANSWERED;
    char body[512];
    int n = snprintf(
        body, sizeof body, "{\"ok\":false,\"error\":{\"code\":\"%s\",\"message\":\"%.*s\"}}\n",
        status == 413 ? "too_large" : "bad_request", (int)strcspn(reason, "\n"), reason);
    return chs_queue_bytes(exchange->connection, status, "Content-Type: application/json\n", body, (size_t)n, 1);
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
        void *more_context = NULL;
        cth_more_fn more = exchange->pending_end - exchange->pending_start < CHS_BODY_MARK
            ? chs_take_more(exchange, &more_context)
            : NULL;
        pthread_mutex_unlock(&server->lock);
        if (more) more(more_context);
        return (ssize_t)n;
    }
    if (exchange->stream_ended || server->stopping) {
        // A body that its writer did not end whole is cut short: no last chunk, and the connection closed.
        int cut = exchange->body_stream && (exchange->body_failed || !exchange->stream_ended);
        pthread_mutex_unlock(&server->lock);
        return cut ? MHD_CONTENT_READER_END_WITH_ERROR : MHD_CONTENT_READER_END_OF_STREAM;
    }
    exchange->suspended = 1;
    MHD_suspend_connection(exchange->connection);
    pthread_mutex_unlock(&server->lock);
    return 0;
}

/// Appends to a stream's pending bytes; the caller holds the lock. 0, or -1 past the backlog.
int chs_append_pending(cth_exchange *exchange, const uint8_t *bytes, size_t length) {
    size_t held = exchange->pending_end - exchange->pending_start;
    if (held + length > exchange->server->config.max_stream_backlog) return -1;
    if (exchange->pending_start > 0) {
        memmove(exchange->pending, exchange->pending + exchange->pending_start, held);
        exchange->pending_start = 0;
        exchange->pending_end = held;
    }
    if (length == 0) return 0;
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

enum MHD_Result chs_queue_answer(cth_exchange *exchange) {
    cth_server *server = exchange->server;
    exchange->phase = PHASE_ANSWERED;
    if (!exchange->stream)
        return chs_queue_bytes(
            exchange->connection, exchange->status, exchange->headers, exchange->answer, exchange->answer_length,
            exchange->close);
    pthread_mutex_lock(&server->lock);
    chs_append_pending(exchange, exchange->answer, exchange->answer_length);
    // In the list of streams so that a stop ends it; counted and broadcast to only as an event stream.
    exchange->next_stream = server->streams;
    if (server->streams) server->streams->prev_stream = exchange;
    server->streams = exchange;
    if (!exchange->body_stream) server->stream_count++;
    if (exchange->link) exchange->link->deadline_ms = 0;
    exchange->direct_fd = !server->config.tls && exchange->link ? exchange->link->fd : -1;
    pthread_mutex_unlock(&server->lock);
    struct MHD_Response *response = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, stream_read, exchange, NULL);
    if (!response) return MHD_NO;
    // An event stream has no chunked framing: the events go on the wire as
    // they are, and the stream's end is the connection's. A body is chunked,
    // so that its end is seen and the connection kept.
    if (!exchange->body_stream) MHD_set_response_options(response, MHD_RF_HTTP_1_0_COMPATIBLE_STRICT, MHD_RO_END);
    add_headers(response, exchange->headers);
    enum MHD_Result queued = MHD_queue_response(exchange->connection, exchange->status, response);
    MHD_destroy_response(response);
    return queued;
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
        if (s->stream_ended || s->body_stream) continue;
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
        if (!s->stream_ended && chs_append_pending(s, bytes + sent, length - sent) < 0) s->stream_ended = 1;
        if (s->suspended && resume) {  // to send what is pending, or to end
            s->suspended = 0;
            resume[n++] = s->connection;
        }
    }
    server->resuming += n;
    pthread_mutex_unlock(&server->lock);
    for (int i = 0; i < n; i++) MHD_resume_connection(resume[i]);
    free(resume);
    if (n) chs_finish_resume(server, n);
}
