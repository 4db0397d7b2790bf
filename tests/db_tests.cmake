# Tests of the tuning database (SQLite): schema and migrations, files that are not ours,
# results, staleness and winners, and several writer processes on one file.
ft_unit_test(test_db test_db.c)
