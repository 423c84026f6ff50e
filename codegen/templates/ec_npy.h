/* Minimal .npy (format 1.0/2.0) reader and writer: little-endian, C order, any dtype by descr. */
#ifndef EC_NPY_H
#define EC_NPY_H
#include <stddef.h>
#include <stdint.h>

#define EC_NPY_MAX_RANK 8

typedef struct {
    char descr[16];              /* e.g. "<f4", "<i8", "|b1" */
    int rank;
    int64_t shape[EC_NPY_MAX_RANK];
    size_t numel;
    void *data;                  /* malloc'ed, numel * itemsize bytes */
} ec_npy;

/* Returns 0 on success; on failure writes a one-line reason into err. */
int ec_npy_read(const char *path, ec_npy *arr, char *err, size_t errlen);
int ec_npy_write(const char *path, const char *descr, int rank, const int64_t *shape, const void *data,
                 size_t nbytes);
void ec_npy_free(ec_npy *arr);

#endif
