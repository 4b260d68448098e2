/* Kernel launches: cuLaunchKernel, cuLaunchKernelEx and cuLaunchCooperativeKernel, with
 * kernelParams or a packed `extra` buffer, legacy and per-thread. Parameter values are copied at
 * launch, as the driver does, so the caller may reuse its argument storage at once. */
#include "sim.h"

#include <stdlib.h>
#include <string.h>

/* Reads the packed buffer and its size out of an `extra` array. */
static bool extra_buffer(void **extra, const void **buf, size_t *size) {
    *buf = NULL;
    *size = 0;
    bool have_size = false;
    for (size_t i = 0; extra[i] != CU_LAUNCH_PARAM_END; i += 2) {
        if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER) {
            *buf = extra[i + 1];
        } else if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE) {
            *size = *(size_t *)extra[i + 1];
            have_size = true;
        } else {
            return false;
        }
    }
    return *buf != NULL && have_size;
}

CUresult sim_build_kernel_op(struct sim_func *f, struct sim_stream *s, const unsigned grid[3],
                             const unsigned block[3], unsigned shared, void **params, void **extra,
                             struct sim_op **out) {
    for (int i = 0; i < 3; i++)
        if (grid[i] == 0 || block[i] == 0) return CUDA_ERROR_INVALID_VALUE;
    if ((uint64_t)block[0] * block[1] * block[2] > 1024 || block[2] > 64)
        return CUDA_ERROR_INVALID_VALUE;
    if (grid[1] > 65535 || grid[2] > 65535) return CUDA_ERROR_INVALID_VALUE;
    if (shared > 232448) return CUDA_ERROR_INVALID_VALUE;
    if (f->nparams > 0 && params == NULL && extra == NULL) return CUDA_ERROR_INVALID_VALUE;
    if (params != NULL && extra != NULL) return CUDA_ERROR_INVALID_VALUE;
    const void *packed = NULL;
    size_t packed_size = 0;
    if (extra != NULL && f->nparams > 0) {
        /* A buffer shorter than the layout is accepted, as NVIDIA's driver accepts it (NCCL
         * passes the bytes its 4 KiB argument struct really uses): what lies past the given size
         * reads as zero here, undefined on a device. */
        if (!extra_buffer(extra, &packed, &packed_size)) return CUDA_ERROR_INVALID_VALUE;
    }
    struct sim_op *op = sim_op_new(SIM_OP_KERNEL, s);
    if (op == NULL) return CUDA_ERROR_OUT_OF_MEMORY;
    struct sim_kernel_op *k = &op->u.kernel;
    k->func = f;
    memcpy(k->grid, grid, sizeof k->grid);
    memcpy(k->block, block, sizeof k->block);
    k->shared_bytes = shared;
    if (f->nparams > 0) {
        k->argbuf = calloc(1, f->argbytes);
        k->params = calloc((size_t)f->nparams, sizeof *k->params);
        if (k->argbuf == NULL || k->params == NULL) {
            sim_op_release(op);
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        for (int i = 0; i < f->nparams; i++) {
            const struct sim_param *p = &f->params[i];
            k->params[i] = k->argbuf + p->offset;
            if (packed != NULL) {
                size_t have = packed_size > p->offset ? packed_size - p->offset : 0;
                memcpy(k->argbuf + p->offset, (const char *)packed + p->offset,
                       have < p->size ? have : p->size);
            } else {
                memcpy(k->argbuf + p->offset, params[i], p->size);
            }
            const unsigned char *v8 = k->argbuf + p->offset;
            if (p->type == SIM_T_PTR) {
                uint64_t v;
                memcpy(&v, v8, sizeof v);
                if (v != 0) sim_op_add_ref(op, v, 1);
            } else if (p->type == SIM_T_BYTES) {
                /* A by-value struct: every aligned word naming memory the simulator manages is a
                 * pointer the kernel may follow (hazard detection must see what a real kernel
                 * would touch, not only what a library can attribute). */
                for (size_t off = 0; off + 8 <= p->size; off += 8) {
                    uint64_t v, ext;
                    memcpy(&v, v8 + off, sizeof v);
                    if (v != 0 && sim_range_find(v) != NULL) sim_op_add_ref(op, v, 1);
                    /* A tensor map the simulator made reaches its global range. */
                    if (off + 128 <= p->size && sim_tensor_map_decode(v8 + off, &v, &ext))
                        sim_op_add_ref(op, v, 1);
                }
            }
        }
    }
    *out = op;
    return CUDA_SUCCESS;
}

static CUresult launch(CUfunction h, const unsigned grid[3], const unsigned block[3],
                       unsigned shared, CUstream hs, void **params, void **extra, bool pt) {
    struct sim_ctx *c;
    sim_bill(SIM_COST_LAUNCH_KERNEL, SIM_AT_DEVICE, 0);
    CUresult rc = sim_require_ctx(&c);
    if (rc != CUDA_SUCCESS) return rc;
    struct sim_func *f = sim_func_from_handle(h);
    if (f == NULL) return CUDA_ERROR_INVALID_HANDLE;
    struct sim_stream *s = sim_stream_resolve(hs, pt, &rc);
    if (s == NULL) return rc;
    if ((rc = sim_fail_check("cuLaunchKernel")) != CUDA_SUCCESS) return rc;
    sim_lock();
    if (sim.sticky != CUDA_SUCCESS) {
        rc = sim.sticky;
        sim_unlock();
        return rc;
    }
    struct sim_op *op = NULL;
    rc = sim_build_kernel_op(f, s, grid, block, shared, params, extra, &op);
    if (rc == CUDA_SUCCESS) {
        if (!sim_capture_intercept(s, op, &rc)) {
            sim_stream_admit(s, op);
            sim_op_enqueue(op);
        }
        sim_op_release(op);
    }
    sim_unlock();
    return rc;
}

static CUresult launch_kernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                              unsigned by, unsigned bz, unsigned shared, CUstream s, void **params,
                              void **extra, bool pt) {
    const unsigned grid[3] = {gx, gy, gz}, block[3] = {bx, by, bz};
    return launch(f, grid, block, shared, s, params, extra, pt);
}

static CUresult launch_ex(const CUlaunchConfig *cfg, CUfunction f, void **params, void **extra,
                          bool pt) {
    if (cfg == NULL) return CUDA_ERROR_INVALID_VALUE;
    if (cfg->numAttrs > 0 && cfg->attrs == NULL) return CUDA_ERROR_INVALID_VALUE;
    const unsigned grid[3] = {cfg->gridDimX, cfg->gridDimY, cfg->gridDimZ};
    const unsigned block[3] = {cfg->blockDimX, cfg->blockDimY, cfg->blockDimZ};
    return launch(f, grid, block, cfg->sharedMemBytes, cfg->hStream, params, extra, pt);
}

SIM_EXPORT CUresult cuLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                                   unsigned int bx, unsigned int by, unsigned int bz,
                                   unsigned int shared, CUstream s, void **params, void **extra) {
    return launch_kernel(f, gx, gy, gz, bx, by, bz, shared, s, params, extra, false);
}

SIM_EXPORT CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned int gx, unsigned int gy,
                                        unsigned int gz, unsigned int bx, unsigned int by,
                                        unsigned int bz, unsigned int shared, CUstream s,
                                        void **params, void **extra) {
    return launch_kernel(f, gx, gy, gz, bx, by, bz, shared, s, params, extra, true);
}

SIM_EXPORT CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned int gx, unsigned int gy,
                                              unsigned int gz, unsigned int bx, unsigned int by,
                                              unsigned int bz, unsigned int shared, CUstream s,
                                              void **params) {
    return launch_kernel(f, gx, gy, gz, bx, by, bz, shared, s, params, NULL, false);
}

SIM_EXPORT CUresult cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned int gx, unsigned int gy,
                                                   unsigned int gz, unsigned int bx,
                                                   unsigned int by, unsigned int bz,
                                                   unsigned int shared, CUstream s, void **params) {
    return launch_kernel(f, gx, gy, gz, bx, by, bz, shared, s, params, NULL, true);
}

SIM_EXPORT CUresult cuLaunchKernelEx(const CUlaunchConfig *cfg, CUfunction f, void **params,
                                     void **extra) {
    return launch_ex(cfg, f, params, extra, false);
}

SIM_EXPORT CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig *cfg, CUfunction f, void **params,
                                          void **extra) {
    return launch_ex(cfg, f, params, extra, true);
}
