/* The fault guard: kernel bodies and copies run on executor threads under a SIGSEGV/SIGBUS
 * handler. A fault there is the device's illegal access: the handler jumps back to the executor,
 * which records the address and makes the error sticky. A fault anywhere else is the program's
 * own and goes to whatever handler was installed before (ASan's, or the default). */
#include "sim.h"

#include <setjmp.h>
#include <signal.h>
#include <string.h>

static _Thread_local sigjmp_buf *guard_jmp;
static _Thread_local volatile uint64_t guard_addr;
static struct sigaction previous_segv, previous_bus;

static void chain(int sig, siginfo_t *info, void *uctx) {
    struct sigaction *prev = sig == SIGBUS ? &previous_bus : &previous_segv;
    if (prev->sa_flags & SA_SIGINFO) {
        if (prev->sa_sigaction != NULL) {
            prev->sa_sigaction(sig, info, uctx);
            return;
        }
    } else if (prev->sa_handler != SIG_IGN && prev->sa_handler != SIG_DFL) {
        prev->sa_handler(sig);
        return;
    }
    /* Default action: restore it and return, so the faulting instruction re-faults fatally. */
    signal(sig, SIG_DFL);
}

static void on_fault(int sig, siginfo_t *info, void *uctx) {
    sigjmp_buf *jb = guard_jmp;
    if (jb != NULL) {
        guard_jmp = NULL;
        guard_addr = (uint64_t)(uintptr_t)info->si_addr;
        siglongjmp(*jb, 1);
    }
    chain(sig, info, uctx);
}

void sim_fault_install(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_fault;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, &previous_segv);
    sigaction(SIGBUS, &sa, &previous_bus);
}

bool sim_guarded_run(void (*fn)(void *), void *arg, uint64_t *fault_addr) {
    sigjmp_buf jb;
    if (sigsetjmp(jb, 1) != 0) {
        *fault_addr = guard_addr;
        return false;
    }
    guard_jmp = &jb;
    fn(arg);
    guard_jmp = NULL;
    return true;
}
