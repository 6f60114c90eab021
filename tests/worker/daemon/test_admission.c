/*
 * test_admission.c: the daemon's admission rules (worker/daemon/admission.h):
 * consumption goes on while the tasks held in every state (running, looked
 * up, parked, queued) are fewer than the slots plus the one look-ahead task,
 * and stops at that one extra; a look-up in flight holds a slot's place; a
 * consumed task queues behind a non-empty queue; a drain takes nothing new
 * and ends when no task runs and no look-up is unanswered (or, past its
 * deadline, when no task runs); a failed isolation check with the stop
 * setting takes nothing new.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "worker/daemon/admission.h"

static void
test_one_beyond_free_slots (void **state)
{
    (void) state;
    kiwi_admission a = { .nslots = 2 };
    assert_true (kiwi_admission_want_tasks (&a));
    a.busy = 2;
    /* every slot busy: one more is taken, and held */
    assert_true (kiwi_admission_want_tasks (&a));
    a.nready = 1;
    assert_false (kiwi_admission_want_tasks (&a));
    assert_int_equal (KIWI_ADMISSION_LOOKAHEAD, 1);
    /* the held one in a look-up instead of the queue counts the same */
    a.nready = 0;
    a.deciding = 1;
    assert_false (kiwi_admission_want_tasks (&a));
    /* and a parked one (another worker's lease) too */
    a.deciding = 0;
    a.parked = true;
    assert_false (kiwi_admission_want_tasks (&a));
    a.busy = 1;
    assert_true (kiwi_admission_want_tasks (&a));
}

static void
test_look_up_holds_a_slot (void **state)
{
    (void) state;
    kiwi_admission a = { .nslots = 2, .busy = 1 };
    assert_true (kiwi_admission_look_up_now (&a));
    assert_true (kiwi_admission_may_look_up (&a));
    /* a look-up unanswered takes the free slot's place */
    a.deciding = 1;
    assert_false (kiwi_admission_look_up_now (&a));
    assert_false (kiwi_admission_may_look_up (&a));
    /* it answered and its task left the slots */
    a.deciding = 0;
    a.busy = 0;
    assert_true (kiwi_admission_look_up_now (&a));
    /* a parked task holds no slot's place */
    a.parked = true;
    a.busy = 1;
    assert_true (kiwi_admission_may_look_up (&a));
}

static void
test_queue_order (void **state)
{
    (void) state;
    /* a free slot, but tasks are queued: the new one goes behind them */
    kiwi_admission a = { .nslots = 3, .busy = 1, .nready = 1 };
    assert_false (kiwi_admission_look_up_now (&a));
    /* while the queue itself moves into the free slot */
    assert_true (kiwi_admission_may_look_up (&a));
}

static void
test_drain (void **state)
{
    (void) state;
    kiwi_admission a = { .nslots = 2, .busy = 1, .deciding = 1, .draining = true };
    assert_false (kiwi_admission_want_tasks (&a));
    a.busy = 0;
    a.deciding = 0;
    /* nothing queued or parked starts during a drain, free slots or not */
    assert_false (kiwi_admission_may_look_up (&a));
    assert_true (kiwi_admission_drained (&a));
    /* a task still running holds the drain */
    a.busy = 1;
    assert_false (kiwi_admission_drained (&a));
    /* so does an unanswered look-up, until the deadline */
    a.busy = 0;
    a.deciding = 1;
    assert_false (kiwi_admission_drained (&a));
    a.drain_expired = true;
    assert_true (kiwi_admission_drained (&a));
    a.busy = 1;
    assert_false (kiwi_admission_drained (&a));
    /* not draining: never drained */
    kiwi_admission idle = { .nslots = 2 };
    assert_false (kiwi_admission_drained (&idle));
}

static void
test_stopped (void **state)
{
    (void) state;
    kiwi_admission a = { .nslots = 4, .stopped = true };
    assert_false (kiwi_admission_want_tasks (&a));
    /* what is already held still goes on */
    assert_true (kiwi_admission_may_look_up (&a));
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_one_beyond_free_slots),
        cmocka_unit_test (test_look_up_holds_a_slot),
        cmocka_unit_test (test_queue_order),
        cmocka_unit_test (test_drain),
        cmocka_unit_test (test_stopped),
    };
    return cmocka_run_group_tests_name ("admission", tests, NULL, NULL);
}
