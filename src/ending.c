/* Ending by a signal (ending.h). Async-signal safety: the handler calls write(2) on a
 * non-blocking pipe and nothing else; the work (locks, stdio, driver calls) runs on an ordinary
 * thread that waits on the pipe with every signal blocked. */
#include "ending.h"

#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <stdbool.h>
#include <unistd.h>

#define MAX_FNS 4

static const int SIGS[] = {SIGTERM, SIGINT};
#define NSIGS (sizeof SIGS / sizeof SIGS[0])

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static void (*fns[MAX_FNS])(void);
static int nfns;
static int fds[2] = {-1, -1};
static bool owned[NSIGS];
static bool started;

static void on_signal(int sig) {
    int saved = errno;
    unsigned char b = (unsigned char)sig;
    ssize_t w = write(fds[1], &b, 1); /* full pipe: a signal is already on its way */
    (void)w;
    errno = saved;
}

static void *watch(void *arg) {
    (void)arg;
    for (;;) {
        unsigned char b;
        ssize_t r = read(fds[0], &b, 1);
        if (r < 0 && errno == EINTR) continue;
        if (r != 1) return NULL;
        int sig = b;
        ho_log(HO_LOG_INFO, "signal %d: writing the trace and the report before the process ends",
               sig);
        pthread_mutex_lock(&lock);
        int n = nfns;
        void (*run[MAX_FNS])(void);
        for (int i = 0; i < n; i++)
            run[i] = fns[i];
        pthread_mutex_unlock(&lock);
        for (int i = 0; i < n; i++)
            run[i]();
        /* End as the signal would have ended the process. */
        struct sigaction dfl = {.sa_handler = SIG_DFL};
        sigemptyset(&dfl.sa_mask);
        sigaction(sig, &dfl, NULL);
        sigset_t one;
        sigemptyset(&one);
        sigaddset(&one, sig);
        pthread_sigmask(SIG_UNBLOCK, &one, NULL);
        raise(sig);
        _exit(128 + sig);
    }
}

/* A fork child has no watcher thread: give the signals back their default action there. */
static void fork_child(void) {
    for (size_t i = 0; i < NSIGS; i++) {
        if (!owned[i]) continue;
        struct sigaction cur;
        if (sigaction(SIGS[i], NULL, &cur) == 0 && cur.sa_handler == on_signal) {
            struct sigaction dfl = {.sa_handler = SIG_DFL};
            sigemptyset(&dfl.sa_mask);
            sigaction(SIGS[i], &dfl, NULL);
        }
        owned[i] = false;
    }
    started = false;
    nfns = 0;
    pthread_mutex_init(&lock, NULL);
}

static void start(void) {
    if (pipe(fds) != 0) return;
    for (int i = 0; i < 2; i++)
        fcntl(fds[i], F_SETFD, FD_CLOEXEC);
    fcntl(fds[1], F_SETFL, fcntl(fds[1], F_GETFL) | O_NONBLOCK);
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    pthread_t th;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    bool ok = pthread_create(&th, &attr, watch, NULL) == 0;
    pthread_attr_destroy(&attr);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (!ok) {
        close(fds[0]);
        close(fds[1]);
        fds[0] = fds[1] = -1;
        ho_log(HO_LOG_WARN, "cannot start a thread: a report is written at exit, not on SIGTERM");
        return;
    }
    for (size_t i = 0; i < NSIGS; i++) {
        struct sigaction cur, ours = {.sa_handler = on_signal, .sa_flags = SA_RESTART};
        sigemptyset(&ours.sa_mask);
        if (sigaction(SIGS[i], NULL, &cur) != 0 || cur.sa_handler != SIG_DFL ||
            (cur.sa_flags & SA_SIGINFO))
            continue; /* the application's own handler, or ignored: left alone */
        owned[i] = sigaction(SIGS[i], &ours, NULL) == 0;
    }
    pthread_atfork(NULL, NULL, fork_child);
    started = true;
}

void ho_ending_add(void (*fn)(void)) {
    atexit(fn);
    pthread_mutex_lock(&lock);
    if (nfns < MAX_FNS) fns[nfns++] = fn;
    if (!started) start();
    pthread_mutex_unlock(&lock);
}
