/* simcuda_where: where the memory behind an address lives, for test programs that run under a
 * library interposing the driver and must look without going through it (asking the driver,
 * e.g. with cuMemRetainAllocationHandle, is itself a use such a library reacts to). */
#include "sim.h"

#include <simcuda.h>

SIM_EXPORT char simcuda_where(const void *ptr) {
    if (!sim.initialized) return 'U';
    sim_lock();
    struct sim_lookup lk;
    sim_lookup((uint64_t)(uintptr_t)ptr, &lk);
    char c;
    if (lk.range == NULL)
        c = 'U';
    else if (lk.range->kind != SIM_R_RESERVED)
        c = 'L';
    else if (!lk.mapped)
        c = 'N';
    else
        c = lk.loc == SIM_LOC_DEVICE ? 'D' : 'H';
    sim_unlock();
    return c;
}
