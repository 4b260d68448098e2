/* What vmmfacts' sections share: vmmfacts.c holds the program, its JSON, its failure recovery and
 * the facts, calls, bw and costs sections; vmmqueue.c the queue section (launch queue depth, and
 * launches while another thread remaps). The rules of the program's top comment hold for every
 * section: a driver call that must succeed goes through KIT_CK, which ends only the section
 * (from the thread that runs the sections: the main one). */
#ifndef HOSTOFF_GPU_VMMFACTS_H
#define HOSTOFF_GPU_VMMFACTS_H

#include "kit.h"

struct vmmfacts_opt {
    const char *cubin, *json;
    bool quick;
    uint64_t bw_mib;
    int reps;
    unsigned sections;
};

extern struct vmmfacts_opt vf_opt;
extern struct kit_module vf_mod;
extern uint64_t vf_alloc_cap;         /* the most one buffer may take: free device memory / 16 */
extern CUmemLocationType vf_host_loc; /* HOST, else HOST_NUMA, else 0 (none works) */

/* A figure (absent when not finite: never measured), a string, and the file replaced whole. */
void vf_jnum(const char *key, double v);
void vf_jstr(const char *key, const char *v);
void vf_jflush(void);

const char *vf_loc_name(CUmemLocationType t);
const CUmemAccessDesc *vf_device_access(void);

/* The row label, allocation properties and size (mib rounded up to the location's granularity)
 * of one measurement; false (and a "skipped" line) when over a sixteenth of free memory. */
bool vf_measurement(CUmemLocationType loc, uint64_t mib, const char *what, char *label,
                    size_t labcap, CUmemAllocationProp *p, size_t *size);

/* Maps h at va, gives the device access and unmaps it, each call timed (seconds, t[0..2]). */
CUresult vf_timed_map_access_unmap(CUdeviceptr va, size_t size, CUmemGenericAllocationHandle h,
                                   double t[3]);

/* A host pool slot as the engine keeps one: a handle created once and mapped, with access, at
 * its own window; an eviction maps it again at a second address (va), gives the device access
 * and unmaps it. vf_slot_open reserves both addresses (KIT_CK) and returns the driver's answer
 * to creating, mapping and granting access; vf_slot_close undoes whatever was done. */
struct vf_slot {
    CUdeviceptr window, va;
    CUmemGenericAllocationHandle h;
    size_t size;
    bool made, at_window;
};
CUresult vf_slot_open(struct vf_slot *s, const CUmemAllocationProp *p, size_t size);
void vf_slot_close(struct vf_slot *s);

/* Milliseconds of device time for `reps` calls of launch(arg, s) on stream s, between two events
 * (KIT_CK on failure). */
double vf_events_ms(CUstream s, int reps, CUresult (*launch)(void *arg, CUstream s), void *arg);

void vf_section_queue(void);

#endif
