/*
 * admission.c: the rules of admission.h, over the counts the daemon keeps.
 */
#include "worker/daemon/admission.h"

static bool
slot_unpromised (const kiwi_admission *a)
{
    return a->busy + a->deciding < a->nslots;
}

bool
kiwi_admission_want_tasks (const kiwi_admission *a)
{
    if (a->stopped || a->draining)
        return false;
    return a->busy + a->deciding + (a->parked ? 1 : 0) + a->nready < a->nslots + KIWI_ADMISSION_LOOKAHEAD;
}

bool
kiwi_admission_look_up_now (const kiwi_admission *a)
{
    return a->nready == 0 && slot_unpromised (a);
}

bool
kiwi_admission_may_look_up (const kiwi_admission *a)
{
    return !a->draining && slot_unpromised (a);
}

bool
kiwi_admission_drained (const kiwi_admission *a)
{
    return a->draining && a->busy == 0 && (a->deciding == 0 || a->drain_expired);
}
