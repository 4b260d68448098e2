/* Per-thread slots (thread_slots.h). One pthread key for every list: its value is the chain of
 * slots the thread holds, and its destructor hands them all back when the thread exits. */
#include "thread_slots.h"

#include "log.h"

#include <pthread.h>
#include <stdlib.h>

static pthread_key_t held_key;
static bool held_key_ok;
static pthread_once_t held_key_once = PTHREAD_ONCE_INIT;

/* The thread is exiting: each slot it holds goes back, and its pointer to it is cleared, so code
 * that still runs on this thread (another key's destructor calling the driver) takes a new one. */
static void release_held(void *p) {
    struct ho_thread_slot *s = p;
    while (s != NULL) {
        struct ho_thread_slot *next = s->held_next; /* before the slot can be taken again */
        *s->cache = NULL;
        atomic_store(&s->free, true);
        s = next;
    }
}

static void held_key_make(void) {
    held_key_ok = pthread_key_create(&held_key, release_held) == 0;
    if (!held_key_ok)
        ho_log(HO_LOG_WARN, "no pthread key left for per-thread state: every thread takes the "
                            "slower shared path");
}

struct ho_thread_slot *ho_thread_slot_take(struct ho_thread_slots *l,
                                           struct ho_thread_slot **cache) {
    pthread_once(&held_key_once, held_key_make);
    if (!held_key_ok) return NULL;
    struct ho_thread_slot *s;
    for (s = atomic_load(&l->all); s != NULL; s = s->next) {
        bool was_free = true;
        if (atomic_compare_exchange_strong(&s->free, &was_free, false)) break;
    }
    if (s == NULL) {
        s = calloc(1, l->size);
        if (s == NULL) return NULL;
        s->next = atomic_load(&l->all);
        while (!atomic_compare_exchange_weak(&l->all, &s->next, s)) {
        }
    }
    s->cache = cache;
    s->held_next = pthread_getspecific(held_key);
    if (pthread_setspecific(held_key, s) != 0) {
        atomic_store(&s->free, true); /* out of memory for the key's value: give it back */
        return NULL;
    }
    *cache = s;
    return s;
}

void ho_thread_slots_forget(struct ho_thread_slots *l) {
    atomic_store(&l->all, NULL);
}
