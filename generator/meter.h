/*
 * The meter of the spec sandbox: the budgets that the library functions doing work in C charge
 * as they go (the instruction hook never fires inside a C function), refilled by the sandbox at
 * the start of each call of the spec's code (generator/spec_lua.c).
 */
#ifndef FT_GENERATOR_METER_H
#define FT_GENERATOR_METER_H

#include <lua.h>

enum { FT_METER_INSTRUCTIONS = 0, FT_METER_MATCH = 1 };

typedef struct ft_meter ft_meter;

struct ft_meter {
    long long instructions; /* instructions left (the count hook spends them too) */
    long long match_steps;  /* pattern-matching steps left */
    /* Called once a budget is spent (what: FT_METER_*; fn: the library function, as
     * "table.move"); pushes the error message. The caller then raises it. */
    void (*exceeded)(lua_State *L, ft_meter *m, int what, const char *fn);
};

/* Spends n of the instruction budget on behalf of fn; raises the meter's error when it is gone. */
void ft__meter_charge(lua_State *L, ft_meter *m, long long n, const char *fn);

/* Spends n pattern-matching steps; raises the meter's error when they are gone. */
void ft__meter_match(lua_State *L, ft_meter *m, long long n, const char *fn);

#endif
