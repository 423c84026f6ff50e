/* tune: ./tune IN_0.npy [IN_1.npy ...] --out DIR [--threads N] [--runs N] [--rounds N] [--warmup N]
 *             [--target-ms MS] [--only I,J,...]
 * Every candidate build of one or more layers in one program (edgec tune); the inputs are every layer's, layer
 * after layer (tune_layers). Each candidate runs once on its layer's inputs and writes DIR/cand<i>_output_<j>.npy (printing {"cand": i, "written": n} as soon as they are on disk), then the
 * candidates are timed in interleaved rounds: round-robin over the candidates, each a few warm-up runs, then
 * timed runs, so a change of load on the device falls on all of them alike. At the end one JSON line per
 * candidate: the median and minimum of its per-run times over every round (monotonic clock).
 * --runs N: timed runs per candidate in all (0: outputs only, no timing); else about --target-ms (default
 * 150) of runs each, 10 to 200. --only: the candidates to run (by index), the others are left out.
 * --evict-kb KB: before each timed run, read a buffer of that many KiB (one load per 64-byte line), as the
 * rest of a model does between two runs of a layer in it: alone, a layer's weights would stay cached from
 * run to run, which inside the model its neighbours' data evicts. Its inputs are then read once, as the layer
 * before it has just written them. */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ec_harness.h"
#include "ec_npy.h"
#include "tune_cands.h"

#define TUNE_MIN_RUNS 10
#define TUNE_MAX_RUNS 200

static volatile long tune_evict_sink;

static void evict(const long *buf, size_t n)
{
    long acc = 0;
    for (size_t i = 0; i < n; i += 64 / sizeof(long)) acc += buf[i];
    tune_evict_sink = acc;
}

static void touch(const void *p, size_t bytes)
{
    const unsigned char *b = p;
    long acc = 0;
    for (size_t i = 0; i < bytes; i += 64) acc += b[i];
    tune_evict_sink = acc;
}

static int die(const char *msg)
{
    fprintf(stderr, "tune: %s\n", msg);
    return 2;
}

/* Zeroed, 64-byte aligned (aligned_alloc wants a multiple of the alignment). */
static void *alloc64(size_t n)
{
    n = n ? (n + 63) / 64 * 64 : 64;
    void *p = aligned_alloc(64, n);
    if (p) memset(p, 0, n);
    return p;
}

static int parse_int(const char *s, int lo, int *v)
{
    char *end;
    errno = 0;
    long x = strtol(s, &end, 10);
    if (errno || end == s || *end || x < lo || x > 1000000) return -1;
    *v = (int)x;
    return 0;
}

static int parse_only(const char *s, int *use)
{
    for (int c = 0; c < TUNE_NUM_CANDS; c++) use[c] = 0;
    while (*s) {
        char *end;
        errno = 0;
        long c = strtol(s, &end, 10);
        if (errno || end == s || c < 0 || c >= TUNE_NUM_CANDS || (*end && *end != ',')) return -1;
        use[c] = 1;
        s = *end ? end + 1 : end;
    }
    return 0;
}

int main(int argc, char **argv)
{
    const char *out_dir = ".";
    int threads = TUNE_DEFAULT_THREADS, nin = 0, runs = -1, rounds = 3, warmup = 2;
    double target_ms = 150.0;
    int evict_kb = 0;
    const char *paths[TUNE_NUM_INPUTS + 1];
    int use[TUNE_NUM_CANDS];
    for (int c = 0; c < TUNE_NUM_CANDS; c++) use[c] = 1;
    for (int i = 1; i < argc; i++) {
        int bad = 0, ms = 0;
        if (!strcmp(argv[i], "--out") && i + 1 < argc) out_dir = argv[++i];
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc) bad = parse_int(argv[++i], 1, &threads);
        else if (!strcmp(argv[i], "--runs") && i + 1 < argc) bad = parse_int(argv[++i], 0, &runs);
        else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) bad = parse_int(argv[++i], 1, &rounds);
        else if (!strcmp(argv[i], "--warmup") && i + 1 < argc) bad = parse_int(argv[++i], 0, &warmup);
        else if (!strcmp(argv[i], "--evict-kb") && i + 1 < argc) bad = parse_int(argv[++i], 0, &evict_kb);
        else if (!strcmp(argv[i], "--target-ms") && i + 1 < argc) {
            bad = parse_int(argv[++i], 1, &ms);
            target_ms = ms;
        } else if (!strcmp(argv[i], "--only") && i + 1 < argc) bad = parse_only(argv[++i], use);
        else if (argv[i][0] == '-' && argv[i][1] == '-') {
            fprintf(stderr, "tune: unknown option %s\n", argv[i]);
            return 2;
        } else if (nin < TUNE_NUM_INPUTS) paths[nin++] = argv[i];
        else return die("too many input files");
        if (bad) {
            fprintf(stderr, "tune: bad value for %s\n", argv[i - 1]);
            return 2;
        }
    }
    if (nin != TUNE_NUM_INPUTS) {
        fprintf(stderr, "tune: expected %d input .npy file(s), got %d\n", TUNE_NUM_INPUTS, nin);
        return 2;
    }
    ec_npy arrs[TUNE_NUM_INPUTS + 1];
    const void *ins[TUNE_NUM_INPUTS + 1];  /* a candidate reads its layer's slice of these, and of outs */
    void *outs[TUNE_NUM_OUTPUTS + 1];
    char err[512];
    for (int i = 0; i < nin; i++) {
        if (ec_npy_read(paths[i], &arrs[i], err, sizeof(err))) return die(err);
        const tune_tensor_info *t = &tune_inputs[i];
        if (strcmp(arrs[i].descr, t->npy_descr) || arrs[i].numel != t->numel) {
            fprintf(stderr, "tune: %s: input %s wants %zu elements of %s, file has %zu of %s\n", paths[i],
                    t->name, t->numel, t->npy_descr, arrs[i].numel, arrs[i].descr);
            return 2;
        }
        ins[i] = arrs[i].data;
    }
    /* One workspace and one set of outputs per layer for all: every candidate runs in the same memory. */
    size_t ws_bytes = 64;
    for (int c = 0; c < TUNE_NUM_CANDS; c++)
        if (use[c] && tune_cands[c].workspace_bytes > ws_bytes) ws_bytes = tune_cands[c].workspace_bytes;
    void *ws = alloc64(ws_bytes);
    if (!ws) return die("out of memory");
    for (int j = 0; j < TUNE_NUM_OUTPUTS; j++) {
        outs[j] = alloc64(tune_outputs[j].numel * (size_t)tune_outputs[j].elem_size);
        if (!outs[j]) return die("out of memory");
    }
    int started[TUNE_NUM_CANDS];
    for (int c = 0; c < TUNE_NUM_CANDS; c++) {
        started[c] = 0;
        if (use[c] && tune_cands[c].init(threads)) return die("could not start threads");
        if (use[c] && (tune_cands[c].layer < 0 || tune_cands[c].layer >= TUNE_NUM_LAYERS)) return die("bad layer");
        started[c] = use[c];
    }

    /* Outputs for the check, and one more (warm) run to size the timing. */
    double est_ms[TUNE_NUM_CANDS];
    for (int c = 0; c < TUNE_NUM_CANDS; c++) {
        est_ms[c] = 0.0;
        if (!use[c]) continue;
        const tune_layer *L = &tune_layers[tune_cands[c].layer];
        const void *const *cin = ins + L->in0;
        void *const *cout = outs + L->out0;
        for (int j = L->out0; j < L->out0 + L->n_out; j++)
            memset(outs[j], 0, tune_outputs[j].numel * (size_t)tune_outputs[j].elem_size);
        if (tune_cands[c].run(ws, cin, cout)) {
            printf("{\"cand\": %d, \"error\": \"run failed\"}\n", c);
            fflush(stdout);
            use[c] = 0;
            continue;
        }
        for (int j = 0; j < L->n_out; j++) {
            const tune_tensor_info *t = &tune_outputs[L->out0 + j];
            char path[4096];
            snprintf(path, sizeof(path), "%s/cand%d_output_%d.npy", out_dir, c, j);
            errno = 0;
            if (ec_npy_write(path, t->npy_descr, t->rank, t->shape, cout[j], t->numel * (size_t)t->elem_size)) {
                fprintf(stderr, "tune: cannot write %s: %s\n", path, errno ? strerror(errno) : "write failed");
                return 2;
            }
        }
        printf("{\"cand\": %d, \"written\": %d}\n", c, L->n_out);
        fflush(stdout);  /* if a later candidate crashes, this one's outputs still count */
        double t0 = ec_now_ms();
        tune_cands[c].run(ws, cin, cout);
        est_ms[c] = ec_now_ms() - t0;
    }

    if (runs != 0) {
        int per_round[TUNE_NUM_CANDS], total[TUNE_NUM_CANDS];
        double *times[TUNE_NUM_CANDS];
        for (int c = 0; c < TUNE_NUM_CANDS; c++) {
            times[c] = NULL;
            if (!use[c]) continue;
            int n = runs;
            if (n < 0) {
                double want = target_ms / (est_ms[c] > 1e-6 ? est_ms[c] : 1e-6);
                n = want < TUNE_MIN_RUNS ? TUNE_MIN_RUNS : want > TUNE_MAX_RUNS ? TUNE_MAX_RUNS : (int)want;
            }
            per_round[c] = (n + rounds - 1) / rounds;
            total[c] = per_round[c] * rounds;
            times[c] = malloc(sizeof(double) * (size_t)total[c]);
            if (!times[c]) return die("out of memory");
        }
        size_t evict_n = (size_t)evict_kb * 1024 / sizeof(long);
        long *evict_buf = NULL;
        if (evict_n) {
            evict_buf = malloc(evict_n * sizeof(long));
            if (!evict_buf) return die("out of memory");
            memset(evict_buf, 1, evict_n * sizeof(long));  /* real pages, not the shared zero page */
        }
        for (int r = 0; r < rounds; r++)
            for (int c = 0; c < TUNE_NUM_CANDS; c++) {
                if (!use[c]) continue;
                const tune_layer *L = &tune_layers[tune_cands[c].layer];
                const void *const *cin = ins + L->in0;
                void *const *cout = outs + L->out0;
                for (int w = 0; w < warmup; w++) tune_cands[c].run(ws, cin, cout);
                for (int k = 0; k < per_round[c]; k++) {
                    if (evict_buf) {
                        evict(evict_buf, evict_n);
                        for (int i = L->in0; i < L->in0 + L->n_in; i++)
                            touch(ins[i], tune_inputs[i].numel * (size_t)tune_inputs[i].elem_size);
                    }
                    double t0 = ec_now_ms();
                    tune_cands[c].run(ws, cin, cout);
                    times[c][r * per_round[c] + k] = ec_now_ms() - t0;
                }
            }
        free(evict_buf);
        for (int c = 0; c < TUNE_NUM_CANDS; c++) {
            if (!use[c]) continue;
            double *v = times[c];
            int n = total[c];
            qsort(v, (size_t)n, sizeof(double), ec_cmp_double);
            double med = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
            printf("{\"cand\": %d, \"name\": ", c);
            ec_json_str(tune_cands[c].name);
            printf(", \"algo\": ");
            ec_json_str(tune_cands[c].algo);
            printf(", \"threads\": %d, \"runs\": %d, \"median_ms\": %.6f, \"min_ms\": %.6f}\n", threads, n, med, v[0]);
            free(v);
        }
    }
    for (int c = 0; c < TUNE_NUM_CANDS; c++)
        if (started[c]) tune_cands[c].deinit();
    for (int j = 0; j < TUNE_NUM_OUTPUTS; j++) free(outs[j]);
    for (int i = 0; i < nin; i++) ec_npy_free(&arrs[i]);
    free(ws);
    return 0;
}
