/* The sandbox's bounded library functions (generator/sandbox.h, generator/pattern.c) against
 * the stock Lua 5.4 ones: tests/pattern_cases.lua runs in a state with the stock libraries and
 * in one with the bounded functions in their place, and every case must give the same results
 * (or the same error) in both. Then the meter: each budget ends a runaway with its message. */
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

#include "ft_test.h"
#include "generator/sandbox.h"

#define CASES FT_SOURCE_DIR "/tests/pattern_cases.lua"

static void push_exceeded(lua_State *L, ft_meter *m, int what, const char *fn)
{
    (void)m;
    lua_pushfstring(L, "%s budget exceeded in %s",
                    what == FT_METER_MATCH ? "pattern matching" : "instruction", fn);
}

static int bound_libs(lua_State *L)
{
    ft__sandbox_bound_libs(L, lua_touserdata(L, 1));
    return 0;
}

/* A state with the standard libraries, the bounded functions in place when meter is not NULL. */
static lua_State *new_state(ft_meter *meter)
{
    lua_State *L = luaL_newstate();

    if (L == NULL)
        return NULL;
    luaL_openlibs(L);
    if (meter != NULL) {
        lua_pushcfunction(L, bound_libs);
        lua_pushlightuserdata(L, meter);
        if (lua_pcall(L, 1, 0, 0) != LUA_OK) {
            fprintf(stderr, "installing the bounded functions: %s\n", lua_tostring(L, -1));
            lua_close(L);
            return NULL;
        }
    }
    return L;
}

/* Runs the cases file; leaves its list of result lines on the stack. */
static int run_cases(lua_State *L)
{
    if (luaL_dofile(L, CASES) != LUA_OK) {
        fprintf(stderr, "%s: %s\n", CASES, lua_tostring(L, -1));
        return 0;
    }
    return lua_type(L, -1) == LUA_TTABLE;
}

static void test_same_results_as_stock(void)
{
    ft_meter meter = {LLONG_MAX, LLONG_MAX, push_exceeded};
    lua_State *stock = new_state(NULL);
    lua_State *bounded = new_state(&meter);
    lua_Integer n;
    lua_Integer i;
    int differ = 0;

    ASSERT_TRUE(stock != NULL && bounded != NULL);
    ASSERT_TRUE(run_cases(stock));
    ASSERT_TRUE(run_cases(bounded));
    n = (lua_Integer)lua_rawlen(stock, -1);
    ASSERT_EQ(lua_rawlen(bounded, -1), n);
    ASSERT_TRUE(n > 30000); /* the chosen cases and the random ones all ran */
    for (i = 1; i <= n; i++) {
        const char *want;
        const char *got;
        lua_rawgeti(stock, -1, i);
        lua_rawgeti(bounded, -1, i);
        want = lua_tostring(stock, -1);
        got = lua_tostring(bounded, -1);
        if (want == NULL || got == NULL || strcmp(want, got) != 0) {
            if (differ < 20)
                fprintf(stderr, "stock:   %s\nbounded: %s\n", want ? want : "(none)",
                        got ? got : "(none)");
            differ++;
        }
        lua_pop(stock, 1);
        lua_pop(bounded, 1);
    }
    if (differ > 0)
        fprintf(stderr, "%d of %lld cases differ\n", differ, (long long)n);
    ASSERT_EQ(differ, 0);
    /* The stock functions were really replaced, and the cases really used them. */
    ASSERT_TRUE(meter.match_steps < LLONG_MAX);
    ASSERT_TRUE(meter.instructions < LLONG_MAX);
    lua_close(stock);
    lua_close(bounded);
}

/* Runs code in a bounded state with the given budgets; returns the error message (in buf) or
 * "" when it ran to the end. */
static const char *run_bounded(const char *code, long long instructions, long long steps,
                               char *buf, size_t cap)
{
    ft_meter meter = {instructions, steps, push_exceeded};
    lua_State *L = new_state(&meter);

    buf[0] = '\0';
    if (L == NULL) {
        snprintf(buf, cap, "(no state)");
        return buf;
    }
    if (luaL_dostring(L, code) != LUA_OK)
        snprintf(buf, cap, "%s", lua_tostring(L, -1));
    lua_close(L);
    return buf;
}

static void test_meter_ends_runaways(void)
{
    char msg[512];

    /* exponential backtracking, in each function */
    ASSERT_CONTAINS(run_bounded("string.find(('a'):rep(200), ('a*'):rep(15) .. 'b')", 1000,
                                100000, msg, sizeof msg),
                    "pattern matching budget exceeded in string.find");
    ASSERT_CONTAINS(run_bounded("string.match(('a'):rep(200), ('a*'):rep(15) .. 'b')", 1000,
                                100000, msg, sizeof msg),
                    "pattern matching budget exceeded in string.match");
    ASSERT_CONTAINS(run_bounded("for x in string.gmatch(('a'):rep(200), ('a*'):rep(15) .. 'b') "
                                "do end",
                                1000, 100000, msg, sizeof msg),
                    "pattern matching budget exceeded in string.gmatch");
    ASSERT_CONTAINS(run_bounded("string.gsub(('a'):rep(200), ('a*'):rep(15) .. 'b', 'x')", 1000,
                                100000, msg, sizeof msg),
                    "pattern matching budget exceeded in string.gsub");
    /* a plain find costs a step per 64 bytes it reads */
    ASSERT_STREQ(run_bounded("assert(string.find(('a'):rep(6400) .. 'b', 'b', 1, true) == 6401)",
                             1000, 100 + 2, msg, sizeof msg),
                 "");
    ASSERT_CONTAINS(run_bounded("string.find(('a'):rep(6400) .. 'b', 'b', 1, true)", 1000, 50,
                                msg, sizeof msg),
                    "pattern matching budget exceeded in string.find");
    /* elements of the table functions */
    ASSERT_CONTAINS(run_bounded("table.move({}, 1, 1 << 50, 1, {})", 100000, 1000, msg,
                                sizeof msg),
                    "instruction budget exceeded in table.move");
    ASSERT_STREQ(run_bounded("table.move({}, 1, 99000, 1, {})", 100000, 1000, msg, sizeof msg),
                 "");
    ASSERT_CONTAINS(run_bounded("local t = setmetatable({}, {__len = function() return 1 << 50 "
                                "end}) table.insert(t, 1, 0)",
                                100000, 1000, msg, sizeof msg),
                    "instruction budget exceeded in table.insert");
    ASSERT_CONTAINS(run_bounded("local t = setmetatable({}, {__len = function() return 1 << 50 "
                                "end}) table.remove(t, 1)",
                                100000, 1000, msg, sizeof msg),
                    "instruction budget exceeded in table.remove");
    ASSERT_CONTAINS(run_bounded("table.concat(setmetatable({}, {__index = function() return '' "
                                "end}), '', 1, 1 << 50)",
                                100000, 1000, msg, sizeof msg),
                    "instruction budget exceeded in table.concat");
    ASSERT_CONTAINS(run_bounded("table.unpack({}, 1, 200000)", 100000, 1000, msg, sizeof msg),
                    "instruction budget exceeded in table.unpack");
    ASSERT_CONTAINS(run_bounded("local t = {} for i = 1, 1000 do t[i] = -i end "
                                "table.sort(t, math.ult)",
                                5000, 1000, msg, sizeof msg),
                    "instruction budget exceeded in table.sort");
    ASSERT_CONTAINS(run_bounded("local s = ('x'):rep(1 << 16) local t = {} "
                                "for i = 1, 100 do t[i] = s end table.sort(t)",
                                10000, 1000, msg, sizeof msg),
                    "instruction budget exceeded in table.sort");
    ASSERT_CONTAINS(run_bounded("string.byte(('x'):rep(200000), 1, -1)", 100000, 1000, msg,
                                sizeof msg),
                    "instruction budget exceeded in string.byte");
    /* and string.rep of nothing is no work at all */
    ASSERT_STREQ(run_bounded("assert(string.rep('', 1 << 62) == '' and "
                             "string.rep('', 1 << 62, '') == '')",
                             10, 10, msg, sizeof msg),
                 "");
}

FT_TEST_MAIN(FT_CASE(test_same_results_as_stock), FT_CASE(test_meter_ends_runaways))
