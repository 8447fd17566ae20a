#define _GNU_SOURCE
#include <fcntl.h>

#include "CLinux.h"

int clinux_sync_file_range(int fd, int64_t offset, int64_t nbytes, unsigned int flags) {
    return sync_file_range(fd, (off64_t)offset, (off64_t)nbytes, flags);
}
