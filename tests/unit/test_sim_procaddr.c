/* Tests simcuda's cuGetProcAddress against what the real CUDA headers declare.
 *
 * Usage: test_sim_procaddr [SIMCUDA_LIB [FACTS_FILE]]
 *   SIMCUDA_LIB defaults to $SIMCUDA_LIB, FACTS_FILE to
 *   $HOSTOFF_FACTS_DIR/cudart13-proc-lookups.txt (the lookups libcudart.so.13 makes).
 *
 * The library is dlopened like cudart does, and every answer is compared with
 * dlsym() of the symbol the test expects.  The expectation comes from
 * sim_expect_table (generated with --check-c, where every row is a compile-time check
 * that cuda.h declares that symbol with the exact type of cudaTypedefs.h's
 * PFN_<name>_v<version>) and from this file's own selection rules, not from the
 * library's table.  simcuda's stubs are distinct functions, so equal pointers really
 * mean the same variant. */

#include <dlfcn.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <cuda.h>

#include "proc_table.h"

typedef CUresult (*get_proc_v1_fn)(const char *, void **, int, cuuint64_t);
typedef CUresult (*get_proc_v2_fn)(const char *, void **, int, cuuint64_t,
                                   CUdriverProcAddressQueryResult *);

static const char *lib_path;
static const char *facts_path;
static void *lib;
static get_proc_v2_fn get_proc;

/* dlsym() hands out function addresses as void *; POSIX allows converting them back. */
static void *sym(const char *name) {
    dlerror();
    return dlsym(lib, name);
}

static void to_function(void *addr, void *fn_out, size_t fn_size) {
    assert_non_null(addr);
    assert_int_equal(fn_size, sizeof addr);
    memcpy(fn_out, &addr, sizeof addr);
}

/* ---- expected answers, worked out here from sim_expect_table ---------------------- */

struct expectation {
    const char *symbol; /* NULL when no pointer is expected */
    CUdriverProcAddressQueryResult status;
};

/* The newest variant of `name` of one kind introduced at or before `version`. */
static const struct sim_proc_entry *expected_variant(const char *name, int version,
                                                     int per_thread) {
    const struct sim_proc_entry *best = NULL;
    for (size_t i = 0; i < sim_expect_table_len; i++) {
        const struct sim_proc_entry *e = &sim_expect_table[i];
        if (strcmp(e->name, name) != 0 || e->per_thread != per_thread ||
            (long long)e->version > version)
            continue;
        if (!best || e->version > best->version) best = e;
    }
    return best;
}

static int name_known(const char *name) {
    for (size_t i = 0; i < sim_expect_table_len; i++)
        if (strcmp(sim_expect_table[i].name, name) == 0) return 1;
    return 0;
}

static struct expectation expect(const char *name, int version, unsigned long long flags) {
    struct expectation x = {NULL, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND};
    if (!name_known(name)) return x;
    const struct sim_proc_entry *e = NULL;
    if (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM)
        e = expected_variant(name, version, 1);
    if (!e) e = expected_variant(name, version, 0);
    x.symbol = e ? e->symbol : NULL;
    x.status = e ? CU_GET_PROC_ADDRESS_SUCCESS : CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT;
    return x;
}

/* Asks the library and compares with the expectation; prints and returns 1 on a
 * mismatch so that table-wide checks report every bad entry, not just the first. */
static int check_lookup(const char *name, int version, unsigned long long flags) {
    struct expectation x = expect(name, version, flags);
    void *want = x.symbol ? sym(x.symbol) : NULL;
    void *got = (void *)&got; /* must be overwritten */
    CUdriverProcAddressQueryResult status = (CUdriverProcAddressQueryResult)-1;
    CUresult rc = get_proc(name, &got, version, flags, &status);
    if (x.symbol && !want) {
        print_error("'%s' ver=%d flags=%llu: expected %s is not exported\n", name, version, flags,
                    x.symbol);
        return 1;
    }
    if (rc != CUDA_SUCCESS || got != want || status != x.status) {
        Dl_info info = {0};
        const char *got_name = got && dladdr(got, &info) ? info.dli_sname : "(none)";
        print_error("'%s' ver=%d flags=%llu: got rc=%d %s status=%d, want %s status=%d\n", name,
                    version, flags, (int)rc, got_name, (int)status, x.symbol ? x.symbol : "NULL",
                    (int)x.status);
        return 1;
    }
    return 0;
}

/* ---- whole-table checks ------------------------------------------------------------ */

/* Every lookup libcudart.so.13 makes, in its order: "name ver=N flags=F" per line. */
static void test_cudart_lookups(void **state) {
    (void)state;
    FILE *f = fopen(facts_path, "r");
    if (!f) fail_msg("cannot open facts file %s", facts_path);
    char line[512];
    int lookups = 0;
    int bad = 0;
    while (fgets(line, sizeof line, f)) {
        char name[256];
        int version;
        unsigned long long flags;
        if (line[0] == '#' || line[0] == '\n') continue;
        if (sscanf(line, "%255s ver=%d flags=%llu", name, &version, &flags) != 3)
            fail_msg("unparsable facts line: %s", line);
        if (strcmp(name, "(empty)") == 0) name[0] = '\0';
        bad += check_lookup(name, version, flags);
        lookups++;
    }
    fclose(f);
    assert_true(lookups > 0);
    assert_int_equal(bad, 0);
}

/* Each variant, asked for at exactly the version that introduced it, in its own mode. */
static void test_every_variant(void **state) {
    (void)state;
    int bad = 0;
    for (size_t i = 0; i < sim_expect_table_len; i++) {
        const struct sim_proc_entry *e = &sim_expect_table[i];
        unsigned long long flags = e->per_thread ? CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM
                                                 : CU_GET_PROC_ADDRESS_LEGACY_STREAM;
        bad += check_lookup(e->name, (int)e->version, flags);
        bad += check_lookup(e->name, SIM_PROC_MAX_CUDA_VERSION, flags);
    }
    assert_int_equal(bad, 0);
}

/* Without distinct addresses per variant the pointer checks above would prove nothing. */
static void test_variants_have_distinct_addresses(void **state) {
    (void)state;
    assert_non_null(sym("cuMemAlloc"));
    assert_non_null(sym("cuMemAlloc_v2"));
    assert_ptr_not_equal(sym("cuMemAlloc"), sym("cuMemAlloc_v2"));
    assert_ptr_not_equal(sym("cuLaunchKernel"), sym("cuLaunchKernel_ptsz"));
}

/* ---- single cases ------------------------------------------------------------------ */

/* Looks name up and checks that the answer is the export `want` (or NULL). */
static void assert_lookup(const char *name, int version, unsigned long long flags, const char *want,
                          CUdriverProcAddressQueryResult want_status) {
    void *got = NULL;
    CUdriverProcAddressQueryResult status = (CUdriverProcAddressQueryResult)-1;
    assert_int_equal(get_proc(name, &got, version, flags, &status), CUDA_SUCCESS);
    assert_int_equal(status, want_status);
    if (want) {
        assert_non_null(sym(want));
        assert_ptr_equal(got, sym(want));
    } else {
        assert_null(got);
    }
}

static void test_current_variants(void **state) {
    (void)state;
    assert_lookup("cuMemAlloc", 2000, 0, "cuMemAlloc", CU_GET_PROC_ADDRESS_SUCCESS);
    assert_lookup("cuMemAlloc", 3020, 0, "cuMemAlloc_v2", CU_GET_PROC_ADDRESS_SUCCESS);
    assert_lookup("cuCtxCreate", 13000, 0, "cuCtxCreate_v4", CU_GET_PROC_ADDRESS_SUCCESS);
    assert_lookup("cuGetProcAddress", 11030, 0, "cuGetProcAddress", CU_GET_PROC_ADDRESS_SUCCESS);
    assert_lookup("cuGetProcAddress", 12000, 0, "cuGetProcAddress_v2", CU_GET_PROC_ADDRESS_SUCCESS);
}

static void test_null_status_accepted(void **state) {
    (void)state;
    void *got = NULL;
    assert_int_equal(get_proc("cuMemAlloc", &got, 3020, 0, NULL), CUDA_SUCCESS);
    assert_ptr_equal(got, sym("cuMemAlloc_v2"));
    got = &got;
    assert_int_equal(get_proc("cuNoSuchFunction", &got, 3020, 0, NULL), CUDA_SUCCESS);
    assert_null(got);
}

static void test_version_above_driver_rejected(void **state) {
    (void)state;
    void *got = &got;
    assert_int_equal(get_proc("cuMemAlloc", &got, 13010, 0, NULL), CUDA_ERROR_INVALID_VALUE);
    assert_null(got);
}

static void test_unknown_symbol(void **state) {
    (void)state;
    assert_lookup("cuNoSuchFunction", 13000, 0, NULL, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
    assert_lookup("", 0, 0, NULL, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
    assert_lookup("cuMemAlloc_v2", 13000, 0, NULL, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
}

static void test_version_not_sufficient(void **state) {
    (void)state;
    /* cuLaunchKernel first appeared in CUDA 4.0. */
    assert_lookup("cuLaunchKernel", 3020, 0, NULL, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
    assert_lookup("cuLaunchKernel", 3020, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, NULL,
                  CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
}

static void test_per_thread_variants(void **state) {
    (void)state;
    const unsigned long long ptds = CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
    assert_lookup("cuLaunchKernel", 7000, ptds, "cuLaunchKernel_ptsz", CU_GET_PROC_ADDRESS_SUCCESS);
    assert_lookup("cuMemcpyHtoD", 7000, ptds, "cuMemcpyHtoD_v2_ptds", CU_GET_PROC_ADDRESS_SUCCESS);
    assert_lookup("cuMemcpyHtoDAsync", 13000, ptds, "cuMemcpyHtoDAsync_v2_ptsz",
                  CU_GET_PROC_ADDRESS_SUCCESS);
    /* The legacy-stream modes never get a per-thread variant. */
    assert_lookup("cuLaunchKernel", 7000, 0, "cuLaunchKernel", CU_GET_PROC_ADDRESS_SUCCESS);
    assert_lookup("cuLaunchKernel", 7000, CU_GET_PROC_ADDRESS_LEGACY_STREAM, "cuLaunchKernel",
                  CU_GET_PROC_ADDRESS_SUCCESS);
}

static void test_per_thread_falls_back_to_legacy(void **state) {
    (void)state;
    const unsigned long long ptds = CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
    /* No per-thread variant at all. */
    assert_lookup("cuMemAlloc", 13000, ptds, "cuMemAlloc_v2", CU_GET_PROC_ADDRESS_SUCCESS);
    /* Per-thread variants only since CUDA 7.0. */
    assert_lookup("cuLaunchKernel", 4000, ptds, "cuLaunchKernel", CU_GET_PROC_ADDRESS_SUCCESS);
}

static void test_invalid_arguments(void **state) {
    (void)state;
    void *got = NULL;
    assert_int_equal(get_proc("cuMemAlloc", NULL, 3020, 0, NULL), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(get_proc(NULL, &got, 3020, 0, NULL), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(get_proc("cuMemAlloc", &got, 3020, 4, NULL), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(get_proc("cuMemAlloc", &got, 3020, 3, NULL), CUDA_ERROR_INVALID_VALUE);
}

static void test_v1_abi(void **state) {
    (void)state;
    get_proc_v1_fn get_proc_v1;
    to_function(sym("cuGetProcAddress"), &get_proc_v1, sizeof get_proc_v1);
    void *got = NULL;
    assert_int_equal(get_proc_v1("cuMemAlloc", &got, 3020, 0), CUDA_SUCCESS);
    assert_ptr_equal(got, sym("cuMemAlloc_v2"));
    got = &got;
    assert_int_equal(get_proc_v1("cuNoSuchFunction", &got, 3020, 0), CUDA_SUCCESS);
    assert_null(got);
    assert_int_equal(get_proc_v1("cuMemAlloc", &got, 13010, 0), CUDA_ERROR_INVALID_VALUE);
}

static void test_export_table_not_supported(void **state) {
    (void)state;
    CUresult (*get_export_table)(const void **, const CUuuid *);
    to_function(sym("cuGetExportTable"), &get_export_table, sizeof get_export_table);
    const void *table = &table;
    CUuuid id = {{0}};
    assert_int_equal(get_export_table(&table, &id), CUDA_ERROR_NOT_SUPPORTED);
    assert_null(table);
}

/* An export the simulator does not implement is a clean error, not a crash.  If
 * simcuda ever implements cuArrayCreate_v2, pick another unimplemented export. */
static void test_unimplemented_export(void **state) {
    (void)state;
    CUresult (*array_create)(CUarray *, const CUDA_ARRAY_DESCRIPTOR *);
    to_function(sym("cuArrayCreate_v2"), &array_create, sizeof array_create);
    CUarray array = NULL;
    CUDA_ARRAY_DESCRIPTOR desc = {1, 1, CU_AD_FORMAT_UNSIGNED_INT8, 1};
    assert_int_equal(array_create(&array, &desc), CUDA_ERROR_NOT_SUPPORTED);
}

/* ---- setup ------------------------------------------------------------------------- */

static int open_library(void **state) {
    (void)state;
    lib = dlopen(lib_path, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        fprintf(stderr, "dlopen(%s): %s\n", lib_path, dlerror());
        return -1;
    }
    void *addr = sym("cuGetProcAddress_v2");
    if (!addr) {
        fprintf(stderr, "%s does not export cuGetProcAddress_v2\n", lib_path);
        return -1;
    }
    memcpy(&get_proc, &addr, sizeof addr);
    return 0;
}

static int close_library(void **state) {
    (void)state;
    return lib ? dlclose(lib) : 0;
}

/* argv wins over the environment; the facts file comes from $HOSTOFF_FACTS_DIR (tests/data). */
static int find_inputs(int argc, char **argv) {
    static char facts_buf[4096];
    lib_path = argc > 1 ? argv[1] : getenv("SIMCUDA_LIB");
    facts_path = argc > 2 ? argv[2] : NULL;
    const char *facts_dir = getenv("HOSTOFF_FACTS_DIR");
    if (!facts_path && facts_dir) {
        int n = snprintf(facts_buf, sizeof facts_buf, "%s/cudart13-proc-lookups.txt", facts_dir);
        facts_path = n > 0 && (size_t)n < sizeof facts_buf ? facts_buf : NULL;
    }
    if (!lib_path || !facts_path) {
        fprintf(stderr,
                "usage: %s SIMCUDA_LIB FACTS_FILE\n"
                "   or: SIMCUDA_LIB=... HOSTOFF_FACTS_DIR=... %s\n",
                argv[0], argv[0]);
        return -1;
    }
    return 0;
}

int main(int argc, char **argv) {
    if (find_inputs(argc, argv) != 0) return 2;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_variants_have_distinct_addresses),
        cmocka_unit_test(test_cudart_lookups),
        cmocka_unit_test(test_every_variant),
        cmocka_unit_test(test_current_variants),
        cmocka_unit_test(test_null_status_accepted),
        cmocka_unit_test(test_version_above_driver_rejected),
        cmocka_unit_test(test_unknown_symbol),
        cmocka_unit_test(test_version_not_sufficient),
        cmocka_unit_test(test_per_thread_variants),
        cmocka_unit_test(test_per_thread_falls_back_to_legacy),
        cmocka_unit_test(test_invalid_arguments),
        cmocka_unit_test(test_v1_abi),
        cmocka_unit_test(test_export_table_not_supported),
        cmocka_unit_test(test_unimplemented_export),
    };
    return cmocka_run_group_tests(tests, open_library, close_library);
}
