/* Per-thread slots (src/thread_slots.h) and the checked mutex (src/mutex.h): a thread keeps its
 * slot until it exits, then the next thread gets that same slot back (no new one is made) with
 * its contents as they were left, while every slot stays readable from the list; a fork child's
 * forgetting empties the list. The mutex knows its holder: held on the locking thread, not on
 * another, not after unlocking. Built with HO_CHECKS=1 whatever the build type. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "mutex.h"
#include "thread_slots.h"

struct counter {
    struct ho_thread_slot slot;
    uint64_t value;
};

static struct ho_thread_slots counters = HO_THREAD_SLOTS(struct counter);
static _Thread_local struct ho_thread_slot *my_counter;

static struct counter *counter_get(void) {
    return (struct counter *)(my_counter != NULL ? my_counter
                                                 : ho_thread_slot_take(&counters, &my_counter));
}

static size_t list_length(void) {
    size_t n = 0;
    for (struct ho_thread_slot *s = ho_thread_slots_first(&counters); s != NULL; s = s->next)
        n++;
    return n;
}

static void *add_one(void *arg) {
    struct counter *c = counter_get();
    if (c == NULL) return NULL;
    c->value += 1;
    *(struct counter **)arg = c;
    return NULL;
}

static void an_exited_threads_slot_is_reused(void **state) {
    (void)state;
    struct counter *mine = counter_get();
    assert_non_null(mine);
    assert_ptr_equal(counter_get(), mine); /* cached */
    assert_int_equal(mine->value, 0);      /* new: zeroed */
    size_t before = list_length();

    struct counter *first = NULL, *second = NULL;
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, add_one, &first), 0);
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_non_null(first);
    assert_true(first != mine);
    assert_int_equal(list_length(), before + 1);
    assert_true(atomic_load(&first->slot.free)); /* handed back at exit */

    assert_int_equal(pthread_create(&t, NULL, add_one, &second), 0);
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_ptr_equal(second, first);             /* the same slot again */
    assert_int_equal(second->value, 2);          /* as the first thread left it, plus one */
    assert_int_equal(list_length(), before + 1); /* nothing new was made */
    assert_false(atomic_load(&mine->slot.free)); /* this thread still holds its own */
}

static pthread_barrier_t both_hold;

static void *hold_one(void *arg) {
    *(struct counter **)arg = counter_get();
    pthread_barrier_wait(&both_hold); /* neither exits before both hold a slot */
    return NULL;
}

static void threads_alive_together_hold_different_slots(void **state) {
    (void)state;
    struct counter *a = NULL, *b = NULL, *mine = counter_get();
    pthread_t ta, tb;
    assert_int_equal(pthread_barrier_init(&both_hold, NULL, 2), 0);
    assert_int_equal(pthread_create(&ta, NULL, hold_one, &a), 0);
    assert_int_equal(pthread_create(&tb, NULL, hold_one, &b), 0);
    assert_int_equal(pthread_join(ta, NULL), 0);
    assert_int_equal(pthread_join(tb, NULL), 0);
    pthread_barrier_destroy(&both_hold);
    assert_non_null(a);
    assert_non_null(b);
    assert_true(a != b && a != mine && b != mine);
}

static void forgetting_empties_the_list(void **state) {
    (void)state;
    assert_true(list_length() > 0);
    ho_thread_slots_forget(&counters);
    my_counter = NULL;
    assert_int_equal(list_length(), 0);
    struct counter *c = counter_get();
    assert_non_null(c);
    assert_int_equal(list_length(), 1);
}

static struct ho_mutex lock = HO_MUTEX_INITIALIZER;

static void *held_elsewhere(void *arg) {
    *(bool *)arg = ho_mutex_held(&lock);
    return NULL;
}

static void the_mutex_knows_its_holder(void **state) {
    (void)state;
    assert_false(ho_mutex_held(&lock));
    ho_mutex_lock(&lock);
    assert_true(ho_mutex_held(&lock));
    HO_ASSERT_HELD(&lock); /* returns: held */
    bool other = true;
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, held_elsewhere, &other), 0);
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_false(other);
    assert_false(ho_mutex_trylock(&lock)); /* already held (not recursive) */
    ho_mutex_unlock(&lock);
    assert_false(ho_mutex_held(&lock));
    assert_true(ho_mutex_trylock(&lock));
    assert_true(ho_mutex_held(&lock));
    ho_mutex_unlock(&lock);
}

static void a_check_on_a_lock_not_held_aborts(void **state) {
    (void)state;
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int devnull = open("/dev/null", O_WRONLY);
        if (devnull >= 0) dup2(devnull, STDERR_FILENO); /* the check's one line */
        HO_ASSERT_HELD(&lock);
        _exit(0);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFSIGNALED(status));
    assert_int_equal(WTERMSIG(status), SIGABRT);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(an_exited_threads_slot_is_reused),
        cmocka_unit_test(threads_alive_together_hold_different_slots),
        cmocka_unit_test(forgetting_empties_the_list),
        cmocka_unit_test(the_mutex_knows_its_holder),
        cmocka_unit_test(a_check_on_a_lock_not_held_aborts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
