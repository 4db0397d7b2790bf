/* A compilation target and the limits a kernel must respect on it. */
#ifndef FT_GENERATOR_ARCH_H
#define FT_GENERATOR_ARCH_H

#include "common/error.h"

typedef struct ft_arch {
    char name[16];                 /* NVRTC target: "sm_80", "sm_90", "sm_90a" */
    int cc;                        /* compute capability as major*10+minor: 80, 86, 89, 90 */
    int sms;                       /* multiprocessors; 0 when no device is present */
    long long smem_per_block;      /* opt-in shared memory per block, bytes */
    long long smem_per_sm;         /* shared memory per multiprocessor, bytes */
    long long smem_reserved;       /* reserved by the system per block, bytes */
    int regs_per_sm;
    int regs_per_block;
    int regs_per_thread;
    int threads_per_block;
    int threads_per_sm;
    int from_device;               /* 1: read from a GPU through the driver; 0: built-in table */
    char device_name[128];         /* "" for the built-in table */
} ft_arch;

/* The built-in limits for a target name ("sm_80", "sm_86", "sm_89", "sm_90", "sm_90a"),
 * from the CUDA C++ Programming Guide's table of compute capabilities. */
ft_status ft__arch_builtin(const char *name, ft_arch *out, ft_err *err);

/* "sm_80, sm_86, sm_89, sm_90, sm_90a" — for messages. */
const char *ft__arch_known(void);

#endif
