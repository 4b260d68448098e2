#include "mode.h"

#include "log.h"

_Atomic int ho_mode_value = HO_MODE_OFF;

void ho_mode_set(enum ho_mode mode) {
    atomic_store(&ho_mode_value, (int)mode);
}

void ho_degrade(const char *why) {
    int expected = atomic_load(&ho_mode_value);
    if (expected == HO_MODE_OFF) return;
    if (atomic_compare_exchange_strong(&ho_mode_value, &expected, HO_MODE_OFF))
        ho_log(HO_LOG_ERROR, "%s: tracking stops, calls pass straight to the driver", why);
}
