/* Devices and their attributes: an H200 by default. */
#include "sim.h"

#include <stdio.h>
#include <string.h>

static CUresult device_check(CUdevice dev) {
    CUresult rc = sim_enter();
    if (rc != CUDA_SUCCESS) return rc;
    if (dev < 0 || dev >= sim.ndevices) return CUDA_ERROR_INVALID_DEVICE;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuDeviceGetCount(int *count) {
    CUresult rc = sim_enter();
    if (rc != CUDA_SUCCESS) return rc;
    if (count == NULL) return CUDA_ERROR_INVALID_VALUE;
    *count = sim.ndevices;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuDeviceGet(CUdevice *device, int ordinal) {
    CUresult rc = sim_enter();
    if (rc != CUDA_SUCCESS) return rc;
    if (device == NULL) return CUDA_ERROR_INVALID_VALUE;
    if (ordinal < 0 || ordinal >= sim.ndevices) return CUDA_ERROR_INVALID_DEVICE;
    *device = ordinal;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuDeviceGetName(char *name, int len, CUdevice dev) {
    CUresult rc = device_check(dev);
    if (rc != CUDA_SUCCESS) return rc;
    if (name == NULL || len <= 0) return CUDA_ERROR_INVALID_VALUE;
    snprintf(name, (size_t)len, "NVIDIA H200 (simulated)");
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev) {
    CUresult rc = device_check(dev);
    if (rc != CUDA_SUCCESS) return rc;
    if (bytes == NULL) return CUDA_ERROR_INVALID_VALUE;
    *bytes = sim.cfg.device_mem;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuDeviceGetUuid_v2(CUuuid *uuid, CUdevice dev) {
    CUresult rc = device_check(dev);
    if (rc != CUDA_SUCCESS) return rc;
    if (uuid == NULL) return CUDA_ERROR_INVALID_VALUE;
    memset(uuid, 0, sizeof *uuid);
    memcpy(uuid->bytes, "simcuda-h200-", 13);
    uuid->bytes[15] = (char)dev;
    return CUDA_SUCCESS;
}

/* The pre-versioned ABI: cuda.h maps the plain name to the newest variant. */
#undef cuDeviceGetUuid
SIM_EXPORT CUresult cuDeviceGetUuid(CUuuid *uuid, CUdevice dev) {
    return cuDeviceGetUuid_v2(uuid, dev);
}

SIM_EXPORT CUresult cuDeviceGetPCIBusId(char *bus, int len, CUdevice dev) {
    CUresult rc = device_check(dev);
    if (rc != CUDA_SUCCESS) return rc;
    if (bus == NULL || len <= 0) return CUDA_ERROR_INVALID_VALUE;
    snprintf(bus, (size_t)len, "00000000:%02X:00.0", 0x18 + dev);
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuDeviceGetByPCIBusId(CUdevice *dev, const char *bus) {
    CUresult rc = sim_enter();
    if (rc != CUDA_SUCCESS) return rc;
    if (dev == NULL || bus == NULL) return CUDA_ERROR_INVALID_VALUE;
    for (int i = 0; i < sim.ndevices; i++) {
        char want[32];
        snprintf(want, sizeof want, "00000000:%02X:00.0", 0x18 + i);
        if (strcasecmp(bus, want) == 0 || strcasecmp(bus, want + 4) == 0) {
            *dev = i;
            return CUDA_SUCCESS;
        }
    }
    return CUDA_ERROR_INVALID_DEVICE;
}

/* An H200 SXM as the driver describes it; attributes not listed read 0. */
static int attribute_value(CUdevice_attribute a) {
    switch (a) {
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK:
        return 1024;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X:
        return 1024;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y:
        return 1024;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z:
        return 64;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X:
        return 2147483647;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y:
        return 65535;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z:
        return 65535;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK:
        return 49152;
    case CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY:
        return 65536;
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE:
        return 32;
    case CU_DEVICE_ATTRIBUTE_MAX_PITCH:
        return 2147483647;
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK:
        return 65536;
    case CU_DEVICE_ATTRIBUTE_CLOCK_RATE:
        return 1980000;
    case CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT:
        return 512;
    case CU_DEVICE_ATTRIBUTE_GPU_OVERLAP:
        return 1;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT:
        return 132;
    case CU_DEVICE_ATTRIBUTE_INTEGRATED:
        return 0;
    case CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY:
        return 1;
    case CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS:
        return 1;
    case CU_DEVICE_ATTRIBUTE_ECC_ENABLED:
        return 1;
    case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID:
        return 0x18;
    case CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT:
        return 2;
    case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING:
        return 1;
    case CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE:
        return 2619000;
    case CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH:
        return 6144;
    case CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE:
        return 52428800;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR:
        return 2048;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR:
        return 9;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR:
        return 0;
    case CU_DEVICE_ATTRIBUTE_STREAM_PRIORITIES_SUPPORTED:
        return 1;
    case CU_DEVICE_ATTRIBUTE_GLOBAL_L1_CACHE_SUPPORTED:
        return 1;
    case CU_DEVICE_ATTRIBUTE_LOCAL_L1_CACHE_SUPPORTED:
        return 1;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR:
        return 233472;
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR:
        return 65536;
    case CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY:
        return 1;
    case CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS:
        return 1;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_PREEMPTION_SUPPORTED:
        return 1;
    case CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH:
        return 1;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN:
        return 232448;
    case CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED:
        return 1;
    case CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM:
        return 1;
    case CU_DEVICE_ATTRIBUTE_READ_ONLY_HOST_REGISTER_SUPPORTED:
        return 1;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR:
        return 32;
    case CU_DEVICE_ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE:
        return 82837504;
    case CU_DEVICE_ATTRIBUTE_MAX_ACCESS_POLICY_WINDOW_SIZE:
        return 134213632;
    case CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK:
        return 1024;
    case CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED:
        return 1;
    case CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED:
        return 1;
    case CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED:
        return 1;
    case CU_DEVICE_ATTRIBUTE_MEMPOOL_SUPPORTED_HANDLE_TYPES:
        return CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    case CU_DEVICE_ATTRIBUTE_HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED:
        return 1;
    case CU_DEVICE_ATTRIBUTE_HOST_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED:
        return 1;
    case CU_DEVICE_ATTRIBUTE_IPC_EVENT_SUPPORTED:
        return 1;
    case CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH:
        return 1;
    case CU_DEVICE_ATTRIBUTE_DEFERRED_MAPPING_CUDA_ARRAY_SUPPORTED:
        return 1;
    case CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID:
        return 0;
    default:
        return 0;
    }
}

SIM_EXPORT CUresult cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev) {
    CUresult rc = device_check(dev);
    if (rc != CUDA_SUCCESS) return rc;
    if (pi == NULL || (int)attrib < 1 || attrib >= CU_DEVICE_ATTRIBUTE_MAX)
        return CUDA_ERROR_INVALID_VALUE;
    *pi = attribute_value(attrib);
    if (attrib == CU_DEVICE_ATTRIBUTE_PCI_BUS_ID) *pi += dev;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuDeviceComputeCapability(int *major, int *minor, CUdevice dev) {
    CUresult rc = device_check(dev);
    if (rc != CUDA_SUCCESS) return rc;
    if (major == NULL || minor == NULL) return CUDA_ERROR_INVALID_VALUE;
    *major = 9;
    *minor = 0;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuDeviceCanAccessPeer(int *can, CUdevice dev, CUdevice peer) {
    CUresult rc = device_check(dev);
    if (rc != CUDA_SUCCESS) return rc;
    if (peer < 0 || peer >= sim.ndevices) return CUDA_ERROR_INVALID_DEVICE;
    if (can == NULL) return CUDA_ERROR_INVALID_VALUE;
    *can = dev != peer;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuDeviceGetP2PAttribute(int *value, CUdevice_P2PAttribute attrib, CUdevice src,
                                            CUdevice dst) {
    CUresult rc = device_check(src);
    if (rc != CUDA_SUCCESS) return rc;
    if (dst < 0 || dst >= sim.ndevices || src == dst) return CUDA_ERROR_INVALID_DEVICE;
    if (value == NULL) return CUDA_ERROR_INVALID_VALUE;
    *value = attrib == CU_DEVICE_P2P_ATTRIBUTE_PERFORMANCE_RANK ? 0 : 1;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuDeviceGetDefaultMemPool(CUmemoryPool *pool, CUdevice dev) {
    CUresult rc = device_check(dev);
    if (rc != CUDA_SUCCESS) return rc;
    if (pool == NULL) return CUDA_ERROR_INVALID_VALUE;
    *pool = sim.devices[dev].default_pool;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuDeviceGetMemPool(CUmemoryPool *pool, CUdevice dev) {
    return cuDeviceGetDefaultMemPool(pool, dev);
}
