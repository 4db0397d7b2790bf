# The installed package (label install): cmake --install into a temporary prefix, then an
# application built with pkg-config (shared and --static) and with find_package(flashtune).
# Needs no GPU.
add_test(NAME install_package
  COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/install_test.sh ${CMAKE_SOURCE_DIR} ${CMAKE_BINARY_DIR}
          ${CMAKE_BINARY_DIR}/test-install
  WORKING_DIRECTORY ${CMAKE_BINARY_DIR})
set_tests_properties(install_package PROPERTIES LABELS install TIMEOUT 600 ENVIRONMENT "${FT_TEST_ENV}")

# pip install of the repository (pyproject.toml, scikit-build-core) into a fresh virtual
# environment, then the manylinux repair of that wheel by auditwheel (that part "skipped" where
# auditwheel cannot be installed); skipped where scikit-build-core cannot be installed. 11–30 s
# where measured, about 20 s with the repair (label slow too: the sanitizer phase, whose build
# it does not use, leaves it out).
add_test(NAME pip_wheel
  COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/pip_wheel.sh ${CMAKE_SOURCE_DIR} ${CMAKE_BINARY_DIR}/test-pip
  WORKING_DIRECTORY ${CMAKE_BINARY_DIR})
set_tests_properties(pip_wheel PROPERTIES LABELS "install;slow" SKIP_RETURN_CODE 77 TIMEOUT 900)
