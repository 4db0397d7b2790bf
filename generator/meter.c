#include "generator/meter.h"

#include <lauxlib.h>

void ft__meter_charge(lua_State *L, ft_meter *m, long long n, const char *fn)
{
    m->instructions -= n;
    if (m->instructions > 0)
        return;
    m->exceeded(L, m, FT_METER_INSTRUCTIONS, fn);
    lua_error(L);
}

void ft__meter_match(lua_State *L, ft_meter *m, long long n, const char *fn)
{
    m->match_steps -= n;
    if (m->match_steps >= 0)
        return;
    m->exceeded(L, m, FT_METER_MATCH, fn);
    lua_error(L);
}
