/* flashtune export / import: kernel packs (tuning_db/pack.h) and their C source form. */
#include <ctype.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "common/json.h"
#include "runtime/session.h"
#include "tuner/tune.h"
#include "common/text.h"
#include "runtime/kernel_set.h"
#include "tuning_db/pack.h"

static const char export_usage[] =
    "usage: flashtune export [--db PATH] [--device NAME | --device-id N] --out FILE [--format pack|c]\n"
    "                        [--name SYMBOL] [-q]\n"
    "\n"
    "Writes one device's tuned winners (every bucket's winning variant, its measured time, its\n"
    "cubin and generated source) with the device's fingerprint to one file.\n"
    "\n"
    "  --db PATH          tuning database (default: as for tune)\n"
    "  --device NAME      the device whose name contains NAME (needed when the database holds\n"
    "                     winners of several)\n"
    "  --device-id N      the device with this id (flashtune devices --db lists them)\n"
    "  --out FILE         where to write (atomically)\n"
    "  --format pack      a pack for `flashtune import` and ft_context_options.pack (default)\n"
    "  --format c         a C source with the cubins as byte arrays and one `const ft_kernel_set`\n"
    "                     for ft_context_options.kernels (no NVRTC, no database at run time)\n"
    "  --name SYMBOL      the ft_kernel_set's name (default: FILE's base name up to its first '.',\n"
    "                     other characters than letters, digits and '_' as '_'); not a C keyword,\n"
    "                     nor reserved, nor starting with ft_ or FT_\n"
    "  -q                 no progress lines\n";

static const char import_usage[] =
    "usage: flashtune import FILE [--db PATH] [--verify] [--force] [--dry-run] [--device N|NAME] [--json] [-q]\n"
    "\n"
    "Checks every checksum of a pack, then merges its winners (kernels with their cubins and\n"
    "sources, results) into the tuning database, where query and the runtime library see them\n"
    "as if tuned here. Nothing is written unless every check passes.\n"
    "\n"
    "  --db PATH          tuning database (default: as for tune)\n"
    "  --verify           first verify every kernel against the reference on this GPU\n"
    "  --force            import a pack tuned on another GPU model or driver (recorded for this\n"
    "                     GPU); a pack for another compute capability is always refused\n"
    "  --dry-run          check the pack and list its winners; write nothing\n"
    "  --device N|NAME    the GPU to compare with and verify on: an ordinal, or the first GPU\n"
    "                     whose name contains NAME (default 0; --gpu N is the earlier spelling)\n"
    "  --json             one JSON line on stdout instead of the text: the pack (\"kind\": \"pack\")\n"
    "                     with --dry-run, else what was imported (\"kind\": \"import\")\n"
    "  -q                 less output\n"
    "\n"
    "The pack's device is compared with GPU N as tune sees it; on a machine without a GPU the\n"
    "winners are recorded for the pack's own device.\n";

/* ---- export ------------------------------------------------------------------------------- */

typedef struct pick_ctx {
    const char *name;   /* substring, or NULL */
    long long want_id;  /* or -1 */
    long long id;
    int matches;
    char list[2048];
} pick_ctx;

static int pick_device(void *ud, long long id, const ft_db_device *d, long long results, long long winners)
{
    pick_ctx *c = ud;
    size_t len = strlen(c->list);
    char name[400], nvrtc[64];

    (void)results;
    if (winners == 0)
        return 0;
    if (c->want_id >= 0 ? id != c->want_id : (c->name != NULL && !cli_name_contains(d->name, c->name)))
        return 0;
    c->matches++;
    c->id = id;
    snprintf(c->list + len, sizeof c->list - len, "\n  [%lld] %s, cc %d, driver %d, NVRTC %s: %lld winners", id,
             ft__printable_str(name, sizeof name, d->name), d->cc, d->driver_version, ft__printable_str(nvrtc, sizeof nvrtc, d->nvrtc_version),
             winners);
    return 0;
}

/* The default symbol: the file's base name up to its first '.', each byte that cannot be in a C
 * identifier replaced by '_' ("h200-kernels.c" gives h200_kernels). Returns 0 when that is no
 * name ft__c_identifier_check accepts (why says which and why). */
static int symbol_from_path(const char *path, char *out, size_t cap, char *why, size_t wcap)
{
    const char *base = strrchr(path, '/');
    size_t i, n = 0;

    base = base != NULL ? base + 1 : path;
    for (i = 0; base[i] != '\0' && base[i] != '.' && n + 1 < cap; i++)
        out[n++] = isalnum((unsigned char)base[i]) && (unsigned char)base[i] < 0x80 ? base[i] : '_';
    out[n] = '\0';
    return ft__c_identifier_check(out, why, wcap);
}

int cmd_export(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"db", required_argument, NULL, 'D'},     {"device", required_argument, NULL, 'n'},
        {"device-id", required_argument, NULL, 'i'}, {"out", required_argument, NULL, 'o'},
        {"format", required_argument, NULL, 'f'}, {"name", required_argument, NULL, 's'},
        {"help", no_argument, NULL, 'h'},         {NULL, 0, NULL, 0}};
    const char *db_path = NULL, *out_path = NULL, *symbol = NULL;
    char symbuf[256], why[200];
    int as_c = 0, quiet = 0, ch, status = 1, i;
    ft_pack_skipped skipped;
    long v;
    size_t bytes = 0, cubin_bytes = 0;
    ft_status rc;
    pick_ctx pc;
    ft_db *db = NULL;
    ft_pack pack;
    ft_err err;

    memset(&pc, 0, sizeof pc);
    memset(&pack, 0, sizeof pack);
    memset(&skipped, 0, sizeof skipped);
    pc.want_id = -1;
    optind = 1;
    while ((ch = getopt_long(argc, argv, "hq", longopts, NULL)) != -1) {
        switch (ch) {
        case 'D': db_path = optarg; break;
        case 'n': pc.name = optarg; break;
        case 'i':
            if (!cli_parse_int("export", "--device-id", optarg, 1, 1L << 30, &v))
                return EXIT_USAGE;
            pc.want_id = v;
            break;
        case 'o': out_path = optarg; break;
        case 'f':
            if (strcmp(optarg, "c") != 0 && strcmp(optarg, "pack") != 0)
                return cli_usage_error("export", "--format takes pack or c, not '%s'", optarg);
            as_c = strcmp(optarg, "c") == 0;
            break;
        case 's': symbol = optarg; break;
        case 'q': quiet = 1; break;
        case 'h': fputs(export_usage, stdout); return 0;
        default: return cli_usage_error("export", "bad option");
        }
    }
    if (optind != argc)
        return cli_usage_error("export", "unexpected argument '%s'", argv[optind]);
    if (out_path == NULL)
        return cli_usage_error("export", "--out FILE is required");
    if (symbol != NULL && !ft__c_identifier_check(symbol, why, sizeof why))
        return cli_usage_error("export", "--name '%s' cannot name the kernel set: %s", symbol, why);
    if (symbol == NULL && as_c) {
        if (!symbol_from_path(out_path, symbuf, sizeof symbuf, why, sizeof why))
            return cli_usage_error("export", "the file name %s gives the C name '%s', which cannot name the kernel "
                                   "set (%s): choose one with --name SYMBOL", out_path, symbuf, why);
        symbol = symbuf;
    }
    if (ft__db_open(db_path, 1, &db, &err) != FT_OK || ft__db_devices(db, pick_device, &pc, &err) != FT_OK) {
        status = cli_fail("export", &err);
        goto out;
    }
    if (pc.matches != 1) {
        pick_ctx all;
        memset(&all, 0, sizeof all);
        all.want_id = -1;
        ft__db_devices(db, pick_device, &all, NULL);
        if (pc.matches == 0)
            fprintf(stderr, "flashtune export: no device %s%s%s has winners in %s%s%s\n",
                    pc.want_id >= 0 ? "with that id" : pc.name != NULL ? "matching '" : "",
                    pc.want_id < 0 && pc.name != NULL ? pc.name : "", pc.want_id < 0 && pc.name != NULL ? "'" : "",
                    ft__db_path(db), all.matches > 0 ? "; devices with winners:" : " (tune first)", all.list);
        else
            fprintf(stderr, "flashtune export: %d devices match; pick one with --device NAME or --device-id N:%s\n",
                    pc.matches, pc.list);
        goto out;
    }
    rc = ft__pack_from_db(db, pc.id, &pack, &skipped, &err);
    if (rc != FT_OK) {
        status = cli_fail("export", &err);
        goto out;
    }
    for (i = 0; i < pack.nkernels; i++) {
        cubin_bytes += pack.kernels[i].k.cubin_size;
        if (!quiet)
            printf("  kernel %d/%d: %s (%zu-byte cubin)\n", i + 1, pack.nkernels, pack.kernels[i].k.variant,
                   pack.kernels[i].k.cubin_size);
    }
    if (skipped.no_cubin > 0)
        fprintf(stderr, "flashtune export: warning: %d winners have no stored cubin and are left out (tune again to "
                "store them)\n", skipped.no_cubin);
    if (skipped.refused > 0)
        fprintf(stderr, "flashtune export: warning: %d winners are left out because import would refuse them; the "
                "first: %s\n", skipped.refused, skipped.first);
    if (as_c) {
        if (ft__pack_write_c(&pack, out_path, symbol, &err) != FT_OK) {
            status = cli_fail("export", &err);
            goto out;
        }
        printf("exported %d buckets (%d kernels, %zu bytes of cubins) of %s (cc %d.%d, driver %d, NVRTC %s) "
               "to %s as C: const ft_kernel_set %s\n", pack.nwinners, pack.nkernels, cubin_bytes, pack.device.name,
               pack.device.cc / 10, pack.device.cc % 10, pack.device.driver_version, pack.device.nvrtc_version,
               out_path, symbol);
    } else {
        if (ft__pack_write(&pack, out_path, &bytes, &err) != FT_OK) {
            status = cli_fail("export", &err);
            goto out;
        }
        printf("exported %d buckets (%d kernels, %zu bytes of cubins) of %s (cc %d.%d, driver %d, NVRTC %s) "
               "to %s: %zu bytes, sha256 %s\n", pack.nwinners, pack.nkernels, cubin_bytes, pack.device.name,
               pack.device.cc / 10, pack.device.cc % 10, pack.device.driver_version, pack.device.nvrtc_version,
               out_path, bytes, pack.sha256);
    }
    status = 0;
out:
    ft__pack_free(&pack);
    ft__db_close(db);
    return status;
}

/* ---- import ------------------------------------------------------------------------------- */

static void describe(const ft_db_device *d, char *out, size_t cap)
{
    char name[400], nvrtc[64];

    snprintf(out, cap, "%s (cc %d.%d, %d SMs, %lld B smem/block, driver %d, NVRTC %s)", ft__printable_str(name, sizeof name, d->name),
             d->cc / 10, d->cc % 10, d->sms, d->smem_per_block, d->driver_version,
             ft__printable_str(nvrtc, sizeof nvrtc, d->nvrtc_version));
}

static void print_line(void *ud, const char *line)
{
    (void)ud;
    printf("%s\n", line);
}

/* Verifies every winner of the pack on GPU `gpu` against the reference, on its bucket's shape. */
static ft_status verify_pack(ft_pack *p, int gpu, int quiet, ft_err *err)
{
    const ft_kernel_set *set = NULL;
    ft_session s;
    ft_status rc;
    int i;

    rc = ft__pack_kernel_set(p, &set, err);
    if (rc != FT_OK)
        return rc;
    rc = ft__session_open(gpu, NULL, 1, &s, err);
    if (rc != FT_OK) {
        ft__err_prefix(err, "--verify needs a GPU to run the kernels on");
        return rc;
    }
    for (i = 0; i < p->nwinners && rc == FT_OK; i++) {
        const ft_pack_winner *w = &p->winners[i];
        const ft_pack_kernel *pk = &p->kernels[w->kernel];
        ft_problem prob;
        ft_tensors t;
        ft_kernel k;
        ft_check check;
        char bucket[96];

        memset(&prob, 0, sizeof prob);
        memset(&t, 0, sizeof t);
        memset(&k, 0, sizeof k);
        memset(&check, 0, sizeof check);
        prob.batch = w->r.batch, prob.heads_q = w->r.heads_q, prob.heads_kv = w->r.heads_kv;
        prob.seqlen_q = w->r.seqlen_q, prob.seqlen_k = w->r.seqlen_k;
        prob.head_dim = (int)ft__key_get(&w->r.key, "d", 0);
        prob.causal = (int)ft__key_get(&w->r.key, "causal", 0), prob.bf16 = strcmp(w->r.key.dtype, "bf16") == 0;
        prob.layout = FT_LAYOUT_BSHD;
        rc = ft__problem_validate(&prob, err);
        if (rc == FT_OK)
            rc = ft__tensors_create(s.cu, &prob, &t, err);
        if (rc == FT_OK)
            rc = ft__tensors_fill(&s.verifier, &t, 7000 + (uint64_t)i, 1.f, err);
        if (rc == FT_OK)
            rc = ft__tensors_reference(&s.verifier, &t, err);
        if (rc == FT_OK)
            rc = ft__kernel_set_load(s.cu, &s.arch, &set->entries[i], &k, err);
        if (rc == FT_OK)
            rc = ft__verify_kernel_gpu(&s.verifier, &k, &t, &check, err);
        if (rc == FT_OK && !check.pass)
            rc = ft__fail(err, FT_ERR_WRONG_RESULT, "%s fails verification on b=%d,hq=%d,hkv=%d,sq=%d,sk=%d "
                          "(%s, causal=%d): %s", pk->k.variant, prob.batch, prob.heads_q, prob.heads_kv,
                          prob.seqlen_q, prob.seqlen_k, w->r.key.dtype, prob.causal, check.detail);
        else if (rc != FT_OK)
            ft__err_prefix(err, "verifying %s", pk->k.variant);
        else if (!quiet) {
            ft__key_describe(&w->r.key, bucket, sizeof bucket);
            printf("  verified %d/%d: %s d=%d causal=%d (%s): O relative L2 %.2e, LSE error %.2e\n", i + 1,
                   p->nwinners, w->r.key.dtype, prob.head_dim, prob.causal, bucket, check.o_rel_l2, check.lse_max_err);
        }
        ft__kernel_unload(s.cu, &k);
        ft__tensors_destroy(s.cu, &t);
    }
    ft__session_close(&s);
    return rc;
}

int cmd_import(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"db", required_argument, NULL, 'D'}, {"verify", no_argument, NULL, 'V'},
        {"force", no_argument, NULL, 'F'},    {"dry-run", no_argument, NULL, 'n'},
        {"device", required_argument, NULL, 'd'}, {"gpu", required_argument, NULL, 'g'},
        {"json", no_argument, NULL, 'j'},      {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    const char *db_path = NULL, *file = NULL;
    int verify = 0, force = 0, dry_run = 0, quiet = 0, json = 0, ch, status = 1, have_here = 0, winning = 0;
    long gpu = 0;
    char pack_desc[400], here_desc[400];
    const ft_kernel_set *set = NULL;
    ft_db_device here;
    ft_db *db = NULL;
    ft_pack pack;
    ft_err err, probe_err;

    memset(&pack, 0, sizeof pack);
    memset(&here, 0, sizeof here);
    optind = 1;
    while ((ch = getopt_long(argc, argv, "hq", longopts, NULL)) != -1) {
        switch (ch) {
        case 'D': db_path = optarg; break;
        case 'V': verify = 1; break;
        case 'F': force = 1; break;
        case 'n': dry_run = 1; break;
        case 'g': /* the earlier spelling of --device N */
            fprintf(stderr, "flashtune import: --gpu is now --device\n");
            /* fall through */
        case 'd': {
            int d, st;
            if (!cli_parse_device("import", optarg, 0, &d, &st))
                return st;
            gpu = d;
            break;
        }
        case 'q': quiet = 1; break;
        case 'j': json = 1; break;
        case 'h': fputs(import_usage, stdout); return 0;
        default: return cli_usage_error("import", "bad option");
        }
    }
    if (optind + 1 != argc)
        return cli_usage_error("import", optind == argc ? "a pack FILE is required" : "one pack FILE, not several");
    file = argv[optind];
    if (json)
        quiet = 1; /* the text goes; the JSON line says it all */

    /* 1. Every check of the file before anything else. */
    if (ft__pack_read(file, &pack, &err) != FT_OK || ft__pack_kernel_set(&pack, &set, &err) != FT_OK) {
        status = cli_fail("import", &err);
        goto out;
    }
    describe(&pack.device, pack_desc, sizeof pack_desc);
    if (!quiet)
        printf("%s: %d buckets, %d kernels, tuned on %s, written by flashtune %s on %s; every checksum matches\n",
               file, pack.nwinners, pack.nkernels, pack_desc, pack.flashtune_version, pack.created);
    if (dry_run && json) {
        printf("{\"kind\": \"pack\", \"file\": ");
        ft__json_string(stdout, file);
        printf(", \"buckets\": %d, \"kernels\": %d, \"device\": ", pack.nwinners, pack.nkernels);
        ft__json_string(stdout, pack.device.name);
        printf(", \"cc\": %d, \"flashtune\": ", pack.device.cc);
        ft__json_string(stdout, pack.flashtune_version);
        printf(", \"created\": ");
        ft__json_string(stdout, pack.created);
        printf(", \"checksums\": \"match\"}\n");
        status = 0;
        goto out;
    }
    if (dry_run) {
        if (ft__pack_list(set, print_line, NULL, &err) != FT_OK) {
            status = cli_fail("import", &err);
            goto out;
        }
        status = 0;
        goto out;
    }

    /* 2. The GPU here, as tune sees it. */
    if (ft__tune_probe(getenv("FLASHTUNE_WORKER"), NULL, (int)gpu, &here, &probe_err) == FT_OK) {
        have_here = 1;
        describe(&here, here_desc, sizeof here_desc);
    }
    if (have_here && here.cc != pack.device.cc) {
        fprintf(stderr, "flashtune import: %s was tuned on %s, but GPU %ld here is %s: its cubins cannot run on "
                "compute capability %d.%d (not even with --force)\n", file, pack_desc, gpu, here_desc, here.cc / 10,
                here.cc % 10);
        goto out;
    }
    if (have_here &&
        (!ft__db_device_same_model(&here, &pack.device) || !ft__db_device_same_driver(&here, &pack.device))) {
        const char *what =
            !ft__db_device_same_model(&here, &pack.device) ? "another GPU model" : "another driver or NVRTC";
        if (!force) {
            fprintf(stderr, "flashtune import: %s was tuned on %s, but GPU %ld here is %s: a pack for %s is refused "
                    "(--force imports it for this GPU anyway)\n", file, pack_desc, gpu, here_desc, what);
            goto out;
        }
        fprintf(stderr, "flashtune import: warning: %s was tuned on %s, but GPU %ld here is %s (%s); importing it "
                "for this GPU because of --force: its choices may not be the fastest here (--verify checks "
                "that they are correct)\n", file, pack_desc, gpu, here_desc, what);
    }
    if (!have_here && !quiet)
        printf("no GPU here to compare with (%s): the winners are recorded for the pack's own device\n",
               probe_err.msg);

    /* 3. Optionally, every kernel on this GPU against the reference. */
    if (verify) {
        if (verify_pack(&pack, (int)gpu, quiet, &err) != FT_OK) {
            status = cli_fail("import", &err);
            fprintf(stderr, "flashtune import: nothing was imported\n");
            goto out;
        }
    }

    /* 4. The merge, in one transaction. */
    if (ft__db_open(db_path, 0, &db, &err) != FT_OK) {
        status = cli_fail("import", &err);
        goto out;
    }
    if (ft__pack_import(db, &pack, have_here ? &here : NULL, &winning, &err) != FT_OK) {
        if (err.code == FT_ERR_CORRUPT)
            ft__err_prefix(&err, "%s is refused, nothing was imported", file);
        status = cli_fail("import", &err);
        goto out;
    }
    if (json) {
        printf("{\"kind\": \"import\", \"file\": ");
        ft__json_string(stdout, file);
        printf(", \"db\": ");
        ft__json_string(stdout, ft__db_path(db));
        printf(", \"device\": ");
        ft__json_string(stdout, pack.device.name);
        printf(", \"winners\": %d, \"kernels\": %d, \"winning\": %d, \"verified\": %s, \"recorded_for\": \"%s\"}\n",
               pack.nwinners, pack.nkernels, winning, verify ? "true" : "false", have_here ? "this GPU" : "the pack's device");
        status = 0;
        goto out;
    }
    printf("imported %d winners (%d kernels) of %s into %s%s: %d now win their bucket", pack.nwinners,
           pack.nkernels, pack.device.name, ft__db_path(db), verify ? ", all verified on this GPU" : "", winning);
    if (winning < pack.nwinners)
        printf("; %d buckets keep a faster result already in the database, or the pack's template version is "
               "not the database's current one", pack.nwinners - winning);
    printf("\n");
    status = 0;
out:
    ft__db_close(db);
    ft__pack_free(&pack);
    return status;
}
