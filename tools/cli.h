/* What the hostoff command's subcommands share: their entry points (the table is in hostoff.c;
 * one file per subcommand), messages, number parsing, progress on a terminal, and finding the
 * build's libhostoff.so, simulated driver and helper programs next to the hostoff binary.
 *
 * Exit status of every subcommand: 0 done, 1 the run failed, 2 bad usage or bad input. */
#ifndef HOSTOFF_TOOLS_CLI_H
#define HOSTOFF_TOOLS_CLI_H

#include <stdbool.h>
#include <stdio.h>
#include <stddef.h>
#include <stdint.h>

int cmd_gentrace(int argc, char **argv);
int cmd_replay(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_report(int argc, char **argv);
int cmd_demo(int argc, char **argv);

/* "hostoff: <message>" on stderr. */
void cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* A whole number, with an optional K, M, G or T suffix (powers of 1024) when `suffixes`. */
bool cli_parse_uint(const char *text, bool suffixes, uint64_t *out);

/* Creating an output file the library's way (src/outfile.h: a temporary renamed over a regular
 * file, a special file written in place, links to files refused, nothing else removed).
 * cli_create returns a FILE, or NULL after one line "hostoff: WHO: PATH ...". cli_finish closes
 * it and publishes it when ok, else removes only the temporary; false (after one line) when the
 * file could not be completed. */
struct ho_outfile;
FILE *cli_create(struct ho_outfile *o, const char *path, const char *who);
bool cli_finish(struct ho_outfile *o, FILE *f, bool ok, const char *who);
/* The same, saying what was wrong (src/units.h's phrases); why may be NULL. */
bool cli_parse_uint_why(const char *text, bool suffixes, uint64_t *out, const char **why);
/* "12.3 GB" (powers of 1000, as link and memory figures are quoted). */
void cli_format_bytes(uint64_t bytes, char *buf, size_t cap);

/* Progress on stderr, only when stderr is a terminal; at most one update a percent. */
struct cli_progress {
    bool on;
    const char *label;
    int shown; /* last percentage shown, -1: none */
};
void cli_progress_start(struct cli_progress *p, const char *label);
void cli_progress(struct cli_progress *p, uint64_t done, uint64_t total);
void cli_progress_end(struct cli_progress *p);

/* Finds a file of the build: $ENV when set (it must exist), else the first of `candidates`
 * (paths relative to the directory of the hostoff binary) that exists. False, with a message
 * naming what was tried and the variable that overrides it, when none does. */
bool cli_locate(const char *what, const char *env, const char *const *candidates, char *out,
                size_t cap);

/* The installed layout, relative to the hostoff binary (or absolute): set by tools/meson.build
 * from the configured bindir, libdir and libexecdir. */
#ifndef HOSTOFF_LIBDIR
#define HOSTOFF_LIBDIR "../lib"
#endif
#ifndef HOSTOFF_LIBEXECDIR
#define HOSTOFF_LIBEXECDIR "../libexec/hostoff"
#endif

/* Where libhostoff.so may be, relative to the hostoff binary (build and installed layouts); the
 * variable that overrides the search is HOSTOFF_LIB. */
extern const char *const cli_lib_candidates[];
/* The sanitizer runtime this process runs with followed by ':' (an ASan or TSan build), or "":
 * a library built with one can only be preloaded behind its runtime. `out` holds PATH_MAX. */
void cli_sanitizer_preload(char *out);

/* Runs the program at `path` with `args` (args[0] its name) and `env` (NULL: this process's) and
 * waits for it. With `out`, its stdout is read to the end into *out (NUL-terminated, malloc'd;
 * NULL when memory ran out); without, it shares ours. Returns its exit status, 128 + the signal
 * that ended it, or -1 when it could not be started; one it cannot execute exits 127 after
 * "hostoff: WHO: cannot run PATH: why" on stderr. */
int cli_run_child(const char *who, const char *path, char *const *args, char *const *env,
                  char **out);

/* The whole file (NUL-terminated; *len without it), or NULL. Free it. */
char *cli_read_file(const char *path, size_t *len);
/* Copies dir/name to dest (through a temporary file and a rename); false with a message. */
bool cli_copy_file(const char *dir, const char *name, const char *dest);

#endif
