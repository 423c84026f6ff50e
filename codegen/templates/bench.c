/* bench: ./bench [--runs N] [--warmup N] [--threads N]
 * Prints one JSON object: init/first-run time, every timed run (wall clock, and the process's CPU time: on a
 * shared host the CPU time leaves out the time others ran, a single-thread run's cost), peak RSS, and with
 * PROFILE=1 the median time of each layer (named after its ONNX node(s)). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "ec_harness.h"
#include "model.h"

int main(int argc, char **argv)
{
    int runs = 50, warmup = 5, threads = MODEL_DEFAULT_THREADS;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--runs")) runs = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--warmup")) warmup = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--threads")) threads = atoi(argv[i + 1]);
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
    for (int i = 0; i < warmup; i++) model_run(ws, ins, outs);
    double *times = malloc(sizeof(double) * (size_t)runs);
    double *cpu = malloc(sizeof(double) * (size_t)runs);
    double *layer = malloc(sizeof(double) * (size_t)runs * (MODEL_NUM_LAYERS + 1));
    if (!times || !cpu || !layer) return 2;
    for (int r = 0; r < runs; r++) {
        struct timespec c0, c1;
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0);
        t0 = ec_now_ms();
        model_run(ws, ins, outs);
        times[r] = ec_now_ms() - t0;
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c1);
        cpu[r] = (double)(c1.tv_sec - c0.tv_sec) * 1e3 + (double)(c1.tv_nsec - c0.tv_nsec) * 1e-6;
        for (int l = 0; l < MODEL_NUM_LAYERS; l++) layer[(size_t)l * runs + r] = model_layer_ms[l];
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    printf("{\"model\": ");
    ec_json_str(MODEL_NAME);
    printf(", \"target\": ");
    ec_json_str(MODEL_TARGET);
    printf(", \"threads\": %d, \"init_ms\": %.6f, \"first_ms\": %.6f, \"runs_ms\": [", threads, init_ms, first_ms);
    for (int r = 0; r < runs; r++) printf("%s%.6f", r ? ", " : "", times[r]);
    printf("], \"runs_cpu_ms\": [");
    for (int r = 0; r < runs; r++) printf("%s%.6f", r ? ", " : "", cpu[r]);
    printf("], \"peak_rss_kb\": %ld, \"arena_bytes\": %zu, \"weights_bytes\": %zu", (long)ru.ru_maxrss,
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
#else
#endif
    printf("}\n");
    model_deinit();
    free(ws);
    free(times);
    free(cpu);
    free(layer);
    for (int i = 0; i < MODEL_NUM_INPUTS; i++) free((void *)ins[i]);
    for (int i = 0; i < MODEL_NUM_OUTPUTS; i++) free(outs[i]);
    return 0;
}
