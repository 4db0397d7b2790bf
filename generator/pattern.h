/* Lua 5.4 pattern matching that counts its steps against the sandbox's meter. */
#ifndef FT_GENERATOR_PATTERN_H
#define FT_GENERATOR_PATTERN_H

#include <lua.h>

#include "generator/meter.h"

/* The four pattern functions alone, set in the table at idx (generator/pattern.c). */
void ft__pattern_install(lua_State *L, int idx, ft_meter *m);

#endif
