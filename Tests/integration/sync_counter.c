/* An LD_PRELOAD shim for the durability tests: every fsync and fdatasync the
 * service makes is appended, after it returns, to the file named by
 * SYNC_COUNTER_LOG as "call path result" (the path read from /proc), so a
 * test can check that each acknowledged commit was preceded by a sync of the
 * WAL. Built by the test itself with the machine's C compiler. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static void record(const char *call, int fd, int result) {
    const char *log = getenv("SYNC_COUNTER_LOG");
    if (log == NULL) return;
    char link[64], path[4096], line[4200];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, path, sizeof path - 1);
    path[n < 0 ? 0 : n] = '\0';
    int length = snprintf(line, sizeof line, "%s %s %d\n", call, path, result);
    int out = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (out < 0) return;
    ssize_t written = write(out, line, (size_t)length);
    (void)written;
    close(out);
}

#define INTERCEPT(name)                                             \
    int name(int fd) {                                              \
        static int (*real)(int);                                    \
        if (real == NULL) real = (int (*)(int))dlsym(RTLD_NEXT, #name); \
        int result = real(fd);                                      \
        int saved = errno;                                          \
        record(#name, fd, result);                                  \
        errno = saved;                                              \
        return result;                                              \
    }

INTERCEPT(fsync)
INTERCEPT(fdatasync)
