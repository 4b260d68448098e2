/* The job's end by a termination signal: what atexit does at a normal exit (the report, the
 * end of the trace), done as well when SIGTERM or SIGINT ends the process (a Slurm time limit,
 * an interrupt), without doing anything unsafe inside a signal handler. */
#ifndef HOSTOFF_SRC_ENDING_H
#define HOSTOFF_SRC_ENDING_H

/* Adds fn to what runs when SIGTERM or SIGINT arrives (in the order added), and on the first
 * call takes over those of the two signals whose disposition is still the default (an
 * application's own handler is never replaced; one installed later replaces ours, and its exit
 * runs atexit as usual). The handler only writes the signal's number to a pipe; a thread that
 * waits on it runs the functions, then restores the default disposition and raises the signal
 * again, so the process still ends by it (exit status 128+n). Also register fn with atexit for
 * the normal exit: after a signal, atexit handlers do not run, so nothing runs twice. */
void ho_ending_add(void (*fn)(void));

#endif
