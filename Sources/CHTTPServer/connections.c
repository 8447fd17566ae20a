// Connections and their deadlines: a head slower than allowed, or a kept-alive
// connection idle past its time, gets its socket shut (libmicrohttpd then
// closes it); and a comment to every event stream every 15 s.
#include "internal.h"

void chs_notify_connection(
    void *cls, struct MHD_Connection *connection, void **socket_context, enum MHD_ConnectionNotificationCode code) {
    cth_server *server = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        struct link *link = calloc(1, sizeof *link);
        if (!link) return;
        const union MHD_ConnectionInfo *info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
        link->fd = info ? info->connect_fd : -1;
        link->deadline_ms = chs_now_ms() + server->config.head_timeout_ms;
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
void *chs_request_line(void *cls, const char *uri, struct MHD_Connection *connection) {
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
        exchange->link->deadline_ms = chs_now_ms() + server->config.head_timeout_ms;
    pthread_mutex_unlock(&server->lock);
    return exchange;
}

/// Every half second: a head past its deadline gets its connection shut
/// (libmicrohttpd then closes it); every 15 s, a comment to every event stream.
void *chs_sweep(void *cls) {
    cth_server *server = cls;
    int64_t next_comment = chs_now_ms() + 15000;
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
        int64_t now = chs_now_ms();
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
            chs_say(server, "closed %d connection(s) whose request did not arrive in time", closed);
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
