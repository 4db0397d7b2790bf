/* flashtune query: the winners (or every measurement) of the tuning database. */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "common/json.h"
#include "generator/variant.h"
#include "tuning_db/db.h"

static const char usage[] =
    "usage: flashtune query [options]\n"
    "\n"
    "Prints the winner of every bucket in the tuning database (with --all, every measured\n"
    "variant of the matching buckets, with its status and reason; with --misses, the buckets\n"
    "applications ran without a tuned winner, recorded with FLASHTUNE_RECORD_MISSES=1).\n"
    "\n"
    "  --db PATH          tuning database (default: as for tune)\n"
    "  --device NAME      only devices whose name contains NAME\n"
    "  --d N              only head dim N\n"
    "  --causal, --non-causal\n"
    "  --dtype f16|bf16  (fp16, float16, half and bfloat16 too)\n"
    "  --all              every measurement, not only the winners\n"
    "  --misses           the recorded misses: bucket, first shape, what ran instead, how\n"
    "                     often, when, and whether the bucket has a winner now\n"
    "  --json             JSON lines, one per row\n";

typedef struct query_ctx {
    int json;
    long long rows;
    const ft_db_filter *f; /* misses: the bucket filters */
    int write_errno;       /* why writing stdout failed (0: it did not) */
} query_ctx;

/* Stops a listing at the first failed write to stdout, keeping the reason: glibc drops what it
 * could not write, so at exit the stream may have nothing left to fail on and no reason to give. */
static int write_failed(query_ctx *q)
{
    if (!ferror(stdout))
        return 0;
    if (q->write_errno == 0)
        q->write_errno = errno != 0 ? errno : EIO;
    return 1;
}

/* The fields of a key that the listings show (every attention operation's key has dtype, d,
 * causal, seqlen and bh; the forward's and the backward's group, the forward's sq). group and sq
 * are text: "-" where the key has no such field (null in JSON). */
typedef struct shown_key {
    const char *op;
    const char *dtype;
    int head_dim, causal, seqlen_bucket, bh_bucket;
    char group[24], sq[24];
} shown_key;

static void show_field(const ft_key *k, const char *name, const char *none, char *out, size_t cap)
{
    long long v = ft__key_get(k, name, -1);

    if (v < 0)
        snprintf(out, cap, "%s", none);
    else
        snprintf(out, cap, "%lld", v);
}

static shown_key show_key(const ft_key *k, int json)
{
    shown_key b;

    b.op = k->op != NULL ? k->op->name : "?";
    b.dtype = k->dtype;
    b.head_dim = (int)ft__key_get(k, "d", 0);
    b.causal = (int)ft__key_get(k, "causal", 0);
    b.seqlen_bucket = (int)ft__key_get(k, "seqlen", 0);
    b.bh_bucket = (int)ft__key_get(k, "bh", 0);
    show_field(k, "group", json ? "null" : "-", b.group, sizeof b.group);
    show_field(k, "sq", json ? "null" : "-", b.sq, sizeof b.sq);
    return b;
}

static int print_miss(void *ud, const ft_db_miss *m)
{
    query_ctx *q = ud;
    const shown_key key = show_key(&m->key, q->json), *b = &key;
    char shape[96];

    if ((q->f->dtype != NULL && strcmp(q->f->dtype, b->dtype) != 0) ||
        (q->f->head_dim >= 0 && q->f->head_dim != b->head_dim) || (q->f->causal >= 0 && q->f->causal != b->causal))
        return 0;
    snprintf(shape, sizeof shape, "b=%d,hq=%d,hkv=%d,sq=%d,sk=%d", m->batch, m->heads_q, m->heads_kv, m->seqlen_q,
             m->seqlen_k);
    if (q->json) {
        printf("{\"device\": ");
        ft__json_string(stdout, m->device.name);
        printf(", \"driver_version\": %d, \"nvrtc_version\": ", m->device.driver_version);
        ft__json_string(stdout, m->device.nvrtc_version);
        printf(", \"op\": \"%s\", \"dtype\": \"%s\", \"d\": %d, \"causal\": %d, \"group\": %s, \"sq_bucket\": %s, "
               "\"seqlen_bucket\": %d, \"bh_bucket\": %d, \"shape\": \"%s\", \"fallback\": ",
               b->op, b->dtype, b->head_dim, b->causal, b->group, b->sq, b->seqlen_bucket, b->bh_bucket, shape);
        ft__json_string(stdout, m->fallback);
        printf(", \"count\": %lld, \"first_seen\": \"%s\", \"last_seen\": \"%s\", \"tuned\": %s}\n", m->count,
               m->first_seen, m->last_seen, m->tuned ? "true" : "false");
    } else {
        if (q->rows == 0)
            printf("%-14s %-4s %4s %6s %5s %6s %7s %6s  %-36s %-8s %6s  %-19s  %-19s  %s\n", "device", "type", "d",
                   "causal", "group", "sq", "seqlen", "b*h", "first shape", "ran", "count", "first seen", "last seen",
                   "tuned now");
        printf("%-14.14s %-4s %4d %6d %5s %6s %7d %6d  %-36s %-8s %6lld  %-19s  %-19s  %s\n", m->device.name, b->dtype,
               b->head_dim, b->causal, b->group, b->sq, b->seqlen_bucket, b->bh_bucket, shape, m->fallback, m->count,
               m->first_seen, m->last_seen, m->tuned ? "yes" : "no");
    }
    q->rows++;
    return write_failed(q);
}

static int print_row(void *ud, const ft_db_row *row)
{
    query_ctx *q = ud;
    const ft_db_result *r = &row->result;
    const char *status = ft__result_status_name(r->status);
    const shown_key k = show_key(&r->key, q->json);
    char key[FT_KEY_TEXT_MAX];

    ft__key_format(&r->key, key, sizeof key);

    if (q->json) {
        printf("{\"device\": ");
        ft__json_string(stdout, row->device.name);
        printf(", \"op\": \"%s\", \"dtype\": \"%s\", \"d\": %d, \"causal\": %d, \"group\": %s, \"sq_bucket\": %s, "
               "\"seqlen_bucket\": %d, \"bh_bucket\": %d, \"shape\": \"b=%d,hq=%d,hkv=%d,sq=%d,sk=%d\", "
               "\"variant\": ",
               k.op, k.dtype, k.head_dim, k.causal, k.group, k.sq, k.seqlen_bucket, k.bh_bucket, r->batch, r->heads_q,
               r->heads_kv, r->seqlen_q, r->seqlen_k);
        ft__json_string(stdout, row->variant);
        printf(", \"status\": \"%s\"", status);
        if (!isnan(r->median_ms))
            printf(", \"median_ms\": %.6f, \"iqr_ms\": %.6f, \"tflops\": %.2f", r->median_ms,
                   isnan(r->iqr_ms) ? 0 : r->iqr_ms, r->tflops);
        if (!isnan(r->max_error))
            printf(", \"error\": %.3g", r->max_error);
        if (r->reason[0]) {
            printf(", \"reason\": ");
            ft__json_string(stdout, r->reason);
        }
        printf(", \"key\": ");
        ft__json_string(stdout, key);
        printf(", \"stale\": %s, \"preferred\": %s, \"winner\": %s, \"measured_at\": \"%s\"}\n",
               row->stale ? "true" : "false", row->preferred ? "true" : "false", row->winner ? "true" : "false",
               row->measured_at);
    } else {
        if (q->rows == 0)
            printf("%-14s %-3s %-4s %4s %6s %5s %6s %7s %6s  %-70s %-13s %9s %7s  %s\n", "device", "op", "type", "d",
                   "causal", "group", "sq", "seqlen", "b*h", "variant", "status", "ms", "TFLOP/s", "note");
        printf("%-14.14s %-3s %-4s %4d %6d %5s %6s %7d %6d  %-70s %-13s ", row->device.name, k.op, k.dtype, k.head_dim,
               k.causal, k.group, k.sq, k.seqlen_bucket, k.bh_bucket, row->variant, status);
        if (!isnan(r->median_ms))
            printf("%9.4f %7.1f  ", r->median_ms, r->tflops);
        else
            printf("%9s %7s  ", "-", "-");
        printf("%s%s%s%s\n", row->winner ? "winner " : "", row->preferred ? "decided " : "", row->stale ? "stale " : "",
               r->reason);
    }
    q->rows++;
    return write_failed(q);
}

int cmd_query(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"db", required_argument, NULL, 'D'},    {"device", required_argument, NULL, 'n'},
        {"d", required_argument, NULL, 'd'},     {"causal", no_argument, NULL, 'c'},
        {"non-causal", no_argument, NULL, 'N'},  {"dtype", required_argument, NULL, 't'},
        {"all", no_argument, NULL, 'a'},         {"json", no_argument, NULL, 'J'},
        {"misses", no_argument, NULL, 'M'},      {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    const char *db_path = NULL;
    ft_db_filter f;
    query_ctx q;
    ft_db *db = NULL;
    ft_err err;
    long v;
    int ch, status = 1, misses = 0;

    ft__db_filter_init(&f);
    f.winners_only = 1;
    memset(&q, 0, sizeof q);
    optind = 1;
    while ((ch = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (ch) {
        case 'D': db_path = optarg; break;
        case 'n': f.device_name = optarg; break;
        case 'd':
            if (!cli_parse_int("query", "--d", optarg, 1, 1024, &v))
                return EXIT_USAGE;
            f.head_dim = (int)v;
            break;
        case 'c': f.causal = 1; break;
        case 'N': f.causal = 0; break;
        case 't':
            if (ft__dtype_name(optarg) == NULL)
                return cli_usage_error("query", "--dtype takes f16 (fp16, float16, half) or bf16 (bfloat16), not '%s'",
                                       optarg);
            f.dtype = ft__dtype_name(optarg);
            break;
        case 'a': f.winners_only = 0; break;
        case 'J': q.json = 1; break;
        case 'M': misses = 1; break;
        case 'h': fputs(usage, stdout); return 0;
        default: return cli_usage_error("query", "bad option");
        }
    }
    if (optind != argc)
        return cli_usage_error("query", "unexpected argument '%s'", argv[optind]);
    if (misses && !f.winners_only)
        return cli_usage_error("query", "--misses and --all do not go together");
    if (misses) {
        q.f = &f;
        if (ft__db_open(db_path, 1, &db, &err) != FT_OK ||
            ft__db_misses(db, f.device_name, -1, print_miss, &q, &err) != FT_OK) {
            status = cli_fail("query", &err);
            goto out;
        }
        if (q.write_errno != 0)
            goto write_error;
        if (q.rows == 0)
            fprintf(stderr, "flashtune query: no misses recorded in %s (FLASHTUNE_RECORD_MISSES=1 records them)\n",
                    ft__db_path(db));
        else if (!q.json)
            printf("%lld misses in %s  (flashtune tune --misses tunes them)\n", q.rows, ft__db_path(db));
        status = 0;
        goto out;
    }
    if (ft__db_open(db_path, 1, &db, &err) != FT_OK || ft__db_query(db, &f, print_row, &q, &err) != FT_OK) {
        status = cli_fail("query", &err);
        goto out;
    }
    if (q.write_errno != 0)
        goto write_error;
    if (q.rows == 0)
        fprintf(stderr, "flashtune query: no %s match in %s\n", f.winners_only ? "winners" : "results", ft__db_path(db));
    else if (!q.json)
        printf("%lld rows from %s\n", q.rows, ft__db_path(db));
    status = 0;
    goto out;
write_error:
    fprintf(stderr, "flashtune query: writing the output failed: %s\n", strerror(q.write_errno));
    status = 1;
out:
    ft__db_close(db);
    return status;
}

static int print_device(void *ud, long long id, const ft_db_device *d, long long results, long long winners)
{
    if (*(const int *)ud) {
        printf("{\"kind\": \"database\", \"id\": %lld, \"name\": ", id);
        ft__json_string(stdout, d->name);
        printf(", \"cc\": %d, \"sms\": %d, \"smem_per_block\": %lld, \"driver\": %d, \"nvrtc\": ", d->cc, d->sms,
               d->smem_per_block, d->driver_version);
        ft__json_string(stdout, d->nvrtc_version);
        printf(", \"results\": %lld, \"winners\": %lld}\n", results, winners);
        return 0;
    }
    printf("  [%lld] %s, cc %d.%d, %d SMs, %lld KiB smem/block, driver %d.%d, NVRTC %s: %lld results, %lld winners\n",
           id, d->name, d->cc / 10, d->cc % 10, d->sms, d->smem_per_block / 1024, d->driver_version / 1000,
           d->driver_version % 1000 / 10, d->nvrtc_version, results, winners);
    return 0;
}

/* The devices section of `flashtune devices`: those recorded in the database. No database yet
 * (a fresh machine) is said, not a failure. */
int cli_print_db_devices(const char *db_path, int json)
{
    char path[4096];
    ft_db *db = NULL;
    ft_err err;
    int rc = 0;

    if (db_path == NULL && ft__db_default_path(path, sizeof path, 0, &err) == FT_OK)
        db_path = path;
    if (db_path != NULL && access(db_path, F_OK) != 0 && errno == ENOENT) {
        if (json) {
            printf("{\"kind\": \"database\", \"path\": ");
            ft__json_string(stdout, db_path);
            printf(", \"exists\": false}\n");
        } else {
            printf("tuning database: none yet at %s (`flashtune tune` makes one, `flashtune import` brings one "
                   "from a pack)\n", db_path);
        }
        return 0;
    }
    if (ft__db_open(db_path, 1, &db, &err) != FT_OK) {
        if (json) {
            printf("{\"kind\": \"database\", \"error\": ");
            ft__json_string(stdout, err.msg);
            printf("}\n");
        } else {
            printf("tuning database: %s\n", err.msg);
        }
        return 1;
    }
    if (!json)
        printf("devices in %s:\n", ft__db_path(db));
    if (ft__db_devices(db, print_device, &json, &err) != FT_OK) {
        fprintf(stderr, "flashtune devices: %s\n", err.msg);
        rc = 1;
    }
    ft__db_close(db);
    return rc;
}
