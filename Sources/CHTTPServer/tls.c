// TLS: the credentials every handshake takes, swapped by `cth_tls_load`.
#include "internal.h"

// GnuTLS's certificate callback has no argument of ours: the credentials are
// the process's (one HTTP endpoint per process).
static pthread_mutex_t credentials_lock = PTHREAD_MUTEX_INITIALIZER;
static struct credentials *current_credentials;

int chs_pick_certificate(
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

int chs_tls_ready(void) {
    pthread_mutex_lock(&credentials_lock);
    int ready = current_credentials != NULL;
    pthread_mutex_unlock(&credentials_lock);
    return ready;
}
