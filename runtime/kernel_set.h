/* Loading the kernels of a kernel set (a pack's, or one compiled into the application). */
#ifndef FT_RUNTIME_KERNEL_SET_H
#define FT_RUNTIME_KERNEL_SET_H

#include "flashtune.h"
#include "generator/arch.h"
#include "runtime/driver.h"
#include "runtime/kernel.h"

/* Loads a kernel-set entry's cubin into the current context for device `arch`, with its
 * family's launch convention (as ft__session_load does for a compiled variant), after checking
 * that the family runs on arch and the cubin is for arch's SM and defines the entry
 * (FT_ERR_UNSUPPORTED otherwise: nothing is loaded). */
ft_status ft__kernel_set_load(const ft_cuda *cu, const ft_arch *arch, const ft_kernel_set_entry *e, ft_kernel *out,
                              ft_err *err);

#endif
