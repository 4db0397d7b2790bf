# The Lua spec loader and sandbox (generator/spec.c).
ft_unit_test(test_spec test_spec.c)
# ft_context_create with a spec that runs away (the library loads specs in the application).
target_link_libraries(test_spec PRIVATE flashtune_shared)

# The sandbox's bounded library functions against the stock Lua ones (tests/pattern_cases.lua).
ft_unit_test(test_pattern test_pattern.c)
target_include_directories(test_pattern PRIVATE ${LUA_INCLUDE_DIR})

# Spec text made printable for terminals and messages (common/text.c).
ft_unit_test(test_text test_text.c)

ft_cli_test(plan_pattern_budget fail
  "tests/specs/pattern_load.lua:3: pattern matching budget of 50000000 steps exceeded \\(in string.find\\)"
  plan tests/specs/pattern_load.lua)
ft_cli_test(plan_allocation_budget fail
  "tests/specs/rep_loop.lua:3: allocation budget of 1 GiB exceeded"
  plan tests/specs/rep_loop.lua)
