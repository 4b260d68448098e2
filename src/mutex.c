/* The checked mutex's thread numbers and failure report (mutex.h). */
#include "mutex.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* The address of a thread-local byte: distinct for every live thread. */
static _Thread_local char self_tag;

uintptr_t ho_mutex_self(void) {
    return (uintptr_t)&self_tag;
}

_Noreturn void ho_check_failed(const char *file, int line, const char *what) {
    char buf[512];
    int n = snprintf(buf, sizeof buf, "hostoff: check failed at %s:%d: %s\n", file, line, what);
    if (n > 0) {
        ssize_t w = write(STDERR_FILENO, buf, (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1);
        (void)w; /* aborting anyway */
    }
    abort();
}
