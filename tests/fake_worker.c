#define _POSIX_C_SOURCE 200809L
/*
 * A stand-in for `flashtune worker` that needs no GPU: it speaks the worker protocol
 * (tuner/worker.c) and makes up deterministic timings, so the tuner's scheduling, recording,
 * resuming and fault handling can be tested anywhere. Behaviour on demand, by environment:
 *   FAKE_DEVICE       device name (default "Fake GPU")
 *   FAKE_FAULT        kernels whose entry contains this string fault (answer, then exit 3)
 *   FAKE_CRASH        ... make the worker die without answering (abort)
 *   FAKE_HANG         ... never answer
 *   FAKE_WRONG        ... fail verification
 *   FAKE_ONLY_SK      FAKE_FAULT, _CRASH, _HANG and _WRONG only on shapes of this many keys
 *   FAKE_INTERRUPT_AFTER=N   after answering N measurements (not counting the re-measurements of
 *                     near-ties, which are not verified), send SIGINT to the tuner (a Ctrl-C)
 *   FAKE_LOG          append every command received to this file
 *   FAKE_PIDS         append this process's id to this file (to check that none is left behind)
 *   FAKE_COUNT        GPUs to report (default 2)
 *   FAKE_ODD_DEVICE   the device ordinal that reports another GPU model (for --device all)
 *   FAKE_CC, FAKE_DRIVER   the compute capability (default 90) and driver version (13000)
 *   FAKE_STUBBORN=1   ignore quit and the end of the input: only a kill ends the worker
 *   FAKE_DELAY_MS     take this long over every measurement (as a GPU would)
 *   FAKE_DTYPE_BLIND=1  a kernel's speed leaves its entry's dtype out (f16 and bf16 twins alike)
 *   FAKE_REPLAY       a file of lines "ENTRY B HQ HKV SQ SK MEDIAN_MS": a kernel's median on a shape
 *                     is the file's (measurements made elsewhere, replayed: bench/search_replay.py);
 *                     one the file lacks is a wrong result; a shape the file has no line of is
 *                     refused at set-up (the replay cannot speak for it)
 *   FAKE_RACE_SLOWER  every median a race command answers times 1 + this (a race times at the
 *                     sustained clock, slower than a measurement after a gap)
 *   FAKE_JITTER       every median times 1 + a made-up deviation of at most this fraction
 *                     (deterministic: the same sequence in every run), as a GPU's noise
 *   FAKE_BAD          a way to break the protocol, in the reply to every measurement of a kernel
 *                     whose entry contains FAKE_BAD_MATCH (every kernel when that is unset):
 *       long        a reply line of 100 KB         flood      100 KB without a newline, then silence
 *       neg, zero, tiny, nan, inf                  that median (-1, 0, 1e-300, nan, inf)
 *       quartiles   q1 above the median            reps0, repsfrac   reps=0, reps=2.5
 *       l2          an ok result with a relative error of 0.5
 *       tflops      a median of 0.5 us (an impossible TFLOP/s for the shape)
 *       timing      time_ms=-1                     junk       median=0.5ms
 *       unknown     an extra key                   dup        the median twice
 *       status      status=great                   escape     an escape character in the detail
 *       unsolicited an extra result line (the previous id) before the reply
 *       wrongid     the reply carries the next id  noid       the reply carries no id
 *       trickle     the reply one byte a second
 *       deaf        a good reply, but stdin closed before it (the next command finds no reader)
 *     and at start (FAKE_BAD_MATCH unused): ready_long (a 100 KB ready line), ready_bad (cc=abc),
 *     and for shapes (FAKE_BAD_MATCH on the shape command): shape_bad (neither ok nor error).
 * The worker answers with the id of the command (id=N) when the command has one.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static long long cur_sk; /* the current shape's keys */
static double flops = 1e9; /* of the current shape */
static long long shape[5] = {0, 0, 0, 0, 0}; /* b, hq, hkv, sq, sk of the current shape */
static int dtype_blind;
static double jitter;
static unsigned long long noise = 88172645463325252ull; /* xorshift64 state of the jitter */

static int matches(const char *line, const char *var)
{
    const char *v = getenv(var), *only = getenv("FAKE_ONLY_SK");
    if (only != NULL && only[0] != '\0' && atoll(only) != cur_sk)
        return 0;
    return v != NULL && v[0] != '\0' && strstr(line, v) != NULL;
}

static const char *bad_mode(void)
{
    const char *b = getenv("FAKE_BAD");
    return b != NULL ? b : "";
}

/* Whether this measurement misbehaves as FAKE_BAD says. */
static int bad(const char *line, const char *mode)
{
    const char *m = getenv("FAKE_BAD_MATCH");
    return strcmp(bad_mode(), mode) == 0 && (m == NULL || m[0] == '\0' || strstr(line, m) != NULL);
}

/* FAKE_REPLAY's rows. */
typedef struct replay_row {
    char entry[192];
    long long shape[5]; /* b, hq, hkv, sq, sk */
    double ms;
} replay_row;

static replay_row *replay;
static size_t nreplay;

static void replay_load(const char *path)
{
    FILE *f = fopen(path, "r");
    char line[512];
    size_t cap = 0;

    if (f == NULL) {
        fprintf(stderr, "fake_worker: cannot open %s\n", path);
        exit(2);
    }
    while (fgets(line, sizeof line, f) != NULL) {
        replay_row r;
        if (sscanf(line, "%191s %lld %lld %lld %lld %lld %lf", r.entry, &r.shape[0], &r.shape[1], &r.shape[2],
                   &r.shape[3], &r.shape[4], &r.ms) != 7)
            continue;
        if (nreplay == cap) {
            replay_row *n = realloc(replay, (cap = cap ? 2 * cap : 1024) * sizeof *n);
            if (n == NULL)
                exit(2);
            replay = n;
        }
        replay[nreplay++] = r;
    }
    fclose(f);
}

/* The replayed median of entry (up to a space) on shape, or -1. */
static double replay_ms(const char *entry, const long long shape[5])
{
    size_t i, n = strcspn(entry, " \n");
    for (i = 0; i < nreplay; i++)
        if (strlen(replay[i].entry) == n && strncmp(replay[i].entry, entry, n) == 0 &&
            memcmp(replay[i].shape, shape, sizeof replay[i].shape) == 0)
            return replay[i].ms;
    return -1;
}

/* Whether the replay has a line of shape. */
static int replay_has_shape(const long long shape[5])
{
    size_t i;
    for (i = 0; i < nreplay; i++)
        if (memcmp(replay[i].shape, shape, sizeof replay[i].shape) == 0)
            return 1;
    return 0;
}

/* The id=N field of a command, or 0. */
static long long id_of(const char *line)
{
    const char *p = strstr(line, " id=");
    return p != NULL ? atoll(p + 4) : 0;
}

/* " id=N" when the command had one (the tuner sends one with every command). */
static void id_field(long long id, char *out, size_t cap)
{
    if (id > 0)
        snprintf(out, cap, " id=%lld", id);
    else
        out[0] = '\0';
}

static long long field(const char *line, const char *name, long long dflt)
{
    char key[32];
    const char *p;
    snprintf(key, sizeof key, " %s=", name);
    p = strstr(line, key);
    return p != NULL ? atoll(p + strlen(key)) : dflt;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static void many(char c, size_t n)
{
    size_t i;
    for (i = 0; i < n; i++)
        putchar(c);
}

static void forever(void)
{
    for (;;)
        pause();
}

/* A command's time as FAKE_DELAY_MS says, or the end FAKE_CRASH or FAKE_HANG makes of it. */
static void take_time(const char *line, long delay_ms)
{
    if (delay_ms > 0)
        sleep_ms(delay_ms);
    if (matches(line, "FAKE_CRASH"))
        abort();
    if (matches(line, "FAKE_HANG"))
        forever();
}

/* The made-up median of the kernel whose fields text holds (its first entry=) on the current
 * shape: a launch and 100 to 500 TFLOP/s by kernel, or what the replay says (-1: not there),
 * with the jitter. */
static double made_up_ms(const char *text)
{
    unsigned h = 2166136261u;
    const char *e = strstr(text, "entry=");
    double ms;

    if (e != NULL)
        for (; *e != ' ' && *e != '\n' && *e != '\0'; e++) {
            if (dtype_blind && strncmp(e, "dtype", 5) == 0) /* to the next '_' */
                while (e[1] != '_' && e[1] != ' ' && e[1] != '\n' && e[1] != '\0')
                    e++;
            else
                h = (h ^ (unsigned char)*e) * 16777619u;
        }
    ms = 0.003 + flops / ((100 + h % 400) * 1e9);
    if (replay != NULL)
        ms = strstr(text, "entry=") != NULL ? replay_ms(strstr(text, "entry=") + 6, shape) : -1;
    if (jitter > 0 && ms > 0) {
        noise ^= noise << 13, noise ^= noise >> 7, noise ^= noise << 17;
        ms *= 1 + jitter * (2.0 * (double)(noise >> 11) / 9007199254740992.0 - 1);
    }
    return ms;
}

/* Answers a race command: each kernel's made-up median in every round (FAKE_FAULT, _CRASH,
 * _HANG and _DELAY_MS as for a measurement, when any kernel matches; of FAKE_BAD: noid,
 * wrongid, nan, unknown, deaf). Returns 3 after a fault. */
static int race(const char *line, long long id)
{
    const long long n = field(line, "n", 0), rounds = field(line, "rounds", 0);
    const char *part = strstr(line, " ; ");
    long delay_ms = getenv("FAKE_DELAY_MS") ? atol(getenv("FAKE_DELAY_MS")) : 0;
    const double slower = getenv("FAKE_RACE_SLOWER") ? atof(getenv("FAKE_RACE_SLOWER")) : 0;
    char idf[32];
    long long i, r;

    id_field(bad(line, "noid") ? 0 : bad(line, "wrongid") ? id + 1 : id, idf, sizeof idf);
    take_time(line, delay_ms);
    if (matches(line, "FAKE_FAULT")) {
        printf("raced%s status=fault time_ms=1 detail=running the kernel: CUDA_ERROR_ILLEGAL_ADDRESS (made up)\n", idf);
        fflush(stdout);
        return 3;
    }
    printf("raced%s status=ok time_ms=2%s", idf, bad(line, "unknown") ? " speed=fast" : "");
    for (i = 0; i < n && part != NULL; i++, part = strstr(part + 3, " ; ")) {
        char text[1024];
        const char *next = strstr(part + 3, " ; ");
        size_t len = next != NULL ? (size_t)(next - part) : strlen(part);
        len = len < sizeof text ? len : sizeof text - 1;
        memcpy(text, part, len);
        text[len] = '\0';
        for (r = 0; r < rounds; r++) {
            double ms = made_up_ms(text) * (1 + slower);
            if (r == 0)
                printf(" ms%lld=", i);
            if (bad(line, "nan") && r == 0)
                printf("nan");
            else
                printf(r == 0 ? "%.9g" : ",%.9g", ms > 0 ? ms : 1.0);
        }
    }
    if (bad(line, "deaf"))
        close(0);
    printf(" detail=\n");
    fflush(stdout);
    return 0;
}

int main(int argc, char **argv)
{
    const char *name = getenv("FAKE_DEVICE") ? getenv("FAKE_DEVICE") : "Fake GPU";
    const char *log_path = getenv("FAKE_LOG");
    const char *pids = getenv("FAKE_PIDS");
    long interrupt_after = getenv("FAKE_INTERRUPT_AFTER") ? atol(getenv("FAKE_INTERRUPT_AFTER")) : -1;
    int stubborn = getenv("FAKE_STUBBORN") != NULL && atoi(getenv("FAKE_STUBBORN")) != 0;
    long delay_ms = getenv("FAKE_DELAY_MS") ? atol(getenv("FAKE_DELAY_MS")) : 0;
    long measured = 0;
    long long last_id = 0;
    char line[8192];
    FILE *log = log_path ? fopen(log_path, "a") : NULL;

    int device = 0, i;
    char odd[160];

    dtype_blind = getenv("FAKE_DTYPE_BLIND") != NULL && atoi(getenv("FAKE_DTYPE_BLIND")) != 0;
    jitter = getenv("FAKE_JITTER") ? atof(getenv("FAKE_JITTER")) : 0;
    if (getenv("FAKE_REPLAY") != NULL)
        replay_load(getenv("FAKE_REPLAY"));
    if (pids != NULL) {
        FILE *f = fopen(pids, "a");
        if (f != NULL) {
            fprintf(f, "%ld\n", (long)getpid());
            fclose(f);
        }
    }
    for (i = 1; i + 1 < argc; i++)
        if (strcmp(argv[i], "--device") == 0)
            device = atoi(argv[i + 1]);
    if (getenv("FAKE_ODD_DEVICE") != NULL && atoi(getenv("FAKE_ODD_DEVICE")) == device) {
        snprintf(odd, sizeof odd, "%s (other model)", name);
        name = odd;
    }
    if (strcmp(bad_mode(), "ready_long") == 0) {
        printf("ready count=1 cc=90 name=");
        many('x', 100000);
        printf("\n");
        fflush(stdout);
        forever();
    }
    printf("ready count=%d cc=%s sms=132 smem_block=232448 smem_sm=233472 regs_sm=65536 regs_block=65536 "
           "threads_block=1024 threads_sm=2048 l2=62914560 driver=%d name=%s\n",
           getenv("FAKE_COUNT") ? atoi(getenv("FAKE_COUNT")) : 2,
           strcmp(bad_mode(), "ready_bad") == 0 ? "abc" : getenv("FAKE_CC") ? getenv("FAKE_CC") : "90",
           getenv("FAKE_DRIVER") ? atoi(getenv("FAKE_DRIVER")) : 13000, name);
    fflush(stdout);
    while (fgets(line, sizeof line, stdin) != NULL) {
        long long id = id_of(line);
        char idf[32];

        id_field(id, idf, sizeof idf);
        if (log != NULL) {
            fprintf(log, "[%d] ", device);
            fputs(line, log);
            fflush(log);
        }
        if (strncmp(line, "quit", 4) == 0) {
            if (stubborn)
                continue;
            break;
        }
        if (strncmp(line, "shape ", 6) == 0) {
            double b = (double)field(line, "b", 1), hq = (double)field(line, "hq", 1);
            double sq = (double)field(line, "sq", 1), sk = (double)field(line, "sk", 1);
            double d = (double)field(line, "d", 64);
            flops = (strstr(line, " op=bwd ") != NULL ? 10 : 4) * b * hq * sq * sk * d / (field(line, "causal", 0) ? 2 : 1);
            shape[0] = field(line, "b", 1), shape[1] = field(line, "hq", 1), shape[2] = field(line, "hkv", 1);
            shape[3] = field(line, "sq", 1), shape[4] = field(line, "sk", 1);
            cur_sk = shape[4];
            if (bad(line, "shape_bad"))
                printf("okay%s\n", idf);
            else if (replay != NULL && !replay_has_shape(shape))
                printf("error%s no line of this shape in the replay\n", idf);
            else
                printf("ok%s\n", idf);
        } else if (strncmp(line, "measure ", 8) == 0) {
            const char *e;
            const char *status = "ok", *median_text = NULL, *extra = "";
            char med[64], q1[64], q3[64], reps[16] = "20", l2[16] = "0.0003", tms[16] = "2", detail[64] = "";
            char reply[1024];
            long long rid = id;
            double ms = made_up_ms(line);
            if (strstr(line, " verify=0") == NULL)
                measured++;
            take_time(line, delay_ms);
            if (matches(line, "FAKE_FAULT")) {
                printf("result%s status=fault median=0 q1=0 q3=0 reps=0 l2=0 lse=0 regs=0 local=0 verify_ms=1 "
                       "time_ms=0 detail=running the kernel: CUDA_ERROR_ILLEGAL_ADDRESS (made up)\n",
                       idf);
                fflush(stdout);
                return 3;
            }
            snprintf(med, sizeof med, "%.9g", ms);
            snprintf(q1, sizeof q1, "%.9g", ms * 0.99);
            snprintf(q3, sizeof q3, "%.9g", ms * 1.01);
            if (matches(line, "FAKE_WRONG") || (replay != NULL && ms < 0)) {
                status = "wrong_result";
                snprintf(med, sizeof med, "0");
                snprintf(q1, sizeof q1, "0");
                snprintf(q3, sizeof q3, "0");
                snprintf(reps, sizeof reps, "0");
                snprintf(l2, sizeof l2, "0.5");
                snprintf(tms, sizeof tms, "0");
                snprintf(detail, sizeof detail, replay != NULL && ms < 0 ? "not in the replay" : "made-up wrong result");
            }
            if (bad(line, "neg"))
                median_text = "-1";
            else if (bad(line, "zero"))
                median_text = "0";
            else if (bad(line, "tiny"))
                median_text = "1e-300";
            else if (bad(line, "nan"))
                median_text = "nan";
            else if (bad(line, "inf"))
                median_text = "inf";
            else if (bad(line, "tflops"))
                median_text = "0.0005";
            else if (bad(line, "junk"))
                median_text = "0.5ms";
            if (median_text != NULL) {
                snprintf(med, sizeof med, "%s", median_text);
                snprintf(q1, sizeof q1, "%s", median_text);
                snprintf(q3, sizeof q3, "%s", median_text);
            }
            if (bad(line, "quartiles"))
                snprintf(q1, sizeof q1, "%.9g", ms * 2);
            if (bad(line, "reps0"))
                snprintf(reps, sizeof reps, "0");
            if (bad(line, "repsfrac"))
                snprintf(reps, sizeof reps, "2.5");
            if (bad(line, "l2"))
                snprintf(l2, sizeof l2, "0.5");
            if (bad(line, "timing"))
                snprintf(tms, sizeof tms, "-1");
            if (bad(line, "unknown"))
                extra = " speed=fast";
            if (bad(line, "dup"))
                extra = " median=0.5";
            if (bad(line, "status"))
                status = "great";
            if (bad(line, "escape"))
                snprintf(detail, sizeof detail, "\033[31mred");
            if (bad(line, "wrongid"))
                rid = id + 1;
            if (bad(line, "noid"))
                rid = 0;
            id_field(rid, idf, sizeof idf);
            snprintf(reply, sizeof reply,
                     "result%s status=%s median=%s q1=%s q3=%s reps=%s l2=%s lse=1e-06 regs=128 local=0%s "
                     "verify_ms=1 time_ms=%s detail=%s\n",
                     idf, status, med, q1, q3, reps, l2, extra, tms, detail);
            if (bad(line, "unsolicited"))
                printf("result id=%lld status=ok median=0.5 q1=0.5 q3=0.5 reps=20 l2=0.0003 lse=1e-06 regs=128 "
                       "local=0 verify_ms=1 time_ms=2 detail=\n",
                       last_id);
            if (bad(line, "long")) {
                printf("result%s status=ok detail=", idf);
                many('x', 100000);
                printf("\n");
            }
            if (bad(line, "flood")) {
                many('x', 100000);
                fflush(stdout);
                forever();
            }
            if (bad(line, "deaf"))
                close(0);
            if (bad(line, "trickle")) {
                for (e = reply; *e != '\0'; e++) {
                    putchar(*e);
                    fflush(stdout);
                    sleep_ms(1000);
                }
            } else {
                fputs(reply, stdout);
            }
            fflush(stdout);
            if (interrupt_after >= 0 && measured == interrupt_after && strstr(line, " verify=0") == NULL)
                kill(getppid(), SIGINT);
        } else if (strncmp(line, "race ", 5) == 0) {
            if (race(line, id) == 3)
                return 3;
        } else {
            printf("error%s unknown command\n", idf);
        }
        last_id = id;
        fflush(stdout);
    }
    if (log != NULL)
        fclose(log);
    if (stubborn)
        forever();
    return 0;
}
