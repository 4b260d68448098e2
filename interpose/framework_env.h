/* The frameworks' allocators, chosen for the library where the user has not (framework_env.c). */
#ifndef HOSTOFF_FRAMEWORK_ENV_H
#define HOSTOFF_FRAMEWORK_ENV_H

/* Once the library is initialised in a process that uses CUDA: one line saying what was chosen
 * for a framework the process has loaded. */
void ho_framework_env_say(void);

#endif
