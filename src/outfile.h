/* Creating the files hostoff writes (reports, traces, pages), safely, whoever runs it and wherever
 * the path points: the library often runs as root on shared machines, and the path comes from the
 * environment. One helper for every writer, in the library and in the hostoff command:
 *
 *  - A regular file (or nothing) at the path: the content goes to a new temporary in the same
 *    directory, created with O_EXCL | O_NOFOLLOW under an unpredictable name
 *    (".NAME.hostoff-<16 hex digits>"), then renamed over the path. Nothing is ever opened
 *    through a symbolic link another user planted, and no existing file is truncated in place
 *    (a hard link to someone else's file keeps its content: the name is replaced, not the file).
 *  - A character device or a FIFO at the path (/dev/null, /dev/full, a terminal, a pipe, and
 *    /dev/stdout, a link to one of those): written in place, never replaced or removed. A FIFO
 *    nobody reads is refused rather than waited on.
 *  - A symbolic link to anything else (a regular file, nothing), a directory, a block device or a
 *    socket: refused, with a phrase saying which.
 *  - On failure only the temporary this process created is removed; nothing else ever is.
 *
 * No allocation and no stdio: usable inside a preloaded process at exit or at its first traced
 * call. Not thread-safe per object (each writer owns its struct). */
#ifndef HOSTOFF_OUTFILE_H
#define HOSTOFF_OUTFILE_H

#include <stdbool.h>
#include <stddef.h>

#define HO_OUTFILE_PATH 4096

struct ho_outfile {
    int fd;        /* where to write; -1 once closed */
    bool in_place; /* a special file, written where it is */
    bool published;
    int err; /* errno of the last failure, 0 when none applies */
    char path[HO_OUTFILE_PATH];
    char tmp[HO_OUTFILE_PATH + 32]; /* the temporary ("" when in place) */
};

/* Opens path for writing; 0, or -1 with a phrase in *why (and o->err). Nothing is visible at
 * path until published (except for a special file, written at once). */
int ho_outfile_open(struct ho_outfile *o, const char *path, const char **why);
/* Renames the temporary over path now, keeping fd open (a trace, streamed to its final name).
 * Refused when something other than a regular file or a link has appeared at path since. */
int ho_outfile_publish(struct ho_outfile *o, const char **why);
/* Closes fd (unless the caller already did and set fd to -1) and publishes; on any failure the
 * temporary is removed. 0 or -1 with *why. */
int ho_outfile_commit(struct ho_outfile *o, const char **why);
/* Closes fd; removes the temporary if it was not published. Never removes anything else. */
void ho_outfile_abort(struct ho_outfile *o);

/* Whether another live process holds path open as its own output (ho_outfile_lock). */
bool ho_outfile_in_use(const char *path);
/* Marks o's file as this process's output for as long as fd stays open (an advisory flock, the
 * mark ho_outfile_in_use looks for). */
void ho_outfile_lock(struct ho_outfile *o);

#endif
