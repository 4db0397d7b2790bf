# GPU tests (label gpu): they exit 77 without a GPU, which ctest reports as skipped.
add_executable(test_gpu test_gpu.c)
target_link_libraries(test_gpu PRIVATE ft_core flashtune_shared ${FT_EXE_DEPS})
target_compile_definitions(test_gpu PRIVATE _GNU_SOURCE)
add_test(NAME test_gpu COMMAND test_gpu WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
set_tests_properties(test_gpu PROPERTIES LABELS gpu SKIP_RETURN_CODE 77 TIMEOUT 900 ENVIRONMENT "${FT_TEST_ENV}")

add_test(NAME gpu_verify COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/gpu_verify.sh $<TARGET_FILE:flashtune>
  WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
set_tests_properties(gpu_verify PROPERTIES LABELS gpu SKIP_RETURN_CODE 77 TIMEOUT 1800 ENVIRONMENT "${FT_TEST_ENV}")

add_test(NAME gpu_tune COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/gpu_tune.sh $<TARGET_FILE:flashtune>
  $<TARGET_FILE:attention_example> WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
set_tests_properties(gpu_tune PROPERTIES LABELS gpu SKIP_RETURN_CODE 77 TIMEOUT 1800 ENVIRONMENT "${FT_TEST_ENV}")

find_package(Python3 COMPONENTS Interpreter)
if(Python3_FOUND)
  add_test(NAME gpu_tune_quality COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/gpu_tune_quality.sh $<TARGET_FILE:flashtune>
    WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  set_tests_properties(gpu_tune_quality PROPERTIES LABELS gpu SKIP_RETURN_CODE 77 TIMEOUT 900
    ENVIRONMENT "${FT_TEST_ENV};FLASHTUNE_LIB=$<TARGET_FILE:flashtune_shared>")
  add_test(NAME gpu_python COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/test_python.py
    WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  set_tests_properties(gpu_python PROPERTIES LABELS gpu SKIP_RETURN_CODE 77 TIMEOUT 600
    ENVIRONMENT "${FT_TEST_ENV};FLASHTUNE_LIB=$<TARGET_FILE:flashtune_shared>")
  add_test(NAME gpu_python_bwd COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/test_python_bwd.py
    WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  set_tests_properties(gpu_python_bwd PROPERTIES LABELS gpu SKIP_RETURN_CODE 77 TIMEOUT 900
    ENVIRONMENT "${FT_TEST_ENV};FLASHTUNE_LIB=$<TARGET_FILE:flashtune_shared>")
  # Its first part alone, which needs no GPU: out= and the inputs checked on CPU tensors before
  # anything runs (label unit; skipped without PyTorch).
  add_test(NAME python_checks COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/test_python.py --checks
    WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  set_tests_properties(python_checks PROPERTIES LABELS unit SKIP_RETURN_CODE 77 TIMEOUT 300)
  # flashtune.tune: the command with the stand-in worker (no GPU, no PyTorch).
  add_test(NAME python_tune COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/test_python_tune.py
    WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  set_tests_properties(python_tune PROPERTIES LABELS cli TIMEOUT 600
    ENVIRONMENT "${FT_TEST_ENV};FLASHTUNE_CMD=$<TARGET_FILE:flashtune>;FLASHTUNE_WORKER=$<TARGET_FILE:fake_worker>")
  # The binding's route for the library's diagnostic lines into logging (no GPU, no PyTorch; not
  # with the sanitizers, whose runtime an interpreter does not load first).
  if(NOT FT_SANITIZE)
    add_test(NAME python_log COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/test_python_log.py
      WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
    set_tests_properties(python_log PROPERTIES LABELS unit TIMEOUT 120
      ENVIRONMENT "FLASHTUNE_LIB=$<TARGET_FILE:flashtune_shared>")
  endif()
endif()
