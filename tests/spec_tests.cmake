# The Lua spec loader and sandbox (generator/spec.c).
ft_unit_test(test_spec test_spec.c)
