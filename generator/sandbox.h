/*
 * The library functions of the spec sandbox that do work in C without returning to Lua, made
 * to count it. The instruction hook never fires inside a C function, so a function whose work
 * has no bound of its own (a pattern that backtracks exponentially, string.rep of an empty
 * string a quadrillion times, table.move over a huge range, table.insert into a table whose
 * __len says 2^50) charges a meter as it goes and raises a Lua error once the meter is spent.
 *
 * What the meter holds is spent by the current call of the spec's code (the chunk while it
 * loads, or one call of a spec function); generator/spec_lua.c refills it at the start of each.
 */
#ifndef FT_GENERATOR_SANDBOX_H
#define FT_GENERATOR_SANDBOX_H

#include <lua.h>

#include "generator/meter.h"

/* Replaces, in the global tables string and table, the functions that can loop in C with
 * versions that charge m (which must outlive the state):
 *   string.find, string.match, string.gmatch, string.gsub: Lua 5.4 pattern matching
 *     (reference manual §6.4.1), one step per pattern item tried at a subject position,
 *     per character a quantifier or %b scans, per 64 bytes a plain find or a back-reference
 *     compares (generator/pattern.c);
 *   string.rep: an empty result costs nothing (the stock one loops n times to make it); the
 *     rest is the allocation of the result, which the sandbox's allocator counts;
 *   string.byte, table.unpack: one instruction per value returned;
 *   table.insert, table.remove, table.move, table.concat: one per element they touch;
 *   table.sort: one per comparison that is not a call of a Lua function (whose
 *     instructions count themselves), more for long strings.
 * Their results and errors are those of the stock functions. Runs in protected mode (it
 * allocates). */
void ft__sandbox_bound_libs(lua_State *L, ft_meter *m);

#endif
