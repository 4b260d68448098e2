/* Module images, libraries, functions and kernels.
 *
 * An image is NUL-terminated text:
 *     simcuda-module 1
 *     kernel <name> <type> <type> ... [ns=<virtual duration in ns>|ns=param:<index>]
 * Types: ptr u8 u16 u32 u64 i32 i64 f32 f64 bN (a by-value struct of N bytes, 8-aligned).
 * The body of kernel <name> is the host function void <name>(void **params) found with
 * dlsym(RTLD_DEFAULT); a kernel with no such function has an empty body (its duration only).
 * ns=param:N (an extension) takes the duration from u64 parameter N, for replayed workloads. */
#include "sim.h"

#include <ctype.h>
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool parse_type(const char *tok, struct sim_param *p) {
    static const struct {
        const char *name;
        enum sim_param_type type;
        size_t size;
    } types[] = {
        {"ptr", SIM_T_PTR, 8}, {"u8", SIM_T_U8, 1},   {"u16", SIM_T_U16, 2},
        {"u32", SIM_T_U32, 4}, {"u64", SIM_T_U64, 8}, {"i32", SIM_T_I32, 4},
        {"i64", SIM_T_I64, 8}, {"f32", SIM_T_F32, 4}, {"f64", SIM_T_F64, 8},
    };
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        if (strcmp(tok, types[i].name) == 0) {
            p->type = types[i].type;
            p->size = types[i].size;
            return true;
        }
    }
    if (tok[0] == 'b' && tok[1] >= '1' && tok[1] <= '9') {
        char *end = NULL;
        unsigned long n = strtoul(tok + 1, &end, 10);
        if (*end != '\0' || n == 0 || n > 4096) return false;
        p->type = SIM_T_BYTES;
        p->size = n;
        return true;
    }
    return false;
}

/* Lays parameters out as a C compiler lays out a struct of them: each at its natural alignment
 * (by-value structs 8-aligned). An 8-aligned struct's sizeof is a multiple of 8, so the next
 * parameter after a bN starts N rounded up to 8 bytes later, although bN's reported size is N.
 * The packed size is the struct's sizeof (padded to its largest alignment): that is what a
 * caller passes as CU_LAUNCH_PARAM_BUFFER_SIZE for the C struct of the same members. */
static void layout(struct sim_func *f) {
    size_t off = 0, max_align = 1;
    for (int i = 0; i < f->nparams; i++) {
        struct sim_param *p = &f->params[i];
        size_t align = p->type == SIM_T_BYTES ? 8 : p->size;
        size_t stride = p->type == SIM_T_BYTES ? (p->size + 7) & ~(size_t)7 : p->size;
        if (align > max_align) max_align = align;
        off = (off + align - 1) & ~(align - 1);
        p->offset = off;
        off += stride;
    }
    f->argbytes = (off + max_align - 1) & ~(max_align - 1);
}

static bool parse_kernel_line(char *line, struct sim_func *f) {
    char *save = NULL;
    char *tok = strtok_r(line, " \t", &save); /* "kernel" */
    tok = strtok_r(NULL, " \t", &save);
    if (tok == NULL || strlen(tok) >= sizeof f->name) return false;
    snprintf(f->name, sizeof f->name, "%s", tok);
    f->magic = SIM_MAGIC_FUNC;
    f->default_ns = 1000;
    f->ns_param = -1;
    while ((tok = strtok_r(NULL, " \t", &save)) != NULL) {
        if (strncmp(tok, "ns=", 3) == 0) {
            char *end = NULL;
            /* Digits only, and in range: strtol/strtoull would take "" as 0, and saturate an
             * overflowing duration silently. */
            if (strncmp(tok + 3, "param:", 6) == 0) {
                if (!isdigit((unsigned char)tok[9])) return false;
                long idx = strtol(tok + 9, &end, 10);
                if (*end != '\0' || idx < 0 || idx >= f->nparams ||
                    f->params[idx].type != SIM_T_U64)
                    return false;
                f->ns_param = (int)idx;
            } else {
                if (!isdigit((unsigned char)tok[3])) return false;
                errno = 0;
                unsigned long long ns = strtoull(tok + 3, &end, 10);
                if (*end != '\0' || errno == ERANGE) return false;
                f->default_ns = ns;
            }
            continue;
        }
        struct sim_param p;
        if (!parse_type(tok, &p)) return false;
        struct sim_param *np = realloc(f->params, (size_t)(f->nparams + 1) * sizeof *np);
        if (np == NULL) return false;
        f->params = np;
        f->params[f->nparams++] = p;
    }
    layout(f);
    f->body = (sim_kernel_body)(uintptr_t)dlsym(RTLD_DEFAULT, f->name);
    return true;
}

void sim_module_free(struct sim_module *m) {
    if (m == NULL) return;
    for (int i = 0; i < m->nfuncs; i++) {
        m->funcs[i].magic = SIM_MAGIC_DEAD;
        free(m->funcs[i].params);
    }
    free(m->funcs);
    m->magic = SIM_MAGIC_DEAD;
    free(m);
}

CUresult sim_module_parse(const char *image, struct sim_module **out) {
    if (image == NULL) return CUDA_ERROR_INVALID_VALUE;
    if (strncmp(image, "simcuda-module 1", 16) != 0 ||
        (image[16] != '\n' && image[16] != '\0' && image[16] != '\r'))
        return CUDA_ERROR_INVALID_IMAGE;
    size_t len = strnlen(image, 1 << 24);
    char *text = malloc(len + 1);
    struct sim_module *m = calloc(1, sizeof *m);
    if (text == NULL || m == NULL) {
        free(text);
        free(m);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    memcpy(text, image, len);
    text[len] = '\0';
    m->magic = SIM_MAGIC_MODULE;
    CUresult rc = CUDA_SUCCESS;
    char *save = NULL;
    char *line = strtok_r(text, "\n", &save); /* the header */
    while ((line = strtok_r(NULL, "\n", &save)) != NULL) {
        size_t n = strlen(line);
        if (n > 0 && line[n - 1] == '\r') line[n - 1] = '\0';
        char *p = line;
        while (*p == ' ' || *p == '\t')
            p++;
        if (*p == '\0' || *p == '#') continue;
        if (strncmp(p, "kernel", 6) != 0 || (p[6] != ' ' && p[6] != '\t')) {
            rc = CUDA_ERROR_INVALID_IMAGE;
            break;
        }
        struct sim_func *nf = realloc(m->funcs, (size_t)(m->nfuncs + 1) * sizeof *nf);
        if (nf == NULL) {
            rc = CUDA_ERROR_OUT_OF_MEMORY;
            break;
        }
        m->funcs = nf;
        memset(&m->funcs[m->nfuncs], 0, sizeof *nf);
        m->nfuncs++;
        if (!parse_kernel_line(p, &m->funcs[m->nfuncs - 1])) {
            rc = CUDA_ERROR_INVALID_IMAGE;
            break;
        }
    }
    free(text);
    if (rc != CUDA_SUCCESS) {
        sim_module_free(m);
        return rc;
    }
    for (int i = 0; i < m->nfuncs; i++)
        m->funcs[i].module = m;
    *out = m;
    return CUDA_SUCCESS;
}

struct sim_func *sim_func_from_handle(const void *h) {
    struct sim_func *f = (struct sim_func *)h;
    if (f == NULL || f->magic != SIM_MAGIC_FUNC) return NULL;
    return f;
}

static struct sim_func *module_find(struct sim_module *m, const char *name) {
    for (int i = 0; i < m->nfuncs; i++)
        if (strcmp(m->funcs[i].name, name) == 0) return &m->funcs[i];
    return NULL;
}

static struct sim_module *module_from_handle(const void *h, bool library) {
    struct sim_module *m = (struct sim_module *)h;
    if (m == NULL || m->magic != SIM_MAGIC_MODULE || m->is_library != library) return NULL;
    return m;
}

static char *read_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (f == NULL) return NULL;
    char *buf = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (len + 4096 + 1 > cap) {
            cap = cap ? cap * 2 : 8192;
            char *n = realloc(buf, cap);
            if (n == NULL) {
                free(buf);
                fclose(f);
                return NULL;
            }
            buf = n;
        }
        size_t got = fread(buf + len, 1, 4096, f);
        len += got;
        if (got == 0) break;
    }
    fclose(f);
    buf[len] = '\0';
    return buf;
}

static CUresult load(const char *image, bool library, struct sim_module **out) {
    struct sim_ctx *c;
    CUresult rc = library ? sim_enter() : sim_require_ctx(&c);
    if (rc != CUDA_SUCCESS) return rc;
    if (out == NULL || image == NULL) return CUDA_ERROR_INVALID_VALUE;
    rc = sim_module_parse(image, out);
    if (rc == CUDA_SUCCESS) (*out)->is_library = library;
    return rc;
}

SIM_EXPORT CUresult cuModuleLoadData(CUmodule *module, const void *image) {
    return load(image, false, (struct sim_module **)module);
}

SIM_EXPORT CUresult cuModuleLoadDataEx(CUmodule *module, const void *image, unsigned int n,
                                       CUjit_option *options, void **values) {
    (void)n;
    (void)options;
    (void)values;
    return load(image, false, (struct sim_module **)module);
}

SIM_EXPORT CUresult cuModuleLoadFatBinary(CUmodule *module, const void *image) {
    return load(image, false, (struct sim_module **)module);
}

SIM_EXPORT CUresult cuModuleLoad(CUmodule *module, const char *path) {
    if (path == NULL) return CUDA_ERROR_INVALID_VALUE;
    char *image = read_file(path);
    if (image == NULL) return CUDA_ERROR_FILE_NOT_FOUND;
    CUresult rc = load(image, false, (struct sim_module **)module);
    free(image);
    return rc;
}

SIM_EXPORT CUresult cuModuleUnload(CUmodule hmod) {
    CUresult rc = sim_enter();
    if (rc != CUDA_SUCCESS) return rc;
    struct sim_module *m = module_from_handle(hmod, false);
    if (m == NULL) return CUDA_ERROR_INVALID_HANDLE;
    /* Queued launches of its functions must finish first: they hold pointers to them. */
    sim_lock();
    for (int d = 0; d < sim.ndevices; d++)
        sim_device_drain(&sim.devices[d]);
    sim_unlock();
    sim_module_free(m);
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuModuleGetFunction(CUfunction *hfunc, CUmodule hmod, const char *name) {
    CUresult rc = sim_enter();
    if (rc != CUDA_SUCCESS) return rc;
    struct sim_module *m = module_from_handle(hmod, false);
    if (m == NULL) return CUDA_ERROR_INVALID_HANDLE;
    if (hfunc == NULL || name == NULL) return CUDA_ERROR_INVALID_VALUE;
    struct sim_func *f = module_find(m, name);
    if (f == NULL) return CUDA_ERROR_NOT_FOUND;
    *hfunc = (CUfunction)f;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuModuleGetFunctionCount(unsigned int *count, CUmodule hmod) {
    CUresult rc = sim_enter();
    if (rc != CUDA_SUCCESS) return rc;
    struct sim_module *m = module_from_handle(hmod, false);
    if (m == NULL) return CUDA_ERROR_INVALID_HANDLE;
    if (count == NULL) return CUDA_ERROR_INVALID_VALUE;
    *count = (unsigned)m->nfuncs;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuModuleGetGlobal_v2(CUdeviceptr *dptr, size_t *bytes, CUmodule hmod,
                                         const char *name) {
    CUresult rc = sim_enter();
    if (rc != CUDA_SUCCESS) return rc;
    (void)dptr;
    (void)bytes;
    (void)name;
    /* Text images declare no globals. */
    return module_from_handle(hmod, false) == NULL ? CUDA_ERROR_INVALID_HANDLE
                                                   : CUDA_ERROR_NOT_FOUND;
}

SIM_EXPORT CUresult cuLibraryLoadData(CUlibrary *library, const void *code, CUjit_option *jit_opts,
                                      void **jit_vals, unsigned int njit, CUlibraryOption *lib_opts,
                                      void **lib_vals, unsigned int nlib) {
    (void)jit_opts;
    (void)jit_vals;
    (void)njit;
    (void)lib_opts;
    (void)lib_vals;
    (void)nlib;
    return load(code, true, (struct sim_module **)library);
}

SIM_EXPORT CUresult cuLibraryLoadFromFile(CUlibrary *library, const char *path,
                                          CUjit_option *jit_opts, void **jit_vals,
                                          unsigned int njit, CUlibraryOption *lib_opts,
                                          void **lib_vals, unsigned int nlib) {
    if (path == NULL) return CUDA_ERROR_INVALID_VALUE;
    char *image = read_file(path);
    if (image == NULL) return CUDA_ERROR_FILE_NOT_FOUND;
    CUresult rc =
        cuLibraryLoadData(library, image, jit_opts, jit_vals, njit, lib_opts, lib_vals, nlib);
    free(image);
    return rc;
}

SIM_EXPORT CUresult cuLibraryUnload(CUlibrary library) {
    CUresult rc = sim_enter();
    if (rc != CUDA_SUCCESS) return rc;
    struct sim_module *m = module_from_handle(library, true);
    if (m == NULL) return CUDA_ERROR_INVALID_HANDLE;
    sim_lock();
    for (int d = 0; d < sim.ndevices; d++)
        sim_device_drain(&sim.devices[d]);
    sim_unlock();
    sim_module_free(m);
    return CUDA_SUCCESS;
}

/* A CUkernel is the same object as the CUfunction it yields: cuLaunchKernel accepts either. */
SIM_EXPORT CUresult cuLibraryGetKernel(CUkernel *kernel, CUlibrary library, const char *name) {
    CUresult rc = sim_enter();
    if (rc != CUDA_SUCCESS) return rc;
    struct sim_module *m = module_from_handle(library, true);
    if (m == NULL) return CUDA_ERROR_INVALID_HANDLE;
    if (kernel == NULL || name == NULL) return CUDA_ERROR_INVALID_VALUE;
    struct sim_func *f = module_find(m, name);
    if (f == NULL) return CUDA_ERROR_NOT_FOUND;
    *kernel = (CUkernel)f;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuLibraryGetKernelCount(unsigned int *count, CUlibrary library) {
    CUresult rc = sim_enter();
    if (rc != CUDA_SUCCESS) return rc;
    struct sim_module *m = module_from_handle(library, true);
    if (m == NULL) return CUDA_ERROR_INVALID_HANDLE;
    if (count == NULL) return CUDA_ERROR_INVALID_VALUE;
    *count = (unsigned)m->nfuncs;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuLibraryEnumerateKernels(CUkernel *kernels, unsigned int n,
                                              CUlibrary library) {
    CUresult rc = sim_enter();
    if (rc != CUDA_SUCCESS) return rc;
    struct sim_module *m = module_from_handle(library, true);
    if (m == NULL) return CUDA_ERROR_INVALID_HANDLE;
    if (kernels == NULL) return CUDA_ERROR_INVALID_VALUE;
    for (unsigned i = 0; i < n && i < (unsigned)m->nfuncs; i++)
        kernels[i] = (CUkernel)&m->funcs[i];
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuLibraryGetModule(CUmodule *module, CUlibrary library) {
    CUresult rc = sim_enter();
    if (rc != CUDA_SUCCESS) return rc;
    (void)module;
    return module_from_handle(library, true) == NULL ? CUDA_ERROR_INVALID_HANDLE
                                                     : CUDA_ERROR_NOT_SUPPORTED;
}

SIM_EXPORT CUresult cuKernelGetFunction(CUfunction *func, CUkernel kernel) {
    CUresult rc = sim_enter();
    if (rc != CUDA_SUCCESS) return rc;
    struct sim_func *f = sim_func_from_handle(kernel);
    if (f == NULL) return CUDA_ERROR_INVALID_HANDLE;
    if (func == NULL) return CUDA_ERROR_INVALID_VALUE;
    *func = (CUfunction)f;
    return CUDA_SUCCESS;
}

static CUresult get_name(const char **name, const void *h) {
    CUresult rc = sim_enter();
    if (rc != CUDA_SUCCESS) return rc;
    struct sim_func *f = sim_func_from_handle(h);
    if (f == NULL) return CUDA_ERROR_INVALID_HANDLE;
    if (name == NULL) return CUDA_ERROR_INVALID_VALUE;
    *name = f->name;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuFuncGetName(const char **name, CUfunction h) {
    return get_name(name, h);
}

SIM_EXPORT CUresult cuKernelGetName(const char **name, CUkernel h) {
    return get_name(name, h);
}

static CUresult param_info(const void *h, size_t index, size_t *offset, size_t *size) {
    CUresult rc = sim_enter();
    if (rc != CUDA_SUCCESS) return rc;
    struct sim_func *f = sim_func_from_handle(h);
    if (f == NULL) return CUDA_ERROR_INVALID_HANDLE;
    if (offset == NULL || index >= (size_t)f->nparams) return CUDA_ERROR_INVALID_VALUE;
    *offset = f->params[index].offset;
    if (size != NULL) *size = f->params[index].size;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuFuncGetParamInfo(CUfunction h, size_t index, size_t *offset, size_t *size) {
    return param_info(h, index, offset, size);
}

SIM_EXPORT CUresult cuKernelGetParamInfo(CUkernel h, size_t index, size_t *offset, size_t *size) {
    return param_info(h, index, offset, size);
}

SIM_EXPORT CUresult cuFuncGetModule(CUmodule *module, CUfunction h) {
    CUresult rc = sim_enter();
    if (rc != CUDA_SUCCESS) return rc;
    struct sim_func *f = sim_func_from_handle(h);
    if (f == NULL) return CUDA_ERROR_INVALID_HANDLE;
    if (module == NULL) return CUDA_ERROR_INVALID_VALUE;
    *module = (CUmodule)f->module;
    return CUDA_SUCCESS;
}

/* Function attributes: what an sm_90 kernel with no special needs reports. */
static int func_attribute(CUfunction_attribute a) {
    switch (a) {
    case CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK:
        return 1024;
    case CU_FUNC_ATTRIBUTE_NUM_REGS:
        return 32;
    case CU_FUNC_ATTRIBUTE_PTX_VERSION:
        return 90;
    case CU_FUNC_ATTRIBUTE_BINARY_VERSION:
        return 90;
    case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES:
        return 49152;
    default:
        return 0;
    }
}

SIM_EXPORT CUresult cuFuncGetAttribute(int *pi, CUfunction_attribute attrib, CUfunction h) {
    CUresult rc = sim_enter();
    if (rc != CUDA_SUCCESS) return rc;
    if (sim_func_from_handle(h) == NULL) return CUDA_ERROR_INVALID_HANDLE;
    if (pi == NULL || (int)attrib < 0 || attrib >= CU_FUNC_ATTRIBUTE_MAX)
        return CUDA_ERROR_INVALID_VALUE;
    *pi = func_attribute(attrib);
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuKernelGetAttribute(int *pi, CUfunction_attribute attrib, CUkernel h,
                                         CUdevice dev) {
    (void)dev;
    return cuFuncGetAttribute(pi, attrib, (CUfunction)h);
}

SIM_EXPORT CUresult cuFuncSetAttribute(CUfunction h, CUfunction_attribute attrib, int value) {
    CUresult rc = sim_enter();
    if (rc != CUDA_SUCCESS) return rc;
    (void)value;
    if (sim_func_from_handle(h) == NULL) return CUDA_ERROR_INVALID_HANDLE;
    if ((int)attrib < 0 || attrib >= CU_FUNC_ATTRIBUTE_MAX) return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuKernelSetAttribute(CUfunction_attribute attrib, int value, CUkernel h,
                                         CUdevice dev) {
    (void)dev;
    return cuFuncSetAttribute((CUfunction)h, attrib, value);
}

SIM_EXPORT CUresult cuFuncSetCacheConfig(CUfunction h, CUfunc_cache config) {
    CUresult rc = sim_enter();
    if (rc != CUDA_SUCCESS) return rc;
    (void)config;
    return sim_func_from_handle(h) == NULL ? CUDA_ERROR_INVALID_HANDLE : CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuKernelSetCacheConfig(CUkernel h, CUfunc_cache config, CUdevice dev) {
    (void)dev;
    return cuFuncSetCacheConfig((CUfunction)h, config);
}

SIM_EXPORT CUresult cuFuncIsLoaded(CUfunctionLoadingState *state, CUfunction h) {
    CUresult rc = sim_enter();
    if (rc != CUDA_SUCCESS) return rc;
    if (sim_func_from_handle(h) == NULL) return CUDA_ERROR_INVALID_HANDLE;
    if (state == NULL) return CUDA_ERROR_INVALID_VALUE;
    *state = CU_FUNCTION_LOADING_STATE_LOADED;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuFuncLoad(CUfunction h) {
    CUresult rc = sim_enter();
    if (rc != CUDA_SUCCESS) return rc;
    return sim_func_from_handle(h) == NULL ? CUDA_ERROR_INVALID_HANDLE : CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuModuleGetLoadingMode(CUmoduleLoadingMode *mode) {
    CUresult rc = sim_enter();
    if (rc != CUDA_SUCCESS) return rc;
    if (mode == NULL) return CUDA_ERROR_INVALID_VALUE;
    *mode = CU_MODULE_EAGER_LOADING;
    return CUDA_SUCCESS;
}
