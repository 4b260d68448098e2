/* stderr logging: one line per message, "hostoff: " first. Formatted into a stack buffer and
 * written with one write(2): no allocation, safe from any hook; a thread-local guard drops a
 * message logged while another is being written on the same thread (re-entry). */
#ifndef HOSTOFF_LOG_H
#define HOSTOFF_LOG_H

#include "options.h"

void ho_log_set_level(enum ho_log_level level);
bool ho_log_enabled(enum ho_log_level level);
void ho_log(enum ho_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
