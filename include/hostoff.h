/* hostoff.h: what a program may tell libhostoff.so directly. Optional: the library works without
 * any of it. Look the functions up with dlsym(RTLD_DEFAULT, ...) so the program still runs when
 * the library is not preloaded. */
#ifndef HOSTOFF_H
#define HOSTOFF_H

#ifdef __cplusplus
extern "C" {
#endif

/* Marks the start of a training step: the lookahead policy then knows the step's length at once
 * instead of learning it from the launch sequence. */
void hostoff_mark_step(void);

#ifdef __cplusplus
}
#endif

#endif
