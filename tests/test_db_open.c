/* Tests of opening the tuning database: the paths it refuses (names SQLite reads in its own
 * way, directories, FIFOs, side files that are not files, missing directories), files with
 * flashtune's id but no schema version, a migration that fails, a WAL database in a directory
 * the reader cannot write, and a lock held by another connection. */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/fs.h"
#include "db_fixture.h"
#include "ft_test.h"

#define FTDB_APP_ID 0x46544442
#define UNPRIVILEGED_ID 65534 /* nobody, nogroup */

/* ---- helpers ------------------------------------------------------------------------------ */

/* A whole file (malloc'd, *n bytes), or NULL. */
static char *slurp(const char *path, size_t *n)
{
    char *data = NULL;
    ft_err err;

    if (ft__read_file(path, &data, n, &err) != FT_OK)
        fprintf(stderr, "slurp: %s\n", err.msg);
    return data;
}

/* Whether a file holds exactly these bytes. */
static int same_bytes(const char *path, const char *want, size_t n)
{
    size_t got_n = 0;
    char *got = slurp(path, &got_n);
    int same = got != NULL && got_n == n && memcmp(got, want, n) == 0;

    free(got);
    return same;
}

static int exists(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0;
}

/* Whether path-suffix exists (a journal, WAL or shared-memory file). */
static int side_exists(const char *path, const char *suffix)
{
    char name[PATH_MAX];
    snprintf(name, sizeof name, "%s%s", path, suffix);
    return exists(name);
}

/* A database with one device, kernel and result (schema FT_DB_SCHEMA_VERSION, WAL). */
static int make_db(const char *path)
{
    ft_db_device dev = make_device("NVIDIA H200", 13000);
    ft_db_kernel k = make_kernel("k1", "t1");
    long long d = 0, kid = 0;
    ft_db_result r;
    ft_db *db = NULL;
    ft_err err;
    int ok = 0;

    if (ft__db_open(path, 0, &db, &err) == FT_OK && ft__db_device_id(db, &dev, &d, &err) == FT_OK &&
        ft__db_kernel_id(db, &k, &kid, &err) == FT_OK) {
        r = make_result(d, kid, "f16", 64, 0, 1024, FT_RESULT_OK, 1.0);
        ok = ft__db_record(db, &r, &err) == FT_OK;
    }
    if (!ok)
        fprintf(stderr, "make_db(%s): %s\n", path, err.msg);
    ft__db_close(db);
    return ok;
}

/* Runs fn(arg) in a child process that an alarm ends after seconds (a FIFO would otherwise
 * block the test for ever), as an unprivileged user when unprivileged is set and this process
 * is root (root ignores file permissions). Returns fn's result (0: pass), 77 when no
 * unprivileged user could be taken, 124 when the alarm ended it. */
static int in_child(int (*fn)(const char *), const char *arg, int unprivileged, unsigned seconds)
{
    pid_t pid;
    int st;

    fflush(stdout);
    fflush(stderr);
    pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        alarm(seconds);
        if (unprivileged && geteuid() == 0 &&
            (setgroups(0, NULL) != 0 || setgid(UNPRIVILEGED_ID) != 0 || setuid(UNPRIVILEGED_ID) != 0))
            _exit(77);
        _exit(fn(arg));
    }
    if (waitpid(pid, &st, 0) != pid)
        return -1;
    if (WIFSIGNALED(st))
        return WTERMSIG(st) == SIGALRM ? 124 : 128 + WTERMSIG(st);
    return WEXITSTATUS(st);
}

/* In a child: 0 when opening path (read-only, then writable) fails with FT_ERR_DATABASE and a
 * message that names the path and contains $FT_WANT. */
static int expect_refused(const char *path)
{
    const char *want = getenv("FT_WANT");
    ft_db *db = NULL;
    ft_err err;
    int ro;

    for (ro = 1; ro >= 0; ro--) {
        ft_status rc = ft__db_open(path, ro, &db, &err);
        if (rc != FT_ERR_DATABASE || db != NULL || strstr(err.msg, path) == NULL ||
            strstr(err.msg, want) == NULL) {
            fprintf(stderr, "open(%s, read_only %d): status %d, message \"%s\"; wanted \"%s\"\n", path,
                    ro, (int)rc, rc != FT_OK ? err.msg : "", want);
            ft__db_close(db);
            return 1;
        }
    }
    return 0;
}

static int refused_within(const char *path, const char *want, unsigned seconds)
{
    setenv("FT_WANT", want, 1);
    return in_child(expect_refused, path, 0, seconds);
}

/* The same, as an unprivileged user (77: none could be taken). */
static int refused_unprivileged(const char *path, const char *want)
{
    setenv("FT_WANT", want, 1);
    return in_child(expect_refused, path, 1, 60);
}

/* ---- names SQLite reads in its own way ---------------------------------------------------- */

/* "" opens a temporary database, ":memory:" one in memory, "file:..." a URI (here one that
 * names an in-memory database): none keeps anything, so none is a database path. A file of
 * either name is still reachable as ./NAME. */
static void test_special_names(void)
{
    char dir[64], uri[160], path[160];
    ft_db *db = NULL;
    ft_err err;
    int ro;

    ASSERT_TRUE(make_dir(dir, sizeof dir));
    snprintf(uri, sizeof uri, "file:%s/uri.db?mode=memory", dir);
    for (ro = 0; ro <= 1; ro++) {
        ASSERT_EQ(ft__db_open("", ro, &db, &err), FT_ERR_INVALID_ARGUMENT);
        ASSERT_TRUE(db == NULL);
        ASSERT_CONTAINS(err.msg, "the tuning database path is empty");
        ASSERT_CONTAINS(err.msg, "keeps nothing");
        ASSERT_EQ(ft__db_open(":memory:", ro, &db, &err), FT_ERR_INVALID_ARGUMENT);
        ASSERT_TRUE(db == NULL);
        ASSERT_CONTAINS(err.msg, "':memory:', an in-memory database that keeps nothing");
        ASSERT_EQ(ft__db_open(uri, ro, &db, &err), FT_ERR_INVALID_ARGUMENT);
        ASSERT_TRUE(db == NULL);
        ASSERT_CONTAINS(err.msg, uri);
        ASSERT_CONTAINS(err.msg, "which SQLite reads as a URI");
    }
    snprintf(path, sizeof path, "%s/uri.db", dir);
    ASSERT_TRUE(!exists(path));
    /* files of those names, given as paths */
    snprintf(path, sizeof path, "%s/:memory:", dir);
    ASSERT_OK(ft__db_open(path, 0, &db, &err), &err);
    ft__db_close(db);
    ASSERT_EQ(raw_int(path, "PRAGMA user_version"), FT_DB_SCHEMA_VERSION);
    snprintf(path, sizeof path, "%s/file:x.db", dir);
    ASSERT_OK(ft__db_open(path, 0, &db, &err), &err);
    ft__db_close(db);
    ASSERT_TRUE(exists(path));
    remove_dir(dir);
}

/* $FLASHTUNE_DB: empty is as if unset (the default path); a special name is refused before
 * any directory is made for it. */
static void test_env_names(void)
{
    char dir[64], want[256], got[512], cwd[PATH_MAX], saved_db[512] = "", saved_xdg[512] = "";
    const char *v;
    int had_db, had_xdg;
    ft_db *db = NULL;
    ft_err err;

    ASSERT_TRUE(make_dir(dir, sizeof dir));
    ASSERT_TRUE(getcwd(cwd, sizeof cwd) != NULL);
    v = getenv("FLASHTUNE_DB");
    had_db = v != NULL;
    if (had_db)
        snprintf(saved_db, sizeof saved_db, "%s", v);
    v = getenv("XDG_DATA_HOME");
    had_xdg = v != NULL;
    if (had_xdg)
        snprintf(saved_xdg, sizeof saved_xdg, "%s", v);

    setenv("FLASHTUNE_DB", "", 1);
    setenv("XDG_DATA_HOME", dir, 1);
    snprintf(want, sizeof want, "%s/flashtune/tuning.db", dir);
    ASSERT_OK(ft__db_default_path(got, sizeof got, 0, &err), &err);
    ASSERT_STREQ(got, want);
    ASSERT_OK(ft__db_open(NULL, 0, &db, &err), &err);
    ASSERT_STREQ(ft__db_path(db), want);
    ft__db_close(db);
    db = NULL;

    setenv("FLASHTUNE_DB", ":memory:", 1);
    ASSERT_EQ(ft__db_open(NULL, 0, &db, &err), FT_ERR_INVALID_ARGUMENT);
    ASSERT_CONTAINS(err.msg, "$FLASHTUNE_DB is ':memory:'");
    /* relative to the working directory: no directory "file:sub" may appear there */
    ASSERT_EQ(chdir(dir), 0);
    setenv("FLASHTUNE_DB", "file:sub/x.db", 1);
    ASSERT_EQ(ft__db_open(NULL, 0, &db, &err), FT_ERR_INVALID_ARGUMENT);
    ASSERT_CONTAINS(err.msg, "$FLASHTUNE_DB 'file:sub/x.db' starts with 'file:'");
    ASSERT_TRUE(!exists("file:sub"));
    ASSERT_EQ(chdir(cwd), 0);

    if (had_db)
        setenv("FLASHTUNE_DB", saved_db, 1);
    else
        unsetenv("FLASHTUNE_DB");
    if (had_xdg)
        setenv("XDG_DATA_HOME", saved_xdg, 1);
    else
        unsetenv("XDG_DATA_HOME");
    remove_dir(dir);
}

/* ---- what is at the path ------------------------------------------------------------------ */

/* A directory, a FIFO (SQLite would block on it for ever), a device and a link to nothing are
 * refused before SQLite opens them, and left as they were; a link to a database is followed. */
static void test_not_a_regular_file(void)
{
    char dir[64], path[128], target[128];
    struct stat st;
    ft_db *db = NULL;
    ft_err err;

    ASSERT_TRUE(make_dir(dir, sizeof dir));
    snprintf(path, sizeof path, "%s/a_dir.db", dir);
    ASSERT_EQ(mkdir(path, 0755), 0);
    ASSERT_EQ(refused_within(path, "a directory, not a regular file", 20), 0);

    snprintf(path, sizeof path, "%s/fifo.db", dir);
    ASSERT_EQ(mkfifo(path, 0644), 0);
    ASSERT_EQ(refused_within(path, "a FIFO, not a regular file", 20), 0);
    ASSERT_EQ(stat(path, &st), 0);
    ASSERT_TRUE(S_ISFIFO(st.st_mode));

    ASSERT_EQ(refused_within("/dev/null", "a character device, not a regular file", 20), 0);

    snprintf(path, sizeof path, "%s/dangling.db", dir);
    snprintf(target, sizeof target, "%s/nowhere.db", dir);
    ASSERT_EQ(symlink(target, path), 0);
    ASSERT_EQ(refused_within(path, "a symbolic link to nothing", 20), 0);
    ASSERT_TRUE(!exists(target));

    /* a link to a database: opened, its WAL beside the file it leads to */
    snprintf(target, sizeof target, "%s/real.db", dir);
    ASSERT_TRUE(make_db(target));
    snprintf(path, sizeof path, "%s/link.db", dir);
    ASSERT_EQ(symlink(target, path), 0);
    ASSERT_OK(ft__db_open(path, 0, &db, &err), &err);
    ft__db_close(db);
    ASSERT_OK(ft__db_open(path, 1, &db, &err), &err);
    ft__db_close(db);
    remove_dir(dir);
}

/* SQLite's side files (journal, WAL, shared memory) where they exist must be files too. */
static void test_side_files(void)
{
    static const char *const suffix[] = {"-journal", "-wal", "-shm"};
    char dir[64], path[128], side[160], want[200];
    size_t i;
    ft_db *db = NULL;
    ft_err err;

    ASSERT_TRUE(make_dir(dir, sizeof dir));
    snprintf(path, sizeof path, "%s/t.db", dir);
    ASSERT_TRUE(make_db(path));
    for (i = 0; i < sizeof suffix / sizeof suffix[0]; i++) {
        snprintf(side, sizeof side, "%s%s", path, suffix[i]);
        ASSERT_EQ(mkdir(side, 0755), 0);
        snprintf(want, sizeof want, "%s: a directory, not a regular file", side);
        ASSERT_EQ(refused_within(path, want, 20), 0);
        ASSERT_EQ(rmdir(side), 0);
        ASSERT_EQ(mkfifo(side, 0644), 0);
        snprintf(want, sizeof want, "%s: a FIFO, not a regular file", side);
        ASSERT_EQ(refused_within(path, want, 20), 0);
        ASSERT_EQ(unlink(side), 0);
    }
    ASSERT_OK(ft__db_open(path, 1, &db, &err), &err);
    ft__db_close(db);
    remove_dir(dir);
}

static void test_missing(void)
{
    char dir[64], path[160], file[320];
    ft_db *db = NULL;
    ft_err err;

    ASSERT_TRUE(make_dir(dir, sizeof dir));
    snprintf(path, sizeof path, "%s/nothing.db", dir);
    ASSERT_EQ(ft__db_open(path, 1, &db, &err), FT_ERR_DATABASE);
    ASSERT_TRUE(db == NULL);
    snprintf(file, sizeof file,
             "cannot open tuning database %s: no such file (`flashtune tune` makes one, `flashtune import` brings "
             "one from a pack)",
             path);
    ASSERT_STREQ(err.msg, file);
    ASSERT_TRUE(!exists(path));
    snprintf(path, sizeof path, "%s/no/such/dir/x.db", dir);
    ASSERT_EQ(ft__db_open(path, 0, &db, &err), FT_ERR_DATABASE);
    ASSERT_CONTAINS(err.msg, "cannot create tuning database");
    ASSERT_CONTAINS(err.msg, "/no/such/dir: No such file or directory");
    snprintf(file, sizeof file, "%s/plain", dir);
    ASSERT_TRUE(raw_exec(file, "CREATE TABLE x (a)") == SQLITE_OK);
    snprintf(path, sizeof path, "%s/plain/x.db", dir);
    ASSERT_EQ(ft__db_open(path, 0, &db, &err), FT_ERR_DATABASE);
    ASSERT_CONTAINS(err.msg, "tuning database");
    ASSERT_CONTAINS(err.msg, "plain/x.db: Not a directory");
    remove_dir(dir);
}

/* ---- files that are flashtune's, but not whole ------------------------------------------- */

/* flashtune's application id, tables, and no schema version: not a new file to initialise
 * (which would fail halfway, or be reported as empty), but a clear error; the file is left
 * byte for byte as it was. The same for a version without tables. */
static void test_unversioned_with_tables(void)
{
    char dir[64], path[128], sql[256], want[256];
    char *before;
    size_t n = 0;
    ft_db *db = NULL;
    ft_err err;
    int ro;

    ASSERT_TRUE(make_dir(dir, sizeof dir));
    snprintf(path, sizeof path, "%s/half.db", dir);
    snprintf(sql, sizeof sql,
             "PRAGMA application_id = %d; CREATE TABLE devices (x INTEGER); "
             "INSERT INTO devices VALUES (42);", FTDB_APP_ID);
    ASSERT_EQ(raw_exec(path, sql), SQLITE_OK);
    before = slurp(path, &n);
    ASSERT_TRUE(before != NULL);
    snprintf(want, sizeof want,
             "%s has flashtune's application id and 1 schema objects but no schema version "
             "(user_version 0)", path);
    for (ro = 1; ro >= 0; ro--) {
        ASSERT_EQ(ft__db_open(path, ro, &db, &err), FT_ERR_DATABASE);
        ASSERT_TRUE(db == NULL);
        ASSERT_CONTAINS(err.msg, want);
        ASSERT_CONTAINS(err.msg, "left as it is");
    }
    ASSERT_TRUE(same_bytes(path, before, n));
    ASSERT_TRUE(!side_exists(path, "-wal") && !side_exists(path, "-shm") && !side_exists(path, "-journal"));
    free(before);

    snprintf(path, sizeof path, "%s/bare.db", dir);
    snprintf(sql, sizeof sql, "PRAGMA application_id = %d; PRAGMA user_version = 2;", FTDB_APP_ID);
    ASSERT_EQ(raw_exec(path, sql), SQLITE_OK);
    before = slurp(path, &n);
    ASSERT_TRUE(before != NULL);
    for (ro = 1; ro >= 0; ro--) {
        ASSERT_EQ(ft__db_open(path, ro, &db, &err), FT_ERR_DATABASE);
        ASSERT_CONTAINS(err.msg, "has flashtune's schema version 2 but no tables");
    }
    ASSERT_TRUE(same_bytes(path, before, n));
    free(before);
    remove_dir(dir);
}

/* A migration that fails (here 1 -> 2, on a file that already has a table of that name)
 * leaves the file byte for byte as it was: its tables, its version and its journal mode (the
 * switch to WAL comes after the migration), with no side file left behind. */
static void test_failed_migration_leaves_file(void)
{
    char dir[64], path[128], text[32];
    char *before;
    size_t n = 0;
    ft_db *db = NULL;
    ft_err err;

    ASSERT_TRUE(make_dir(dir, sizeof dir));
    snprintf(path, sizeof path, "%s/v1.db", dir);
    ASSERT_TRUE(make_db(path));
    ASSERT_EQ(raw_exec(path, "PRAGMA journal_mode = DELETE; DROP VIEW v_misses; DROP TABLE misses; "
                             "CREATE TABLE misses (someone_elses INTEGER); PRAGMA user_version = 1;"),
              SQLITE_OK);
    raw_text(path, "PRAGMA journal_mode", text, sizeof text);
    ASSERT_STREQ(text, "delete");
    before = slurp(path, &n);
    ASSERT_TRUE(before != NULL);
    ASSERT_EQ(ft__db_open(path, 0, &db, &err), FT_ERR_DATABASE);
    ASSERT_TRUE(db == NULL);
    ASSERT_CONTAINS(err.msg, path);
    ASSERT_CONTAINS(err.msg, "schema migration 1 -> 2 failed");
    ASSERT_CONTAINS(err.msg, "table misses already exists");
    ASSERT_TRUE(same_bytes(path, before, n));
    ASSERT_TRUE(!side_exists(path, "-wal") && !side_exists(path, "-shm") && !side_exists(path, "-journal"));
    ASSERT_EQ(raw_int(path, "PRAGMA user_version"), 1);
    ASSERT_EQ(raw_int(path, "SELECT count(*) FROM results"), 1);
    /* read-only, it is still read as the schema-1 file it is */
    ASSERT_OK(ft__db_open(path, 1, &db, &err), &err);
    ft__db_close(db);
    ASSERT_TRUE(same_bytes(path, before, n));
    free(before);
    remove_dir(dir);
}

/* ---- a WAL database in a directory the reader cannot write --------------------------------- */

/* In a child (unprivileged): the database at path reads, read-only, with its one winner, and
 * nothing appears beside it; a writable open is refused with a message that says why. */
static int read_in_read_only_dir(const char *path)
{
    ft_db *db = NULL;
    ft_db_filter f;
    long long rows = 0;
    ft_err err;
    int bad = 0;

    if (ft__db_open(path, 1, &db, &err) != FT_OK) {
        fprintf(stderr, "read-only open: %s\n", err.msg);
        return 1;
    }
    ft__db_filter_init(&f);
    f.winners_only = 1;
    if (ft__db_query(db, &f, count_row, &rows, &err) != FT_OK || rows != 1) {
        fprintf(stderr, "query: %lld rows, %s\n", rows, rows == 1 ? "" : err.msg);
        bad = 1;
    }
    ft__db_close(db);
    db = NULL;
    if (side_exists(path, "-shm") || side_exists(path, "-wal")) {
        fprintf(stderr, "the read left a file beside %s\n", path);
        bad = 1;
    }
    if (ft__db_open(path, 0, &db, &err) != FT_ERR_DATABASE || strstr(err.msg, "is not writable") == NULL) {
        fprintf(stderr, "writable open: not refused as it should be (%s)\n", db == NULL ? err.msg : "opened");
        bad = 1;
    }
    ft__db_close(db);
    return bad;
}

/* In a child (unprivileged): a WAL with changes that were never copied into the file cannot be
 * read without its index, which cannot be made here: an error that names the WAL. */
static int refuse_unmerged_wal(const char *path)
{
    ft_db *db = NULL;
    ft_err err;

    if (ft__db_open(path, 1, &db, &err) != FT_ERR_DATABASE || strstr(err.msg, "-wal holds changes") == NULL ||
        strstr(err.msg, "wal_checkpoint") == NULL) {
        fprintf(stderr, "read-only open with an unmerged WAL: %s\n", db == NULL ? err.msg : "opened");
        ft__db_close(db);
        return 1;
    }
    return 0;
}

static void test_wal_in_read_only_directory(void)
{
    char dir[64], ro[96], path[128], copy[128], other[128], wal[160], copy_wal[160];
    char *data = NULL;
    size_t n = 0;
    sqlite3 *sq = NULL;
    ft_err err;
    int rc;

    ASSERT_TRUE(make_dir(dir, sizeof dir));
    ASSERT_EQ(chmod(dir, 0755), 0);
    snprintf(ro, sizeof ro, "%s/ro", dir);
    ASSERT_EQ(mkdir(ro, 0755), 0);
    snprintf(path, sizeof path, "%s/t.db", ro);
    ASSERT_TRUE(make_db(path));
    /* in WAL mode (header bytes 18 and 19 are 2), the WAL folded in by the last close */
    ASSERT_OK(ft__read_file(path, &data, &n, &err), &err);
    ASSERT_TRUE(n > 100 && data[18] == 2 && data[19] == 2);
    free(data);
    ASSERT_TRUE(!side_exists(path, "-wal") && !side_exists(path, "-shm"));
    /* a file whose WAL holds a change, as a writer killed before its last close leaves it (a
     * copy of another database and its WAL taken while a writer has it open) */
    snprintf(copy, sizeof copy, "%s/unmerged.db", ro);
    snprintf(copy_wal, sizeof copy_wal, "%s-wal", copy);
    snprintf(other, sizeof other, "%s/other.db", dir);
    snprintf(wal, sizeof wal, "%s-wal", other);
    ASSERT_TRUE(make_db(other));
    ASSERT_EQ(sqlite3_open(other, &sq), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(sq, "PRAGMA wal_autocheckpoint = 0; DELETE FROM results;", NULL, NULL, NULL),
              SQLITE_OK);
    ASSERT_OK(ft__read_file(other, &data, &n, &err), &err);
    ASSERT_OK(ft__write_file_atomic(copy, data, n, 0, &err), &err);
    free(data);
    ASSERT_OK(ft__read_file(wal, &data, &n, &err), &err);
    ASSERT_TRUE(n > 0);
    ASSERT_OK(ft__write_file_atomic(copy_wal, data, n, 0, &err), &err);
    free(data);
    sqlite3_close(sq);
    ASSERT_EQ(chmod(copy, 0644), 0);
    ASSERT_EQ(chmod(copy_wal, 0644), 0);

    ASSERT_EQ(chmod(ro, 0555), 0);
    rc = in_child(read_in_read_only_dir, path, 1, 60);
    if (rc == 77) {
        printf("skipped: cannot run as uid %d to make the directory read-only for the reader\n",
               UNPRIVILEGED_ID);
    } else {
        ASSERT_EQ(rc, 0);
        ASSERT_EQ(in_child(refuse_unmerged_wal, copy, 1, 60), 0);
    }
    ASSERT_EQ(chmod(ro, 0755), 0);
    ASSERT_TRUE(!side_exists(path, "-shm") && !side_exists(path, "-wal"));
    remove_dir(dir);
}

/* A database the process may not read (or write): the reason, before SQLite says only
 * "unable to open database file". */
static void test_permission_denied(void)
{
    char dir[64], open_dir[96], path[128];
    int rc;

    ASSERT_TRUE(make_dir(dir, sizeof dir));
    ASSERT_EQ(chmod(dir, 0755), 0);
    snprintf(open_dir, sizeof open_dir, "%s/open", dir);
    ASSERT_EQ(mkdir(open_dir, 0777), 0);
    ASSERT_EQ(chmod(open_dir, 0777), 0);
    snprintf(path, sizeof path, "%s/private.db", open_dir);
    ASSERT_TRUE(make_db(path));
    ASSERT_EQ(chmod(path, 0), 0); /* not even its owner's (which root would still be) */
    rc = refused_unprivileged(path, "Permission denied");
    if (rc == 77)
        printf("skipped: cannot run as uid %d to be refused\n", UNPRIVILEGED_ID);
    else
        ASSERT_EQ(rc, 0);
    ASSERT_TRUE(!side_exists(path, "-wal") && !side_exists(path, "-shm"));
    remove_dir(dir);
}

/* ---- locks -------------------------------------------------------------------------------- */

/* A file another connection holds an exclusive lock on (a writer in the middle of creating
 * it, with the rollback journal): the open waits for the busy timeout, then fails with a
 * message that says so, and succeeds once the lock is gone. */
static void test_locked_by_another_writer(void)
{
    char dir[64], path[128];
    sqlite3 *sq = NULL;
    ft_db *db = NULL;
    ft_err err;
    double t0, waited;

    ASSERT_TRUE(make_dir(dir, sizeof dir));
    snprintf(path, sizeof path, "%s/locked.db", dir);
    ASSERT_EQ(sqlite3_open(path, &sq), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(sq, "BEGIN EXCLUSIVE; CREATE TABLE other (x INTEGER);", NULL, NULL, NULL), SQLITE_OK);
    t0 = ft__now_ms();
    ASSERT_EQ(ft__db_open(path, 0, &db, &err), FT_ERR_DATABASE);
    waited = ft__now_ms() - t0;
    ASSERT_TRUE(db == NULL);
    ASSERT_CONTAINS(err.msg, path);
    ASSERT_CONTAINS(err.msg, "another process holds a lock on the database (gave up after 10 s)");
    ASSERT_TRUE(waited >= 9000 && waited < 60000);
    ASSERT_EQ(sqlite3_exec(sq, "ROLLBACK", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(sq);
    ASSERT_OK(ft__db_open(path, 0, &db, &err), &err);
    ft__db_close(db);
    remove_dir(dir);
}

FT_TEST_MAIN(FT_CASE(test_special_names), FT_CASE(test_env_names), FT_CASE(test_not_a_regular_file),
             FT_CASE(test_side_files), FT_CASE(test_missing), FT_CASE(test_unversioned_with_tables),
             FT_CASE(test_failed_migration_leaves_file), FT_CASE(test_wal_in_read_only_directory),
             FT_CASE(test_permission_denied),
             FT_CASE(test_locked_by_another_writer))
