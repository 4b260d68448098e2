/* Driver entry point access for simcuda: cuGetProcAddress (CUDA 11.3 ABI),
 * cuGetProcAddress_v2 (CUDA 12.0 ABI) and cuGetExportTable.
 *
 * libcudart finds every driver function through cuGetProcAddress_v2, asking for a
 * base name ("cuMemAlloc") at the CUDA version whose ABI it was built against; the
 * answer must be the exported variant with that ABI (cuMemAlloc_v2 from 3020 on).
 * The variants come from the generated sim_proc_table (see gen_driver_tables.py). */
#include <cuda.h>
#include <string.h>

#include "proc_table.h"

/* cuda.h renames cuGetProcAddress to cuGetProcAddress_v2 (the five-argument ABI), but
 * the driver also exports the four-argument CUDA 11.3 ABI under the plain name. */
#undef cuGetProcAddress

SIM_EXPORT CUresult CUDAAPI cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion,
                                             cuuint64_t flags);
SIM_EXPORT CUresult CUDAAPI cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion,
                                                cuuint64_t flags,
                                                CUdriverProcAddressQueryResult *symbolStatus);
SIM_EXPORT CUresult CUDAAPI cuGetExportTable(const void **ppExportTable,
                                             const CUuuid *pExportTableId);

static const unsigned long long SIM_PROC_KNOWN_FLAGS =
    CU_GET_PROC_ADDRESS_LEGACY_STREAM | CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;

/* Index of the first table entry whose name is not below symbol (binary search). */
static size_t first_entry_not_below(const char *symbol) {
    size_t lo = 0;
    size_t hi = sim_proc_table_len;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (strcmp(sim_proc_table[mid].name, symbol) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Newest variant in [begin, end) of the given kind introduced at or before version.
 * Entries of one name are sorted by (per_thread, version), so the last match wins. */
static const struct sim_proc_entry *newest_variant(size_t begin, size_t end, int per_thread,
                                                   int version) {
    const struct sim_proc_entry *best = NULL;
    for (size_t i = begin; i < end; i++) {
        const struct sim_proc_entry *e = &sim_proc_table[i];
        if (e->per_thread == per_thread && (long long)e->version <= version) best = e;
    }
    return best;
}

static void set_status(int *status, CUdriverProcAddressQueryResult value) {
    if (status) *status = (int)value;
}

/* Only one stream mode may be asked for; unknown bits are rejected, not ignored, so
 * that a caller relying on a newer flag learns that this driver does not have it. */
static int flags_valid(unsigned long long flags) {
    return (flags & ~SIM_PROC_KNOWN_FLAGS) == 0 && flags != SIM_PROC_KNOWN_FLAGS;
}

int sim_proc_lookup(const char *symbol, int version, unsigned long long flags, void **pfn,
                    int *status) {
    if (!symbol || !pfn) return CUDA_ERROR_INVALID_VALUE;
    *pfn = NULL;
    if (version > SIM_PROC_MAX_CUDA_VERSION || !flags_valid(flags)) return CUDA_ERROR_INVALID_VALUE;

    size_t begin = first_entry_not_below(symbol);
    size_t end = begin;
    while (end < sim_proc_table_len && strcmp(sim_proc_table[end].name, symbol) == 0)
        end++;
    if (begin == end) {
        set_status(status, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
        return CUDA_SUCCESS;
    }

    /* Per-thread callers get the _ptds/_ptsz variant where the entry point has one
     * (old enough), and the legacy variant otherwise: its ABI is the same. */
    const struct sim_proc_entry *e = NULL;
    if (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM)
        e = newest_variant(begin, end, 1, version);
    if (!e) e = newest_variant(begin, end, 0, version);
    if (!e) {
        set_status(status, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
        return CUDA_SUCCESS;
    }
    /* POSIX makes function and data pointers interchangeable (dlsym relies on it);
     * copying the bits keeps ISO C's -Wpedantic quiet about the conversion. */
    _Static_assert(sizeof e->fn == sizeof *pfn, "function pointers must fit in void *");
    memcpy(pfn, &e->fn, sizeof *pfn);
    set_status(status, CU_GET_PROC_ADDRESS_SUCCESS);
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion,
                                  cuuint64_t flags) {
    return (CUresult)sim_proc_lookup(symbol, cudaVersion, flags, pfn, NULL);
}

CUresult CUDAAPI cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion,
                                     cuuint64_t flags,
                                     CUdriverProcAddressQueryResult *symbolStatus) {
    int status = CU_GET_PROC_ADDRESS_SUCCESS;
    CUresult rc = (CUresult)sim_proc_lookup(symbol, cudaVersion, flags, pfn, &status);
    if (symbolStatus && rc == CUDA_SUCCESS) *symbolStatus = (CUdriverProcAddressQueryResult)status;
    return rc;
}

/* The export tables are NVIDIA-private interfaces between cudart and the driver;
 * simcuda has none, so callers get a clean refusal. */
CUresult CUDAAPI cuGetExportTable(const void **ppExportTable, const CUuuid *pExportTableId) {
    (void)pExportTableId;
    if (ppExportTable) *ppExportTable = NULL;
    return CUDA_ERROR_NOT_SUPPORTED;
}
