# The installed package (label install): cmake --install into a temporary prefix, then an
# application built with pkg-config (shared and --static) and with find_package(flashtune).
# Needs no GPU.
add_test(NAME install_package
  COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/install_test.sh ${CMAKE_SOURCE_DIR} ${CMAKE_BINARY_DIR}
          ${CMAKE_BINARY_DIR}/test-install
  WORKING_DIRECTORY ${CMAKE_BINARY_DIR})
set_tests_properties(install_package PROPERTIES LABELS install TIMEOUT 600 ENVIRONMENT "${FT_TEST_ENV}")
