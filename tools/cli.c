/* Helpers shared by the hostoff subcommands (see cli.h). */
#include "cli.h"

#include "outfile.h"
#include "units.h"

#include <errno.h>
#include <limits.h>
#include <link.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

void cli_error(const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "hostoff: %s\n", msg);
}

bool cli_parse_uint(const char *text, bool suffixes, uint64_t *out) {
    return cli_parse_uint_why(text, suffixes, out, NULL);
}

bool cli_parse_uint_why(const char *text, bool suffixes, uint64_t *out, const char **why) {
    return suffixes ? ho_units_size(text, out, why) : ho_units_count(text, out, why);
}

void cli_format_bytes(uint64_t bytes, char *buf, size_t cap) {
    static const char *const units[] = {"B", "kB", "MB", "GB", "TB"};
    double v = (double)bytes;
    int u = 0;
    while (v >= 1000 && u < 4) {
        v /= 1000;
        u++;
    }
    snprintf(buf, cap, u == 0 ? "%.0f %s" : "%.2f %s", v, units[u]);
}

void cli_progress_start(struct cli_progress *p, const char *label) {
    p->on = isatty(STDERR_FILENO) == 1;
    p->label = label;
    p->shown = -1;
}

void cli_progress(struct cli_progress *p, uint64_t done, uint64_t total) {
    if (!p->on || total == 0) return;
    int pct = (int)(done * 100 / total);
    if (pct == p->shown) return;
    p->shown = pct;
    fprintf(stderr, "\r%s %3d%%", p->label, pct);
    fflush(stderr);
}

void cli_progress_end(struct cli_progress *p) {
    if (p->on && p->shown >= 0) fprintf(stderr, "\r%*s\r", (int)strlen(p->label) + 6, "");
    p->shown = -1;
}

static bool exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

bool cli_locate(const char *what, const char *env, const char *const *candidates, char *out,
                size_t cap) {
    const char *v = getenv(env);
    if (v != NULL && *v != '\0') {
        if (!exists(v)) {
            cli_error("%s=%s: no such file or directory", env, v);
            return false;
        }
        snprintf(out, cap, "%s", v);
        return true;
    }
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) {
        cli_error("cannot find the hostoff binary's directory to look for %s; set %s", what, env);
        return false;
    }
    self[n] = '\0';
    char *slash = strrchr(self, '/');
    if (slash != NULL) *slash = '\0';
    char tried[2048] = "";
    for (const char *const *c = candidates; *c != NULL; c++) {
        char path[PATH_MAX + 256];
        if (**c == '/')
            snprintf(path, sizeof path, "%s", *c); /* an installed location */
        else
            snprintf(path, sizeof path, "%s/%s", self, *c);
        if (exists(path)) {
            char *real = realpath(path, NULL);
            snprintf(out, cap, "%s", real != NULL ? real : path);
            free(real);
            return true;
        }
        size_t len = strlen(tried), add = strlen(path);
        if (len + add + 3 < sizeof tried) {
            if (len > 0) memcpy(tried + len, ", ", 2), len += 2;
            memcpy(tried + len, path, add + 1);
        }
    }
    cli_error("cannot find %s (tried %s); set %s", what, tried, env);
    return false;
}

const char *const cli_lib_candidates[] = {"../interpose/libhostoff.so",
                                          HOSTOFF_LIBDIR "/libhostoff.so", "../lib/libhostoff.so",
                                          "../lib64/libhostoff.so", NULL};

static int find_sanitizer(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size;
    const char *slash = strrchr(info->dlpi_name, '/');
    const char *base = slash != NULL ? slash + 1 : info->dlpi_name;
    if (strncmp(base, "libasan.so", 10) == 0 || strncmp(base, "libtsan.so", 10) == 0) {
        snprintf(data, PATH_MAX, "%s:", info->dlpi_name);
        return 1;
    }
    return 0;
}

void cli_sanitizer_preload(char *out) {
    out[0] = '\0';
    dl_iterate_phdr(find_sanitizer, out);
}

char *cli_read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (f == NULL) return NULL;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    size_t r;
    while (buf != NULL && (r = fread(buf + n, 1, cap - n - 1, f)) > 0) {
        n += r;
        if (n + 1 == cap) {
            char *b2 = realloc(buf, cap *= 2);
            if (b2 == NULL) free(buf);
            buf = b2;
        }
    }
    bool err = ferror(f) != 0;
    fclose(f);
    if (buf == NULL || err) {
        free(buf);
        return NULL;
    }
    buf[n] = '\0';
    if (len != NULL) *len = n;
    return buf;
}

FILE *cli_create(struct ho_outfile *o, const char *path, const char *who) {
    const char *why = NULL;
    FILE *f = NULL;
    if (ho_outfile_open(o, path, &why) != 0 || (f = fdopen(o->fd, "w")) == NULL) {
        int err = why != NULL ? o->err : errno;
        cli_error("%s: %s %s%s%s", who, path, why != NULL ? why : "cannot be written",
                  err ? ": " : "", err ? strerror(err) : "");
        ho_outfile_abort(o);
        return NULL;
    }
    return f;
}

bool cli_finish(struct ho_outfile *o, FILE *f, bool ok, const char *who) {
    if (fflush(f) != 0 || ferror(f)) ok = false;
    int err = errno;
    o->fd = -1; /* fclose closes it */
    if (fclose(f) != 0) ok = false;
    if (!ok) {
        ho_outfile_abort(o);
        cli_error("%s: cannot write %s: %s", who, o->path, strerror(err ? err : EIO));
        return false;
    }
    const char *why = NULL;
    if (ho_outfile_commit(o, &why) != 0) {
        cli_error("%s: %s %s%s%s", who, o->path, why, o->err ? ": " : "",
                  o->err ? strerror(o->err) : "");
        return false;
    }
    return true;
}

bool cli_copy_file(const char *dir, const char *name, const char *dest) {
    char src[PATH_MAX];
    snprintf(src, sizeof src, "%s/%s", dir, name);
    size_t len = 0;
    char *data = cli_read_file(src, &len);
    if (data == NULL) {
        cli_error("cannot write %s: %s missing", dest, src);
        return false;
    }
    struct ho_outfile out;
    FILE *f = cli_create(&out, dest, "hostoff");
    bool ok = f != NULL && cli_finish(&out, f, fwrite(data, 1, len, f) == len, "hostoff");
    free(data);
    return ok;
}

/* The rest of fd into a malloc'd, NUL-terminated buffer (NULL when memory ran out). */
static char *read_all(int fd) {
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    while (buf != NULL) {
        ssize_t r = read(fd, buf + len, cap - len - 1);
        if (r == 0) break;
        if (r < 0) {
            if (errno == EINTR) continue;
            break;
        }
        len += (size_t)r;
        if (len + 1 == cap) {
            char *b2 = realloc(buf, cap *= 2);
            if (b2 == NULL) free(buf);
            buf = b2;
        }
    }
    if (buf != NULL) buf[len] = '\0';
    return buf;
}

int cli_run_child(const char *who, const char *path, char *const *args, char *const *env,
                  char **out) {
    int fds[2] = {-1, -1};
    if (out != NULL && pipe(fds) != 0) return -1;
    fflush(NULL); /* what we buffered must not be written twice */
    pid_t pid = fork();
    if (pid < 0) {
        if (out != NULL) {
            close(fds[0]);
            close(fds[1]);
        }
        return -1;
    }
    if (pid == 0) {
        if (out != NULL) {
            dup2(fds[1], STDOUT_FILENO);
            close(fds[0]);
            close(fds[1]);
        }
        if (env != NULL)
            execve(path, args, env);
        else
            execv(path, args);
        fprintf(stderr, "hostoff: %s: cannot run %s: %s\n", who, path, strerror(errno));
        _exit(127);
    }
    if (out != NULL) {
        close(fds[1]);
        *out = read_all(fds[0]);
        close(fds[0]);
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (WIFEXITED(status)) return WEXITSTATUS(status);
    return 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}
