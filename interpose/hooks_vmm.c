/* VMM hooks. Memory the application maps itself is tracked (pointers into it are recognised)
 * and pinned: the library never moves what it did not allocate. */
#include "hook.h"

#include <pthread.h>
#include <stdlib.h>

/* Physical handles the application created, and where each lives: a mapping counts as device
 * memory only when its handle is device-located. */
struct handle_info {
    CUmemGenericAllocationHandle handle;
    bool on_device;
    struct handle_info *next;
};

static pthread_mutex_t handles_lock = PTHREAD_MUTEX_INITIALIZER;
static struct handle_info *handles;

static bool handle_on_device(CUmemGenericAllocationHandle h) {
    bool on_device = true; /* unknown handles (created before tracking): assume device */
    pthread_mutex_lock(&handles_lock);
    for (struct handle_info *i = handles; i != NULL; i = i->next)
        if (i->handle == h) on_device = i->on_device;
    pthread_mutex_unlock(&handles_lock);
    return on_device;
}

CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment, CUdeviceptr addr,
                             unsigned long long flags) {
    HO_ENTER(cuMemAddressReserve);
    return HO_REAL(cuMemAddressReserve, ptr, size, alignment, addr, flags);
}

CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size) {
    HO_ENTER(cuMemAddressFree);
    if (ho_tracking()) ho_registry_remove_range(ptr, size, 1u << HO_BUF_VMM_APP, NULL, NULL);
    return HO_REAL(cuMemAddressFree, ptr, size);
}

CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
                     const CUmemAllocationProp *prop, unsigned long long flags) {
    HO_ENTER(cuMemCreate);
    CUresult rc = HO_REAL(cuMemCreate, handle, size, prop, flags);
    if (rc == CUDA_SUCCESS && ho_tracking()) {
        struct handle_info *i = malloc(sizeof *i);
        if (i != NULL) {
            i->handle = *handle;
            i->on_device = prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE;
            pthread_mutex_lock(&handles_lock);
            i->next = handles;
            handles = i;
            pthread_mutex_unlock(&handles_lock);
        }
    }
    return rc;
}

CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
    HO_ENTER(cuMemRelease);
    CUresult rc = HO_REAL(cuMemRelease, handle);
    if (rc == CUDA_SUCCESS && ho_tracking()) {
        pthread_mutex_lock(&handles_lock);
        for (struct handle_info **pp = &handles; *pp != NULL; pp = &(*pp)->next) {
            if ((*pp)->handle == handle) {
                struct handle_info *i = *pp;
                *pp = i->next;
                free(i);
                break;
            }
        }
        pthread_mutex_unlock(&handles_lock);
    }
    return rc;
}

CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                  unsigned long long flags) {
    HO_ENTER(cuMemMap);
    CUresult rc = HO_REAL(cuMemMap, ptr, size, offset, handle, flags);
    if (rc == CUDA_SUCCESS && ho_tracking()) {
        /* A host-located handle is tracked like pinned host memory. */
        ho_track_alloc(ptr, size, handle_on_device(handle) ? HO_BUF_VMM_APP : HO_BUF_REGISTERED);
        ho_track_pin(ptr);
    }
    return rc;
}

static void untrack_mapping(struct ho_buffer *b, void *arg) {
    (void)arg;
    ho_count(&ho_stats.counts_frees, 1);
    if (b->kind == HO_BUF_VMM_APP) atomic_fetch_sub(&ho_stats.bytes_device_now, b->size);
}

CUresult cuMemUnmap(CUdeviceptr ptr, size_t size) {
    HO_ENTER(cuMemUnmap);
    if (ho_tracking())
        ho_registry_remove_range(ptr, size, (1u << HO_BUF_VMM_APP) | (1u << HO_BUF_REGISTERED),
                                 untrack_mapping, NULL);
    return HO_REAL(cuMemUnmap, ptr, size);
}

CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc, size_t count) {
    HO_ENTER(cuMemSetAccess);
    return HO_REAL(cuMemSetAccess, ptr, size, desc, count);
}

/* An IPC-exported buffer is used by another process the library cannot see: pinned. */
CUresult cuIpcGetMemHandle(CUipcMemHandle *handle, CUdeviceptr dptr) {
    HO_ENTER(cuIpcGetMemHandle);
    /* A managed buffer is VMM memory, which legacy IPC cannot export: the driver's error stands
     * (docs/ARCHITECTURE.md), and the buffer is pinned all the same. */
    if (ho_offloading()) ho_engine_pin(dptr);
    CUresult rc = HO_REAL(cuIpcGetMemHandle, handle, dptr);
    if (rc == CUDA_SUCCESS && ho_tracking()) ho_track_pin(dptr);
    return rc;
}

/* Shareable VMM handles are the application's own mappings (never moved), or a managed buffer's
 * handle from cuMemRetainAllocationHandle, which pinned it. */
CUresult cuMemExportToShareableHandle(void *shareable, CUmemGenericAllocationHandle handle,
                                      CUmemAllocationHandleType type, unsigned long long flags) {
    HO_ENTER(cuMemExportToShareableHandle);
    return HO_REAL(cuMemExportToShareableHandle, shareable, handle, type, flags);
}

/* ------------------------------------------------------------ physical handles that escape
 *
 * A buffer's physical handle leaving the library (retained, exported, bound into a multicast
 * object, turned into a dma-buf) names the buffer's bytes for good: a move would leave them
 * behind. The buffer is pinned for life, on the device when there is room, before the handle
 * is made (ho_engine_pin_escaped). */

CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *handle, void *addr) {
    HO_ENTER(cuMemRetainAllocationHandle);
    if (ho_offloading()) ho_engine_pin_escaped((uint64_t)(uintptr_t)addr);
    return HO_REAL(cuMemRetainAllocationHandle, handle, addr);
}

CUresult cuMemGetHandleForAddressRange(void *handle, CUdeviceptr dptr, size_t size,
                                       CUmemRangeHandleType type, unsigned long long flags) {
    HO_ENTER(cuMemGetHandleForAddressRange);
    if (ho_offloading()) ho_engine_pin_escaped(dptr);
    return HO_REAL(cuMemGetHandleForAddressRange, handle, dptr, size, type, flags);
}

CUresult cuMulticastBindAddr(CUmemGenericAllocationHandle mc, size_t off, CUdeviceptr ptr,
                             size_t size, unsigned long long flags) {
    HO_ENTER(cuMulticastBindAddr);
    if (ho_offloading()) ho_engine_pin_escaped(ptr);
    return HO_REAL(cuMulticastBindAddr, mc, off, ptr, size, flags);
}

/* The handle bound here came from cuMemCreate (the application's own, never moved) or from
 * cuMemRetainAllocationHandle, which pinned its buffer already. */
CUresult cuMulticastBindMem(CUmemGenericAllocationHandle mc, size_t mc_off,
                            CUmemGenericAllocationHandle mem, size_t mem_off, size_t size,
                            unsigned long long flags) {
    HO_ENTER(cuMulticastBindMem);
    return HO_REAL(cuMulticastBindMem, mc, mc_off, mem, mem_off, size, flags);
}
