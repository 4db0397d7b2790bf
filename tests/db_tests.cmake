# Tests of the tuning database (SQLite): schema and migrations, files that are not ours,
# results, staleness and winners, and several writer processes on one file.
ft_unit_test(test_db test_db.c)

# Misses (schema 2): migration of a schema-1 file, recording and listing.
ft_unit_test(test_misses test_misses.c)

# Kernel packs: the file format, every damaged byte, versions, the kernel-set view, the merge,
# and ft_context_create with a pack or a kernel set (no GPU needed).
ft_unit_test(test_pack test_pack.c)
target_link_libraries(test_pack PRIVATE flashtune_shared)
# export / import end to end with the stand-in worker, and the C export compiled into a program.
add_test(NAME pack_cli COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/pack.sh $<TARGET_FILE:flashtune>
  $<TARGET_FILE:fake_worker> ${CMAKE_C_COMPILER} $<TARGET_FILE:flashtune_shared>
  WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
set_tests_properties(pack_cli PROPERTIES LABELS cli TIMEOUT 900
  ENVIRONMENT "FLASHTUNE_CACHE_DIR=${CMAKE_BINARY_DIR}/test-cache")

# Opening: paths refused before SQLite sees them (special names, directories, FIFOs, side
# files, files it may not read), unversioned files, a failed migration, a WAL database in a
# read-only directory (as an unprivileged user when the tests run as root), a lock held by
# another writer.
ft_unit_test(test_db_open test_db_open.c)
# The command on database paths that keep nothing or are no files, a WAL database in a
# read-only directory, and output it cannot write (/dev/full), with the stand-in worker.
add_test(NAME db_cli COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/db_cli.sh $<TARGET_FILE:flashtune>
  $<TARGET_FILE:fake_worker> WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
set_tests_properties(db_cli PROPERTIES LABELS cli TIMEOUT 900
  ENVIRONMENT "FLASHTUNE_CACHE_DIR=${CMAKE_BINARY_DIR}/test-cache")

# Schema 3 (operations and keys): a schema-2 file written by flashtune 0.1, read as it is and
# migrated, keeps every result and miss and every bucket's winner.
ft_unit_test(test_migrate test_migrate.c)
