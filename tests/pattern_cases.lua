-- Cases for test_pattern: run once in a Lua state with the stock libraries and once in one
-- with the sandbox's bounded functions (generator/sandbox.h); each returns the same list of
-- lines "case => results", and the test compares the two lists line by line. Results are
-- written with nothing but '..', tostring and math.type, so that the writing itself uses none
-- of the functions under test.

local out = {}

local control = {}
for i = 0, 31 do control[string.char(i)] = "\\" .. tostring(i) end

local function show(v)
  local t = type(v)
  if t == "string" then
    local esc = ""
    for i = 1, #v do
      local b = v:sub(i, i)
      esc = esc .. (control[b] or b)
    end
    return "'" .. esc .. "'#" .. tostring(#v)
  elseif t == "number" then
    return math.type(v) .. ":" .. tostring(v)
  end
  return t == "table" and "<table>" or t == "function" and "<function>" or tostring(v)
end

local function pack(...)
  return { n = select("#", ...), ... }
end

-- r[first..r.n] as text.
local function results(r, first)
  first = first or 1
  local s = tostring(r.n - first + 1) .. " |"
  for i = first, r.n do s = s .. " " .. show(r[i]) end
  return s
end

-- The results of pcall (packed) as text: its values, or its error.
local function outcome(r)
  if r[1] then return results(r, 2) end
  return "error " .. show(r[2])
end

-- Runs f(...) protected and writes one line: its results, or its error.
local function case(label, f, ...)
  out[#out + 1] = label .. " => " .. outcome(pack(pcall(f, ...)))
end

-- f(t, a[1], ..., a[a.n]) with exactly that many arguments (insert counts them).
local function call_with(f, t, a)
  if a.n == 0 then return f(t) end
  if a.n == 1 then return f(t, a[1]) end
  if a.n == 2 then return f(t, a[1], a[2]) end
  if a.n == 3 then return f(t, a[1], a[2], a[3]) end
  return f(t, a[1], a[2], a[3], a[4])
end

local function label_of_packed(r)
  local s = ""
  for i = 1, r.n do s = s .. (i > 1 and ", " or "") .. show(r[i]) end
  return s
end

local function label_of(...)
  return label_of_packed(pack(...))
end

-- All matches of gmatch (at most 50), as one result list.
local function gmatch_all(s, p, init)
  local all = {}
  local n = 0
  local it = string.gmatch(s, p, init)
  while n < 50 do
    local r = pack(it())
    if r[1] == nil then break end
    n = n + 1
    all[n] = results(r)
  end
  local line = tostring(n)
  for i = 1, n do line = line .. " [" .. all[i] .. "]" end
  return line
end

local function pattern_case(s, p, init, plain)
  local l = label_of(s, p, init, plain)
  case("find(" .. l .. ")", string.find, s, p, init, plain)
  case("match(" .. l .. ")", string.match, s, p, init)
  case("gmatch(" .. l .. ")", gmatch_all, s, p, init)
  case("gsub(" .. l .. ", '<%0>')", string.gsub, s, p, "<%0>")
end

-- ---- chosen cases ------------------------------------------------------------------------

local chosen = {
  { "hello world", "o w" }, { "hello world", "o", 6 }, { "hello", "l+" }, { "hello", "l*" },
  { "hello", "l-" }, { "hello", "l?" }, { "hello", "" }, { "", "" }, { "", "a*" }, { "", "^$" },
  { "hello", "^h" }, { "hello", "^e" }, { "hello", "o$" }, { "hello", "l$" }, { "a$b", "$b" },
  { "a^b", "a^b" }, { "a.b", "a.b", 1, true }, { "a.b", "%.", 1 }, { "axb", "a.b", 1, true },
  { "key = value", "(%w+)%s*=%s*(%w+)" }, { "key = value", "()(%w+)()" }, { "abc", "()" },
  { "abc", "()", 4 }, { "abc", "()", 5 }, { "abc", "b", -1 }, { "abc", "b", -2 },
  { "abc", "b", -10 }, { "abc", "b", 0 }, { "abc", "", 10 }, { "abc", "", 4 },
  { "THE (quick) fox", "%((%a+)%)" }, { "f(a(b)c)d", "%b()" }, { "f(a(b)c", "%b()" },
  { "xx", "%bxx" }, { "[[x]]", "%b[]" }, { "THE (quick) fox", "%f[%a]%a+" },
  { "THE (quick) fox", "%f[%A]" }, { "hello", "%f[%l]" }, { "aaa", "%f[a]" }, { "", "%f[%z]" },
  { "abab", "(ab)%1" }, { "abcabc", "(a)(b)(c)%1%2%3" }, { "aa", "(a)%1" }, { "ab", "(a)%1" },
  { "x = 1, y = 22", "(%a)%s*=%s*(%d+)" }, { "  trim  ", "^%s*(.-)%s*$" },
  { "a,b,,c", "([^,]*)" }, { "a]b", "[]]" }, { "a]b", "[^]]" }, { "a-b", "[a-]" },
  { "a-b", "[-a]" }, { "a-b", "[%-]" }, { "b", "[a-c]" }, { "d", "[a-c]" }, { "%", "%%" },
  { "a\0b", "\0" }, { "a\0b", "%z" }, { "a\0b", "[\0]" }, { "a\0b", "a%zb" },
  { "a\0b", "a.b" }, { "\0\0", "\0*" }, { "abc", "%a+", 2 }, { "123abc", "%d+%a+" },
  { "x1y22z333", "%d+" }, { "tab\there", "%c" }, { "AbC", "%u" }, { "AbC", "%l+" },
  { "a.b,c!", "%p" }, { "0xFF", "%x+" }, { "word word", "%w+" }, { "  ", "%s+" },
  { "αβγ", "[\128-\255]+" }, { "aXb", "%W" }, { "a1", "%D" }, { "ab", "%S" },
  -- malformed patterns and bad captures: errors, the same ones
  { "abc", "%" }, { "abc", "[a" }, { "abc", "[^" }, { "abc", "[]" }, { "abc", "(a" },
  { "abc", "a)" }, { "abc", "%1" }, { "abc", "(a)%2" }, { "abc", "%0" }, { "abc", "%b" },
  { "abc", "%ba" }, { "abc", "%f" }, { "abc", "%fa" }, { "abc", "(()" }, { "abc", "[%" },
  { "abc", "(a%1)" }, { "abc", "%g+" }, { "abc", "((((((((((((((((((((((((((((((((a))))))))))))))))))))))))))))))))" },
  { "abc", "(((((((((((((((((((((((((((((((((a)))))))))))))))))))))))))))))))))" },
}
for _, c in ipairs(chosen) do pattern_case(c[1], c[2], c[3], c[4]) end

-- Nesting deep enough for "pattern too complex".
pattern_case(string.rep("a", 300), string.rep("a?", 250))
pattern_case(string.rep("a", 150), string.rep("(a)", 20))

-- gsub's replacements
local gsubs = {
  { "hello world", "o", "0" }, { "hello world", "(o)", "[%1]" }, { "hello world", "o", "%%" },
  { "hello world", "o", "%0%0" }, { "hello world", "o", "%1" }, { "hello world", "o", "%2" },
  { "hello world", "(o)", "%2" }, { "hello world", "o", "%" }, { "hello world", "o", "%x" },
  { "hello world", "()o", "%1" }, { "hello world", "(l)(l)", "%2%1" }, { "abc", "", "-" },
  { "abc", ".", "%0%0", 2 }, { "abc", ".", "x", 0 }, { "abc", ".", "x", -1 },
  { "abc", "^.", "x" }, { "abc", "$", "!" }, { "abc", "b*", "-" }, { "", "", "x" },
  { "abc", "%w", 5 }, { "abc", "%w", 1.0 }, { "abc", "%w", {} }, { "abc", "%w", true },
  { "hello world", "%w+", { hello = "HI", world = false } },
  { "hello world", "%w+", { hello = 1.5, world = 2 } },
  { "hello world", "(%w+)", { hello = {} } },
  { "hello world", "()%w+", { [1] = "one", [7] = "seven" } },
  { "a b c", "%a", function(x) return x:upper() end },
  { "a b c", "%a", function(x) return nil end },
  { "a b c", "%a", function(x) return false end },
  { "a b c", "%a", function(x) return 42 end },
  { "a b c", "%a", function(x) return {} end },
  { "a=1, b=2", "(%a)=(%d)", function(k, v) return v .. k end },
  { "a=1, b=2", "()(%a)=()", function(p1, k, p2) return p1 .. k .. p2 end },
  { "abc", "", function() return "." end },
  { "abc", "b", "x", 1 }, { "abcb", "b", "x", 1.0 }, { "abc", "b", "x", "1" },
}
for _, g in ipairs(gsubs) do
  case("gsub(" .. label_of(g[1], g[2], type(g[3]) == "function" and "<function>" or g[3], g[4]) .. ")",
       string.gsub, g[1], g[2], g[3], g[4])
end

-- Arguments of the wrong type and numbers where strings go.
case("find(nil)", string.find, nil, "a")
case("find(1)", string.find, 12345, 3)
case("find(s, nil)", string.find, "abc", nil)
case("find(s, p, 'x')", string.find, "abc", "b", "x")
case("find(s, p, 1.5)", string.find, "abc", "b", 1.5)
case("match(s, p, 2.0)", string.match, "abc", "b", 2.0)
case("gmatch(nil)", string.gmatch, nil, "a")
case("gsub(s, p)", string.gsub, "abc", "b")
case("gsub(s, p, r, 'x')", string.gsub, "abc", "b", "x", "x")
case("method find", function() return ("abc"):find("b") end)
case("method gsub", function() return ("abc"):gsub("b", "[%0]") end)

-- ---- random patterns ---------------------------------------------------------------------

local atoms = { "a", "b", "c", ".", "%a", "%d", "%s", "%w", "%p", "%A", "%z", "[ab]", "[^a]",
                "[a-c]", "[%d_]", "[]]", "[^]a]", "%b()", "%bab", "%f[%a]", "%f[^%a]", "(",
                ")", "()", "%1", "%2", "^", "$", "*", "+", "-", "?", "%", "[", "%.", "x",
                "1", " ", "%%", "]", "a*", "b+", ".-", "%d?" }
local chars = { "a", "b", "c", "(", ")", "1", "2", " ", "_", ".", "\0", "x", "]", "%" }
local seed = 12345
local function rand(n) -- 1..n, an LCG so that both states see the same sequence
  seed = (seed * 1103515245 + 12345) % 2147483648
  return seed % n + 1
end
for _ = 1, 6000 do
  local p = ""
  for _ = 1, rand(6) do p = p .. atoms[rand(#atoms)] end
  local s = ""
  for _ = 1, rand(11) - 1 do s = s .. chars[rand(#chars)] end
  local init = rand(4) == 1 and rand(17) - 6 or nil
  pattern_case(s, p, init, rand(8) == 1 or nil)
  case("gsub(" .. label_of(s, p) .. ", '%1', n)", string.gsub, s, p, "%1", rand(4) - 1)
end

-- ---- string.rep and string.byte ----------------------------------------------------------

local reps = { { "ab", 3 }, { "ab", 3, "," }, { "", 5 }, { "", 5, "-" }, { "x", 0 },
               { "x", -1 }, { "x", 0, "," }, { "x", 1, "," }, { "x", 3, "" }, { "x", 2.0 },
               { "x", 2.5 }, { "x", "3" }, { 12, 2 }, { "x", 1 << 40 }, { "", 1 << 40, "x" },
               { "xy", (1 << 30) + 1 }, { "x", math.maxinteger }, { nil, 2 }, { "x" } }
for _, r in ipairs(reps) do
  case("rep(" .. label_of(r[1], r[2], r[3]) .. ")", string.rep, r[1], r[2], r[3])
end
local bytes = { { "abc" }, { "abc", 0 }, { "abc", 1 }, { "abc", -1 }, { "abc", -10 },
                { "abc", 2, 10 }, { "abc", 3, 1 }, { "", 1 }, { "abc", 1, -1 }, { "abc", -2, -1 },
                { "abc", 4 }, { "abc", 0, 0 }, { "abc", -3, 2 }, { "abc", math.mininteger },
                { "abc", 1, math.maxinteger }, { "abc", math.mininteger, math.maxinteger },
                { "a\0\255", 1, 3 }, { 123, 1, 2 }, { "abc", "2" }, { "abc", 1.5 }, { nil } }
for _, b in ipairs(bytes) do
  case("byte(" .. label_of(b[1], b[2], b[3]) .. ")", string.byte, b[1], b[2], b[3])
end

-- ---- the table functions -----------------------------------------------------------------

-- A table's contents 1..n+2 and its length, as text.
local function contents(t)
  local s = "#" .. tostring(rawlen(t)) .. " {"
  for i = 0, rawlen(t) + 2 do s = s .. " " .. show(rawget(t, i)) end
  return s .. " }"
end

-- Runs f(t, args...) on a fresh t = make() with exactly the packed args (insert counts them);
-- writes the results, or the error, and what t holds afterwards.
local function table_case(name, f, make, args)
  local t = make()
  local line = outcome(pack(pcall(call_with, f, t, args)))
  local label = name .. "(" .. label_of_packed(args) .. ")"
  out[#out + 1] = label .. " => " .. line .. " ; " .. (type(t) == "table" and contents(t) or show(t))
end

local A = pack

local function list5() return { 10, 20, 30, 40, 50 } end
local function empty() return {} end
local function proxy() -- reads and writes go through metamethods to a hidden table
  local store = { "p", "q", "r" }
  return setmetatable({}, { __index = store, __newindex = store,
                            __len = function() return #store end })
end
local function other_list() return { "x", "y" } end

local inserts = { A(), A(0), A(1, 0), A(3, 0), A(6, 0), A(7, 0), A(-1, 0), A(1.0, 0),
                  A(1.5, 0), A("2", 0), A(1, 2, 3), A(math.maxinteger, 0), A(nil, 0) }
for _, a in ipairs(inserts) do
  table_case("insert list5", table.insert, list5, a)
  table_case("insert empty", table.insert, empty, a)
  table_case("insert proxy", table.insert, proxy, a)
end
local removes = { A(), A(1), A(3), A(5), A(6), A(7), A(0), A(-1), A(2.0), A("x"), A(nil) }
for _, a in ipairs(removes) do
  table_case("remove list5", table.remove, list5, a)
  table_case("remove empty", table.remove, empty, a)
  table_case("remove proxy", table.remove, proxy, a)
end
local moves = { A(1, 3, 2), A(2, 5, 1), A(1, 5, 3), A(3, 1, 1), A(1, 0, 4), A(-2, 2, 1),
                A(1, 5, 6), A(0, math.maxinteger, 1), A(math.mininteger, -1, 1),
                A(1, 2, math.maxinteger), A(1, 1, math.maxinteger), A(1.0, 2, 3), A(1, 2),
                A(1, "x", 2), A(1, 3, 2, nil) }
for _, a in ipairs(moves) do
  table_case("move list5", table.move, list5, a)
  table_case("move proxy", table.move, proxy, a)
  case("move list5 " .. label_of_packed(a) .. " into another", function()
    local dst = other_list()
    local r = table.move(list5(), a[1], a[2], a[3], dst)
    return r == dst, contents(dst)
  end)
end
case("move(t, 1, 3, 2, t)", function()
  local t = list5()
  table.move(t, 1, 3, 2, t)
  return contents(t)
end)
local concats = { A(), A(", "), A(", ", 2), A(", ", 2, 4), A(", ", 4, 2), A("", 5, 5),
                  A("-", 0, 2), A("-", 1, 6), A("-", 1.0, 2), A(1, 1, 3), A(nil, 2),
                  A("-", math.maxinteger, math.maxinteger) }
for _, a in ipairs(concats) do
  table_case("concat list5", table.concat, list5, a)
  table_case("concat proxy", table.concat, proxy, a)
end
table_case("concat mixed", table.concat, function() return { "a", 1, 2.5, "b" } end, A("|"))
table_case("concat bad", table.concat, function() return { "a", {}, "b" } end, A())
local unpacks = { A(), A(2), A(2, 4), A(4, 2), A(-1, 1), A(3, 7), A(1, 0),
                  A(math.maxinteger, math.maxinteger), A(0, -1), A(1, 1e6 + 0.0),
                  A(math.mininteger, math.maxinteger), A(1, 10000000), A("1", "2"), A(nil, 2) }
for _, a in ipairs(unpacks) do
  table_case("unpack list5", table.unpack, list5, a)
  table_case("unpack proxy", table.unpack, proxy, a)
end
local function shuffled()
  return { 5, 3, 9, 1, 7, 2, 8, 6, 4, 0, 11, 13, 12, 10, 15, 14, 19, 17, 16, 18 }
end
local function words() return { "pear", "apple", "fig", "banana", "kiwi", "date" } end
local sorts = {
  { "default", shuffled }, { "default words", words },
  { "greater", shuffled, function(a, b) return a > b end },
  { "ult", shuffled, math.ult }, { "not a function", shuffled, 5 },
  { "mixed", function() return { 1, "a", 2 } end },
  { "one", function() return { 1 } end, 5 }, { "empty", empty },
  { "invalid order", shuffled, function() return true end },
  { "proxy", proxy },
}
for _, c in ipairs(sorts) do
  table_case("sort " .. c[1], table.sort, c[2], c[3] ~= nil and A(c[3]) or A())
end
case("sort(nil)", table.sort, nil)
case("insert(nil, 1)", table.insert, nil, 1)
case("concat(5)", table.concat, 5)
case("unpack(nil)", table.unpack, nil)
case("move(nil, 1, 2, 3)", table.move, nil, 1, 2, 3)

return out
