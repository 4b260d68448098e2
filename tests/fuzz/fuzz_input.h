/* What the fuzz targets share: the input as a file (the readers take paths), in memory only (a
 * memfd: the fuzzer writes nothing to disk), and as a NUL-terminated string. */
#ifndef HOSTOFF_FUZZ_INPUT_H
#define HOSTOFF_FUZZ_INPUT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* The input's bytes as the file /proc/self/fd/N (one memfd, rewritten for each input). */
static inline const char *fuzz_as_file(const uint8_t *data, size_t size) {
    static int fd = -1;
    static char path[64];
    if (fd < 0) {
        fd = memfd_create("hostoff-fuzz", MFD_CLOEXEC);
        if (fd < 0) abort();
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    }
    if (ftruncate(fd, 0) != 0) abort();
    size_t done = 0;
    while (done < size) {
        ssize_t w = pwrite(fd, data + done, size - done, (off_t)done);
        if (w <= 0) abort();
        done += (size_t)w;
    }
    return path;
}

/* The input as a C string (a copy, cut at the first NUL); free() it. */
static inline char *fuzz_as_text(const uint8_t *data, size_t size) {
    char *s = malloc(size + 1);
    if (s == NULL) abort();
    memcpy(s, data, size);
    s[size] = '\0';
    return s;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#endif
