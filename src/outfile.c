/* Safe creation of output files (outfile.h). */
#include "outfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h> /* rename() only: no FILE here */
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static int fail(struct ho_outfile *o, const char **why, const char *what, int err) {
    o->err = err;
    if (why != NULL) *why = what;
    return -1;
}

/* 64 unpredictable bits: the kernel's generator, else (very old kernels, seccomp filters) a
 * mix of the clock, the pid and an address, which is at least not guessable from the pid. */
static uint64_t random_bits(void) {
    uint64_t v = 0;
    if (getrandom(&v, sizeof v, GRND_NONBLOCK) == (ssize_t)sizeof v) return v;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    static uint64_t counter;
    v = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 30) ^ ((uint64_t)getpid() << 17) ^
        (uint64_t)(uintptr_t)&v ^ ++counter;
    /* splitmix64's finaliser */
    v = (v ^ (v >> 30)) * 0xbf58476d1ce4e5b9ull;
    v = (v ^ (v >> 27)) * 0x94d049bb133111ebull;
    return v ^ (v >> 31);
}

/* tmp := DIR/.BASE.hostoff-XXXXXXXXXXXXXXXX for path DIR/BASE. */
static bool temp_name(const char *path, char *tmp, size_t cap) {
    const char *slash = strrchr(path, '/');
    size_t dirlen = slash != NULL ? (size_t)(slash - path) + 1 : 0;
    const char *base = path + dirlen;
    size_t baselen = strlen(base);
    static const char mid[] = ".hostoff-";
    if (dirlen + 1 + baselen + sizeof mid - 1 + 16 + 1 > cap) return false;
    char *p = tmp;
    memcpy(p, path, dirlen);
    p += dirlen;
    *p++ = '.';
    memcpy(p, base, baselen);
    p += baselen;
    memcpy(p, mid, sizeof mid - 1);
    p += sizeof mid - 1;
    uint64_t r = random_bits();
    for (int i = 0; i < 16; i++, r >>= 4)
        *p++ = "0123456789abcdef"[r & 15];
    *p = '\0';
    return true;
}

/* A special file, written where it is: the same file that was examined, and still special. */
static int open_in_place(struct ho_outfile *o, const struct stat *seen, int nofollow,
                         const char **why) {
    int fd = open(o->path, O_WRONLY | O_NOCTTY | O_CLOEXEC | O_NONBLOCK | nofollow);
    if (fd < 0) {
        if (errno == ENXIO && S_ISFIFO(seen->st_mode))
            return fail(o, why, "is a FIFO nobody reads", 0);
        return fail(o, why, "cannot be opened", errno);
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || st.st_dev != seen->st_dev || st.st_ino != seen->st_ino ||
        !(S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode))) {
        close(fd);
        return fail(o, why, "changed while it was opened", 0);
    }
    /* Blocking writes from here on: a full pipe waits, as any writer's would. */
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0) fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    o->fd = fd;
    o->in_place = true;
    o->tmp[0] = '\0';
    return 0;
}

int ho_outfile_open(struct ho_outfile *o, const char *path, const char **why) {
    o->fd = -1;
    o->in_place = false;
    o->published = false;
    o->err = 0;
    o->tmp[0] = '\0';
    size_t len = path != NULL ? strlen(path) : 0;
    if (len == 0) return fail(o, why, "is empty", 0);
    if (len >= sizeof o->path) return fail(o, why, "is too long", 0);
    memcpy(o->path, path, len + 1);
    if (path[len - 1] == '/') return fail(o, why, "names a directory", 0);

    struct stat st;
    if (lstat(path, &st) == 0) {
        if (S_ISLNK(st.st_mode)) {
            /* /dev/stdout and the like: through the link only to a character device or a FIFO;
             * a link to a regular file may have been planted to make us overwrite it. */
            struct stat target;
            if (stat(path, &target) != 0 || S_ISREG(target.st_mode))
                return fail(o, why,
                            "is a symbolic link to a regular file or to nothing (hostoff does not "
                            "write through such links; give the target's path)",
                            0);
            if (!S_ISCHR(target.st_mode) && !S_ISFIFO(target.st_mode))
                return fail(o, why, "is a symbolic link to something that is not a file", 0);
            return open_in_place(o, &target, 0, why);
        }
        if (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode))
            return open_in_place(o, &st, O_NOFOLLOW, why);
        if (S_ISDIR(st.st_mode)) return fail(o, why, "is a directory", 0);
        if (S_ISBLK(st.st_mode)) return fail(o, why, "is a block device", 0);
        if (!S_ISREG(st.st_mode)) return fail(o, why, "is not a regular file", 0);
    } else if (errno != ENOENT) {
        return fail(o, why, "cannot be examined", errno);
    }
    /* A regular file or nothing: a temporary of our own beside it. */
    for (int attempt = 0; attempt < 64; attempt++) {
        if (!temp_name(path, o->tmp, sizeof o->tmp)) return fail(o, why, "is too long", 0);
        int fd =
            open(o->tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY, 0644);
        if (fd >= 0) {
            o->fd = fd;
            return 0;
        }
        if (errno != EEXIST) {
            o->tmp[0] = '\0';
            return fail(o, why, "cannot be created (in its directory)", errno);
        }
    }
    o->tmp[0] = '\0';
    return fail(o, why, "cannot be created: no unused temporary name", EEXIST);
}

int ho_outfile_publish(struct ho_outfile *o, const char **why) {
    if (o->in_place || o->published) return 0;
    if (o->tmp[0] == '\0') return fail(o, why, "was not opened", 0);
    struct stat st;
    /* Only a regular file (or a link, itself replaced, never followed) is replaced. */
    if (lstat(o->path, &st) == 0 && !S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode)) {
        unlink(o->tmp);
        o->tmp[0] = '\0';
        return fail(o, why, "became something other than a regular file; left as it is", 0);
    }
    if (rename(o->tmp, o->path) != 0) {
        int e = errno;
        unlink(o->tmp);
        o->tmp[0] = '\0';
        return fail(o, why, "cannot be replaced", e);
    }
    o->published = true;
    return 0;
}

int ho_outfile_commit(struct ho_outfile *o, const char **why) {
    if (o->fd >= 0) {
        int rc = close(o->fd);
        o->fd = -1;
        if (rc != 0) {
            int e = errno;
            ho_outfile_abort(o);
            return fail(o, why, "cannot be written", e);
        }
    }
    if (ho_outfile_publish(o, why) != 0) return -1;
    return 0;
}

void ho_outfile_abort(struct ho_outfile *o) {
    if (o->fd >= 0) close(o->fd);
    o->fd = -1;
    /* Our own temporary only, by the name we created it under with O_EXCL. */
    if (!o->in_place && !o->published && o->tmp[0] != '\0') unlink(o->tmp);
    o->tmp[0] = '\0';
}

bool ho_outfile_in_use(const char *path) {
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) return false;
    struct stat st;
    bool busy = false;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode))
        busy = flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK;
    close(fd); /* releases our shared lock, if taken; never the owner's */
    return busy;
}

void ho_outfile_lock(struct ho_outfile *o) {
    if (o->fd >= 0 && !o->in_place) (void)flock(o->fd, LOCK_EX | LOCK_NB);
}
