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
 *   FAKE_INTERRUPT_AFTER=N   after N measurements, send SIGINT to the tuner (a Ctrl-C)
 *   FAKE_LOG          append every command received to this file
 *   FAKE_COUNT        GPUs to report (default 2)
 *   FAKE_ODD_DEVICE   the device ordinal that reports another GPU model (for --device all)
 *   FAKE_CC, FAKE_DRIVER   the compute capability (default 90) and driver version (13000)
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int matches(const char *line, const char *var)
{
    const char *v = getenv(var);
    return v != NULL && v[0] != '\0' && strstr(line, v) != NULL;
}

int main(int argc, char **argv)
{
    const char *name = getenv("FAKE_DEVICE") ? getenv("FAKE_DEVICE") : "Fake GPU";
    const char *log_path = getenv("FAKE_LOG");
    long interrupt_after = getenv("FAKE_INTERRUPT_AFTER") ? atol(getenv("FAKE_INTERRUPT_AFTER")) : -1;
    long measured = 0;
    char line[4096];
    FILE *log = log_path ? fopen(log_path, "a") : NULL;

    int device = 0, i;
    char odd[160];

    for (i = 1; i + 1 < argc; i++)
        if (strcmp(argv[i], "--device") == 0)
            device = atoi(argv[i + 1]);
    if (getenv("FAKE_ODD_DEVICE") != NULL && atoi(getenv("FAKE_ODD_DEVICE")) == device) {
        snprintf(odd, sizeof odd, "%s (other model)", name);
        name = odd;
    }
    printf("ready count=%d cc=%d sms=132 smem_block=232448 smem_sm=233472 regs_sm=65536 regs_block=65536 "
           "threads_block=1024 threads_sm=2048 l2=62914560 driver=%d name=%s\n",
           getenv("FAKE_COUNT") ? atoi(getenv("FAKE_COUNT")) : 2, getenv("FAKE_CC") ? atoi(getenv("FAKE_CC")) : 90,
           getenv("FAKE_DRIVER") ? atoi(getenv("FAKE_DRIVER")) : 13000, name);
    fflush(stdout);
    while (fgets(line, sizeof line, stdin) != NULL) {
        if (log != NULL) {
            fprintf(log, "[%d] ", device);
            fputs(line, log);
            fflush(log);
        }
        if (strncmp(line, "quit", 4) == 0)
            break;
        if (strncmp(line, "shape ", 6) == 0) {
            printf("ok\n");
        } else if (strncmp(line, "measure ", 8) == 0) {
            unsigned h = 2166136261u;
            const char *e = strstr(line, "entry=");
            double ms;
            if (e != NULL)
                for (; *e != ' ' && *e != '\n' && *e != '\0'; e++)
                    h = (h ^ (unsigned char)*e) * 16777619u;
            ms = 0.1 + (h % 10000) / 10000.0;
            measured++;
            if (matches(line, "FAKE_CRASH"))
                abort();
            if (matches(line, "FAKE_HANG"))
                for (;;)
                    pause();
            if (matches(line, "FAKE_FAULT")) {
                printf("result status=fault median=0 q1=0 q3=0 reps=0 l2=0 lse=0 regs=0 local=0 verify_ms=1 "
                       "time_ms=0 detail=running the kernel: CUDA_ERROR_ILLEGAL_ADDRESS (made up)\n");
                fflush(stdout);
                return 3;
            }
            if (matches(line, "FAKE_WRONG"))
                printf("result status=wrong_result median=0 q1=0 q3=0 reps=0 l2=0.5 lse=0 regs=0 local=0 "
                       "verify_ms=1 time_ms=0 detail=made-up wrong result\n");
            else
                printf("result status=ok median=%.6f q1=%.6f q3=%.6f reps=20 l2=0.0003 lse=1e-6 regs=128 local=0 "
                       "verify_ms=1 time_ms=2 detail=\n", ms, ms * 0.99, ms * 1.01);
            if (interrupt_after >= 0 && measured == interrupt_after)
                kill(getppid(), SIGINT);
        } else {
            printf("error unknown command\n");
        }
        fflush(stdout);
    }
    if (log != NULL)
        fclose(log);
    return 0;
}
