#define _GNU_SOURCE
#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "CLinux.h"

int clinux_sync_file_range(int fd, int64_t offset, int64_t nbytes, unsigned int flags) {
    return sync_file_range(fd, (off64_t)offset, (off64_t)nbytes, flags);
}

// who = IOPRIO_WHO_PROCESS (1) with id 0: the calling thread alone (an I/O
// context is per thread on Linux). Glibc has no wrapper for either call.
int clinux_ioprio_get_thread(void) {
    return (int)syscall(SYS_ioprio_get, 1, 0);
}

int clinux_ioprio_set_thread(int value) {
    return (int)syscall(SYS_ioprio_set, 1, 0, value);
}

int64_t clinux_copy_file_range(int in, int64_t *in_offset, int out, int64_t *out_offset, int64_t nbytes) {
    off64_t from = *in_offset, to = *out_offset;
    ssize_t copied = copy_file_range(in, &from, out, &to, (size_t)nbytes, 0);
    *in_offset = from;
    *out_offset = to;
    return copied;
}
