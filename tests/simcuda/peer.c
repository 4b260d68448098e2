/* Peer access between simulated devices (SIMCUDA_DEVICES >= 2): cuCtxEnablePeerAccess and
 * cuCtxDisablePeerAccess. A kernel on one device whose pointer (a pointer parameter, or a word
 * of a by-value struct) points into linear memory allocated on another device is an illegal
 * access unless access from its device to that one is enabled, as on GPUs without unified
 * peer mappings by default. Modelled per pair of devices (every context of a device shares its
 * peer mappings, as its primary context's would). VMM mappings follow their own access
 * descriptors (cuMemSetAccess), not peer access, as on the driver. */
#include "sim.h"

static bool enabled[SIM_MAX_DEVICES][SIM_MAX_DEVICES]; /* [accessing][owner], under sim.lock */

bool sim_peer_allowed(int dev, int owner) {
    if (dev == owner || dev < 0 || owner < 0 || dev >= SIM_MAX_DEVICES || owner >= SIM_MAX_DEVICES)
        return true;
    return enabled[dev][owner];
}

static CUresult peer_enter(CUcontext peer, struct sim_ctx **me, struct sim_ctx **other) {
    CUresult rc = sim_require_ctx(me);
    if (rc != CUDA_SUCCESS) return rc;
    *other = sim_ctx_from_handle(peer);
    if (*other == NULL || *other == *me) return CUDA_ERROR_INVALID_CONTEXT;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuCtxEnablePeerAccess(CUcontext peer, unsigned int flags) {
    struct sim_ctx *me, *other;
    CUresult rc = peer_enter(peer, &me, &other);
    if (rc != CUDA_SUCCESS) return rc;
    if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
    int a = me->dev->ordinal, b = other->dev->ordinal;
    if (a == b) return CUDA_ERROR_PEER_ACCESS_UNSUPPORTED; /* one device: nothing to enable */
    sim_lock();
    rc = enabled[a][b] ? CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED : CUDA_SUCCESS;
    enabled[a][b] = true;
    sim_unlock();
    return rc;
}

SIM_EXPORT CUresult cuCtxDisablePeerAccess(CUcontext peer) {
    struct sim_ctx *me, *other;
    CUresult rc = peer_enter(peer, &me, &other);
    if (rc != CUDA_SUCCESS) return rc;
    int a = me->dev->ordinal, b = other->dev->ordinal;
    sim_lock();
    rc = a != b && enabled[a][b] ? CUDA_SUCCESS : CUDA_ERROR_PEER_ACCESS_NOT_ENABLED;
    enabled[a][b] = false;
    sim_unlock();
    return rc;
}
