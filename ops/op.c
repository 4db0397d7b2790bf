#include "ops/op.h"

#include <string.h>

const ft_op *const ft__ops[] = {&ft__op_fwd, &ft__op_bwd, NULL};

const ft_op *ft__op_find(const char *name)
{
    int i;

    if (name == NULL)
        return NULL;
    for (i = 0; ft__ops[i] != NULL; i++)
        if (strcmp(ft__ops[i]->name, name) == 0)
            return ft__ops[i];
    return NULL;
}
