/* bench: ./bench [--runs N] [--warmup N] [--warmup-ms T] [--threads N] [--serve]
 * Prints one JSON object: init/first-run time, the warm-up it did, every timed run (wall clock, and the
 * process's CPU time: on a shared host the CPU time leaves out the time others ran, a single-thread run's
 * cost), the page faults and involuntary context switches during the timed runs, peak RSS, and with
 * PROFILE=1 the median time of each layer (named after its ONNX node(s)).
 * Warm-up lasts at least --warmup runs and at least --warmup-ms of wall time, so a fast model is not timed
 * in its first milliseconds whatever the count.
 * --serve: after init and the first run, read requests "RUNS WARMUP WARMUP_MS" (one a line) from stdin and
 * answer each with one JSON line, until end of input: a benchmark harness keeps one warm process across its
 * rounds, as it keeps the other engines' sessions. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "ec_harness.h"
#include "model.h"

static double cpu_now_ms(void)
{
    struct timespec c;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c);
    return (double)c.tv_sec * 1e3 + (double)c.tv_nsec * 1e-6;
}

/* Warm-up, then `runs` timed runs; prints the JSON object (one line). Returns 0, or 2 when out of memory. */
static int measure(void *ws, const void *const *ins, void *const *outs, int threads, double init_ms, double first_ms,
                   int runs, int warmup, double warmup_ms)
{
    int warm_runs = 0;
    double w0 = ec_now_ms(), warm_ms = 0.0;
    while (warm_runs < warmup || warm_ms < warmup_ms) {
        model_run(ws, ins, outs);
        warm_runs++;
        warm_ms = ec_now_ms() - w0;
    }
#ifdef EC_PROFILE
    const size_t nlayer = (size_t)MODEL_NUM_LAYERS + 1; /* per-layer times of every run */
#else
    const size_t nlayer = 0;
#endif
    if ((size_t)runs > SIZE_MAX / sizeof(double) / (nlayer + 1)) return 2;
    double *times = malloc(sizeof(double) * (size_t)runs);
    double *cpu = malloc(sizeof(double) * (size_t)runs);
    double *layer = malloc(sizeof(double) * ((size_t)runs * nlayer + 1));
    if (!times || !cpu || !layer) {
        free(times);
        free(cpu);
        free(layer);
        return 2;
    }
    /* touched now, so the timed runs take no page fault of the harness's own */
    memset(times, 0, sizeof(double) * (size_t)runs);
    memset(cpu, 0, sizeof(double) * (size_t)runs);
    memset(layer, 0, sizeof(double) * ((size_t)runs * nlayer + 1));
    struct rusage r0, r1;
    getrusage(RUSAGE_SELF, &r0);
    for (int r = 0; r < runs; r++) {
        double c0 = cpu_now_ms(), t0 = ec_now_ms();
        model_run(ws, ins, outs);
        times[r] = ec_now_ms() - t0;
        cpu[r] = cpu_now_ms() - c0;
#ifdef EC_PROFILE
        for (int l = 0; l < MODEL_NUM_LAYERS; l++) layer[(size_t)l * runs + r] = model_layer_ms[l];
#endif
    }
    getrusage(RUSAGE_SELF, &r1);
    printf("{\"model\": ");
    ec_json_str(MODEL_NAME);
    printf(", \"target\": ");
    ec_json_str(MODEL_TARGET);
    printf(", \"threads\": %d, \"init_ms\": %.6f, \"first_ms\": %.6f, \"warmup_runs\": %d, \"warmup_ms\": %.6f, "
           "\"runs_ms\": [", threads, init_ms, first_ms, warm_runs, warm_ms);
    for (int r = 0; r < runs; r++) printf("%s%.6f", r ? ", " : "", times[r]);
    printf("], \"runs_cpu_ms\": [");
    for (int r = 0; r < runs; r++) printf("%s%.6f", r ? ", " : "", cpu[r]);
    printf("], \"timed_minflt\": %ld, \"timed_nivcsw\": %ld", r1.ru_minflt - r0.ru_minflt,
           r1.ru_nivcsw - r0.ru_nivcsw);
    printf(", \"peak_rss_kb\": %ld, \"arena_bytes\": %zu, \"weights_bytes\": %zu", (long)r1.ru_maxrss,
           (size_t)MODEL_WORKSPACE_BYTES, (size_t)MODEL_WEIGHTS_BYTES);
#ifdef EC_PROFILE
    printf(", \"layers\": [");
    for (int l = 0; l < MODEL_NUM_LAYERS; l++) {
        double *v = layer + (size_t)l * runs;
        qsort(v, (size_t)runs, sizeof(double), ec_cmp_double);
        printf("%s{\"name\": ", l ? ", " : "");
        ec_json_str(model_layers[l].name);
        printf(", \"op\": ");
        ec_json_str(model_layers[l].op);
        printf(", \"algo\": ");
        ec_json_str(model_layers[l].algo);
        printf(", \"macs\": %lld, \"ms\": %.6f}", (long long)model_layers[l].macs, v[runs / 2]);
    }
    printf("]");
#endif
    printf("}\n");
    fflush(stdout);
    free(times);
    free(cpu);
    free(layer);
    return 0;
}

int main(int argc, char **argv)
{
    int runs = 50, warmup = 5, threads = MODEL_DEFAULT_THREADS, serve = 0;
    double warmup_ms = 250.0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--serve")) { serve = 1; continue; }
        if (i + 1 >= argc) { fprintf(stderr, "bench: %s needs a value\n", argv[i]); return 2; }
        if (!strcmp(argv[i], "--runs")) runs = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--warmup")) warmup = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--warmup-ms")) warmup_ms = atof(argv[++i]);
        else if (!strcmp(argv[i], "--threads")) threads = atoi(argv[++i]);
        else { fprintf(stderr, "bench: unknown option %s\n", argv[i]); return 2; }
    }
    if (runs < 1) runs = 1;
    const void *ins[MODEL_NUM_INPUTS + 1];
    void *outs[MODEL_NUM_OUTPUTS + 1];
    unsigned seed = 12345u;
    for (int i = 0; i < MODEL_NUM_INPUTS; i++) {
        size_t n = model_inputs[i].numel * (size_t)model_inputs[i].elem_size;
        unsigned char *b = calloc(n ? n : 1, 1);
        if (!b) return 2;
        if (!strcmp(model_inputs[i].dtype, "float32"))
            for (size_t k = 0; k < model_inputs[i].numel; k++) {
                seed = seed * 1664525u + 1013904223u;
                ((float *)b)[k] = (float)(seed >> 8) / 16777216.0f - 0.5f;
            }
        ins[i] = b;
    }
    for (int i = 0; i < MODEL_NUM_OUTPUTS; i++) {
        outs[i] = calloc(model_outputs[i].numel ? model_outputs[i].numel : 1, (size_t)model_outputs[i].elem_size);
        if (!outs[i]) return 2;
    }
    double t0 = ec_now_ms();
    void *ws = aligned_alloc(64, MODEL_WORKSPACE_BYTES);
    if (!ws || model_init(threads)) return 2;
    memset(ws, 0, MODEL_WORKSPACE_BYTES);
    double init_ms = ec_now_ms() - t0;
    t0 = ec_now_ms();
    model_run(ws, ins, outs);
    double first_ms = ec_now_ms() - t0;
    int rc = 0;
    if (!serve) {
        rc = measure(ws, ins, outs, threads, init_ms, first_ms, runs, warmup, warmup_ms);
    } else {
        char line[128];
        while (!rc && fgets(line, sizeof line, stdin)) {
            int n, w;
            double wms;
            if (sscanf(line, "%d %d %lf", &n, &w, &wms) != 3 || n < 1 || w < 0 || wms < 0) {
                fprintf(stderr, "bench: bad request (want \"RUNS WARMUP WARMUP_MS\")\n");
                rc = 2;
                break;
            }
            rc = measure(ws, ins, outs, threads, init_ms, first_ms, n, w, wms);
        }
    }
    model_deinit();
    free(ws);
    for (int i = 0; i < MODEL_NUM_INPUTS; i++) free((void *)ins[i]);
    for (int i = 0; i < MODEL_NUM_OUTPUTS; i++) free(outs[i]);
    return rc;
}
