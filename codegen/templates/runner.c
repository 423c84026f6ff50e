/* runner: ./runner IN_0.npy [IN_1.npy ...] --out DIR [--threads N]
 * Reads the inputs (graph order), runs the model once, writes DIR/output_<i>.npy. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ec_npy.h"
#include "model.h"

static int die(const char *msg)
{
    fprintf(stderr, "runner: %s\n", msg);
    return 2;
}

int main(int argc, char **argv)
{
    const char *out_dir = ".";
    int threads = 0, nin = 0;
    const char *paths[MODEL_NUM_INPUTS + 1];
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--out") && i + 1 < argc) out_dir = argv[++i];
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = atoi(argv[++i]);
        else if (nin < MODEL_NUM_INPUTS) paths[nin++] = argv[i];
        else return die("too many input files");
    }
    if (nin != MODEL_NUM_INPUTS) {
        fprintf(stderr, "runner: expected %d input .npy file(s), got %d\n", MODEL_NUM_INPUTS, nin);
        return 2;
    }
    ec_npy arrs[MODEL_NUM_INPUTS + 1];
    const void *ins[MODEL_NUM_INPUTS + 1];
    void *outs[MODEL_NUM_OUTPUTS + 1];
    char err[512];
    for (int i = 0; i < nin; i++) {
        if (ec_npy_read(paths[i], &arrs[i], err, sizeof(err))) return die(err);
        const model_tensor_info *t = &model_inputs[i];
        if (strcmp(arrs[i].descr, t->npy_descr) || arrs[i].numel != t->numel) {
            fprintf(stderr, "runner: %s: input %s wants %zu elements of %s, file has %zu of %s\n", paths[i],
                    t->name, t->numel, t->npy_descr, arrs[i].numel, arrs[i].descr);
            return 2;
        }
        ins[i] = arrs[i].data;
    }
    for (int i = 0; i < MODEL_NUM_OUTPUTS; i++) {
        outs[i] = calloc(model_outputs[i].numel ? model_outputs[i].numel : 1, (size_t)model_outputs[i].elem_size);
        if (!outs[i]) return die("out of memory");
    }
    void *ws = aligned_alloc(64, MODEL_WORKSPACE_BYTES);
    if (!ws) return die("out of memory");
    if (model_init(threads)) return die("could not start threads");
    if (model_run(ws, ins, outs)) return die("model run failed");
    for (int i = 0; i < MODEL_NUM_OUTPUTS; i++) {
        const model_tensor_info *t = &model_outputs[i];
        char path[4096];
        snprintf(path, sizeof(path), "%s/output_%d.npy", out_dir, i);
        errno = 0;
        if (ec_npy_write(path, t->npy_descr, t->rank, t->shape, outs[i], t->numel * (size_t)t->elem_size)) {
            fprintf(stderr, "runner: cannot write %s: %s\n", path, errno ? strerror(errno) : "write failed");
            return 2;
        }
        free(outs[i]);
    }
    model_deinit();
    for (int i = 0; i < nin; i++) ec_npy_free(&arrs[i]);
    free(ws);
    return 0;
}
