/* libnexttest.so: a library that defines time() itself and looks up "the next time()" with
 * dlsym(RTLD_NEXT), as interposing libraries do. Linked into ip_next. */
#include <dlfcn.h>
#include <stdint.h>
#include <time.h>

time_t time(time_t *t) {
    if (t != NULL) *t = 42;
    return 42;
}

/* Not a tail call: glibc resolves RTLD_NEXT from dlsym's return address, which a sibling call
 * would move into the caller of next_time. */
void *next_time(void) {
    void *volatile next = dlsym(RTLD_NEXT, "time");
    return next;
}

void *own_time(void) {
    return (void *)(uintptr_t)&time;
}
