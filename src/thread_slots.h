/* Per-thread slots: each thread that needs one gets a slot of a list for itself, and hands it
 * back when it exits, to the next thread that needs one. Slots are never freed, so another
 * thread may read any slot of the list at any time without a lock (the engine's issue slots,
 * the launch path's use counters). A list's slots are structures that begin with a
 * struct ho_thread_slot. */
#ifndef HOSTOFF_THREAD_SLOTS_H
#define HOSTOFF_THREAD_SLOTS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

struct ho_thread_slot {
    struct ho_thread_slot *next;      /* every slot of its list, newest first */
    struct ho_thread_slot *held_next; /* the next slot its thread holds (of another list) */
    struct ho_thread_slot **cache;    /* its thread's pointer to it, cleared as the thread exits */
    _Atomic bool free;                /* its thread has exited */
};

struct ho_thread_slots {
    _Atomic(struct ho_thread_slot *) all;
    size_t size; /* bytes of a slot: the structure that begins with struct ho_thread_slot */
};
#define HO_THREAD_SLOTS(type)                                                                      \
    { NULL, sizeof(type) }

/* This thread's slot of list l, kept in *cache (a _Thread_local of the caller: check it first,
 * this is the slow path): one an exited thread left, as it left it, else a new zeroed one.
 * NULL when out of memory, or when a thread's exit cannot be seen (no pthread key could be
 * made: a slot would never come back; one line says so): the caller then does without. */
struct ho_thread_slot *ho_thread_slot_take(struct ho_thread_slots *l,
                                           struct ho_thread_slot **cache);

/* The first slot of l (then ->next), held or free. Sequentially consistent: against a slot
 * published by a thread that then announces work on it (seq_cst too), a reader that changed
 * a state before this load either sees the slot or the thread sees the new state. */
static inline struct ho_thread_slot *ho_thread_slots_first(struct ho_thread_slots *l) {
    return atomic_load(&l->all);
}

/* A fork child: the parent's slots mean nothing there (they are left behind). */
void ho_thread_slots_forget(struct ho_thread_slots *l);

#endif
