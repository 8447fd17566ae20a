// The HTTP endpoint's server over libmicrohttpd (see chttpserver.h and
// internal.h): its start and stop, and the access handler that suspends a
// whole request until its answer.
#include "internal.h"

int64_t chs_now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

void chs_say(cth_server *server, const char *format, ...) {
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
void chs_release_and_unlock(cth_exchange *exchange) {
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
void chs_stop_waiting(cth_exchange *exchange) {
    cth_server *server = exchange->server;
    if (!exchange->is_waiting) return;
    exchange->is_waiting = 0;
    if (exchange->prev_waiting) exchange->prev_waiting->next_waiting = exchange->next_waiting;
    else server->waiting = exchange->next_waiting;
    if (exchange->next_waiting) exchange->next_waiting->prev_waiting = exchange->prev_waiting;
    exchange->prev_waiting = exchange->next_waiting = NULL;
}

void chs_finish_resume(cth_server *server, int count) {
    pthread_mutex_lock(&server->lock);
    server->resuming -= count;
    pthread_cond_broadcast(&server->changed);
    pthread_mutex_unlock(&server->lock);
}

// ---- connections and their deadlines

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
        const char *refusal = chs_check_head(server, connection, version, &status);
        return refusal ? chs_refuse(exchange, status, refusal) : MHD_YES;
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
        if (exchange->too_large) return chs_refuse(exchange, 413, "the body is over limits.maxMessageBytes\n");
        pthread_mutex_lock(&server->lock);
        if (server->stopping) {
            pthread_mutex_unlock(&server->lock);
            exchange->phase = PHASE_ANSWERED;
            return chs_queue_bytes(connection, 503, "Retry-After: 1\n", "stopping\n", 9, 1);
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
            return chs_queue_bytes(connection, 503, "Retry-After: 1\n", "stopping\n", 9, 1);
        }
        return chs_queue_answer(exchange);
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
        exchange->link->deadline_ms = chs_now_ms() + (int64_t)server->config.idle_timeout_s * 1000;
    }
    if (exchange->stream && exchange->phase == PHASE_ANSWERED &&
        (exchange->prev_stream || exchange->next_stream || server->streams == exchange)) {
        if (exchange->prev_stream) exchange->prev_stream->next_stream = exchange->next_stream;
        else server->streams = exchange->next_stream;
        if (exchange->next_stream) exchange->next_stream->prev_stream = exchange->prev_stream;
        if (!exchange->body_stream) server->stream_count--;
    }
    chs_stop_waiting(exchange);
    exchange->connection = NULL;
    exchange->link = NULL;
    void *more_context = NULL;
    cth_more_fn more = chs_take_more(exchange, &more_context);  // a body's writer hears that the client is gone
    chs_release_and_unlock(exchange);
    if (more) more(more_context);
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
        if (!chs_tls_ready()) {
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
        {MHD_OPTION_NOTIFY_CONNECTION, (intptr_t)chs_notify_connection, server},
        {MHD_OPTION_NOTIFY_COMPLETED, (intptr_t)on_completed, server},
        {MHD_OPTION_URI_LOG_CALLBACK, (intptr_t)chs_request_line, server},
        {config->tls ? MHD_OPTION_HTTPS_CERT_CALLBACK : MHD_OPTION_END, (intptr_t)chs_pick_certificate,
         (void *)chs_pick_certificate},
        {MHD_OPTION_END, 0, NULL},
    };
    server->daemon = MHD_start_daemon(
        flags, 0, NULL, NULL, on_access, server, MHD_OPTION_ARRAY, options, MHD_OPTION_END);
    if (!server->daemon) {
        snprintf(error, error_length, "libmicrohttpd could not start (see the lines before)");
        free_server(server);
        return NULL;
    }
    if (pthread_create(&server->sweeper, NULL, chs_sweep, server) != 0) {
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
    chs_finish_resume(server, n);
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

