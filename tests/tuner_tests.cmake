# The tuner and its worker protocol (no GPU): a worker that breaks the protocol, hangs,
# trickles or will not quit; SIGTERM during a measurement.
add_test(NAME tune_protocol COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/tune_protocol.sh $<TARGET_FILE:flashtune>
  $<TARGET_FILE:fake_worker> WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
set_tests_properties(tune_protocol PROPERTIES LABELS cli TIMEOUT 900
  ENVIRONMENT "FLASHTUNE_CACHE_DIR=${CMAKE_BINARY_DIR}/test-cache")

# The tuner's checks of shapes and of a worker's measurement replies, field by field.
ft_unit_test(test_tuner test_tuner.c)

# The compile cache's reading side: headers that lie under a good checksum, entries that are not
# files, a cache directory that is a file; corrupt and removed counted apart.
ft_unit_test(test_cache test_cache.c)

# The ranked search's compilations ahead (NVRTC, one thread, tiny kernels): a drain for the named
# jobs alone (moved to the front) or for the whole queue, and jobs taken over, read off the cache.
ft_unit_test(test_prefetch test_prefetch.c)
