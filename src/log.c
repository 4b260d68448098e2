#include "log.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <unistd.h>

static _Atomic int current_level = HO_LOG_WARN;
static _Thread_local bool in_log;

void ho_log_set_level(enum ho_log_level level) {
    atomic_store_explicit(&current_level, (int)level, memory_order_relaxed);
}

bool ho_log_enabled(enum ho_log_level level) {
    return (int)level <= atomic_load_explicit(&current_level, memory_order_relaxed);
}

void ho_log(enum ho_log_level level, const char *fmt, ...) {
    if (!ho_log_enabled(level) || in_log) return;
    in_log = true;
    char buf[1024];
    int n = snprintf(buf, sizeof buf, "hostoff: ");
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(buf + n, sizeof buf - (size_t)n - 1, fmt, ap);
    va_end(ap);
    size_t len = (size_t)n + (m < 0 ? 0 : (size_t)m);
    if (len > sizeof buf - 2) len = sizeof buf - 2;
    buf[len++] = '\n';
    ssize_t w = write(STDERR_FILENO, buf, len);
    (void)w; /* nowhere to report a failing stderr */
    in_log = false;
}
