# The Lua spec loader and sandbox (generator/spec.c).
ft_unit_test(test_spec test_spec.c)

# Spec text made printable for terminals and messages (common/text.c).
ft_unit_test(test_text test_text.c)
