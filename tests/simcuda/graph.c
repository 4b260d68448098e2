/* Placeholder until stream capture lands (replaced wholesale by the capture/graph work). */
#include "sim.h"
bool sim_capture_intercept(struct sim_stream *s, struct sim_op *op, CUresult *err) {
    (void)s; (void)op; (void)err; return false;
}
CUresult sim_capture_check_sync(struct sim_stream *s) { (void)s; return CUDA_SUCCESS; }
CUresult sim_capture_check_unsafe(void) { return CUDA_SUCCESS; }
void sim_capture_event_record(struct sim_stream *s, struct sim_event *e) { (void)s; (void)e; }
bool sim_capture_stream_wait(struct sim_stream *s, struct sim_event *e, CUresult *err) {
    (void)s; (void)e; (void)err; return false;
}
