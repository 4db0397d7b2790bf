# The Lua spec loader and sandbox (generator/spec.c).
ft_unit_test(test_spec test_spec.c)
# ft_context_create with a spec that runs away (the library loads specs in the application).
target_link_libraries(test_spec PRIVATE flashtune_shared)

# The sandbox's bounded library functions against the stock Lua ones (tests/pattern_cases.lua).
ft_unit_test(test_pattern test_pattern.c)
target_include_directories(test_pattern PRIVATE ${LUA_INCLUDE_DIR})

# Spec text made printable for terminals and messages (common/text.c).
ft_unit_test(test_text test_text.c)

# Spec text on the terminal: plan shows a reason full of terminal controls as escapes.
add_test(NAME spec_text_cli COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/spec_text_cli.sh $<TARGET_FILE:flashtune>
  WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
set_tests_properties(spec_text_cli PROPERTIES LABELS cli TIMEOUT 120 ENVIRONMENT "${FT_TEST_ENV}")
ft_cli_test(plan_pattern_budget fail
  "tests/specs/pattern_load.lua:3: pattern matching budget of 50000000 steps exceeded \\(in string.find\\)"
  plan tests/specs/pattern_load.lua)
ft_cli_test(plan_allocation_budget fail
  "tests/specs/rep_loop.lua:3: allocation budget of 1 GiB exceeded"
  plan tests/specs/rep_loop.lua)
ft_cli_test(plan_name_collision fail
  "tests/specs/name_collision.lua: params\\[1\\] 'd' and params\\[3\\] 'D' both become the macro FTP_D"
  plan tests/specs/name_collision.lua)

# The generated source's macro names under a locale whose toupper('i') is not 'I'.
add_executable(test_emit_locale test_emit_locale.c)
target_link_libraries(test_emit_locale PRIVATE ft_core ${FT_EXE_DEPS})
target_compile_definitions(test_emit_locale PRIVATE _GNU_SOURCE)
add_test(NAME test_emit_locale
  COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/emit_locale.sh $<TARGET_FILE:test_emit_locale> ${CMAKE_BINARY_DIR}
  WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
set_tests_properties(test_emit_locale PROPERTIES LABELS unit TIMEOUT 120 SKIP_RETURN_CODE 77
  ENVIRONMENT "${FT_TEST_ENV}")
