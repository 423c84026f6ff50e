/* .npy reader/writer for the runner: enough of the format for dense little-endian arrays. */
#include "ec_npy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fail(char *err, size_t len, const char *path, const char *why)
{
    if (err && len) snprintf(err, len, "%s: %s", path, why);
    return -1;
}

static size_t descr_size(const char *d)
{
    size_t n = strlen(d);
    return n >= 3 ? (size_t)atoi(d + 2) : 0;
}

static int parse_header(const char *h, ec_npy *a)
{
    const char *p = strstr(h, "'descr':");
    if (!p) return -1;
    p = strchr(p + 8, '\'');
    if (!p) return -1;
    const char *e = strchr(p + 1, '\'');
    if (!e || e - p - 1 >= (long)sizeof(a->descr)) return -1;
    memcpy(a->descr, p + 1, (size_t)(e - p - 1));
    a->descr[e - p - 1] = 0;
    if (strstr(h, "'fortran_order': True")) return -1;
    p = strstr(h, "'shape':");
    if (!p) return -1;
    p = strchr(p, '(');
    if (!p) return -1;
    a->rank = 0;
    a->numel = 1;
    for (p++; *p && *p != ')';) {
        while (*p == ' ' || *p == ',') p++;
        if (*p == ')') break;
        if (a->rank >= EC_NPY_MAX_RANK) return -1;
        char *end;
        long long v = strtoll(p, &end, 10);
        if (end == p) return -1;
        a->shape[a->rank++] = v;
        a->numel *= (size_t)v;
        p = end;
    }
    return 0;
}

int ec_npy_read(const char *path, ec_npy *a, char *err, size_t len)
{
    memset(a, 0, sizeof(*a));
    FILE *f = fopen(path, "rb");
    if (!f) return fail(err, len, path, "cannot open");
    unsigned char magic[10];
    if (fread(magic, 1, 8, f) != 8 || memcmp(magic, "\x93NUMPY", 6) != 0) {
        fclose(f);
        return fail(err, len, path, "not a .npy file");
    }
    size_t hlen;
    if (magic[6] == 1) {
        if (fread(magic + 8, 1, 2, f) != 2) { fclose(f); return fail(err, len, path, "truncated header"); }
        hlen = (size_t)magic[8] | ((size_t)magic[9] << 8);
    } else {
        unsigned char b[4];
        if (fread(b, 1, 4, f) != 4) { fclose(f); return fail(err, len, path, "truncated header"); }
        hlen = (size_t)b[0] | ((size_t)b[1] << 8) | ((size_t)b[2] << 16) | ((size_t)b[3] << 24);
    }
    char *h = malloc(hlen + 1);
    if (!h || fread(h, 1, hlen, f) != hlen) { free(h); fclose(f); return fail(err, len, path, "truncated header"); }
    h[hlen] = 0;
    int bad = parse_header(h, a);
    free(h);
    if (bad) { fclose(f); return fail(err, len, path, "unsupported .npy header (fortran order or odd dtype)"); }
    size_t nbytes = a->numel * descr_size(a->descr);
    a->data = malloc(nbytes ? nbytes : 1);
    if (!a->data || fread(a->data, 1, nbytes, f) != nbytes) {
        fclose(f);
        ec_npy_free(a);
        return fail(err, len, path, "truncated data");
    }
    fclose(f);
    return 0;
}

int ec_npy_write(const char *path, const char *descr, int rank, const int64_t *shape, const void *data,
                 size_t nbytes)
{
    char h[512];
    int n = snprintf(h, sizeof(h), "{'descr': '%s', 'fortran_order': False, 'shape': (", descr);
    for (int i = 0; i < rank; i++) n += snprintf(h + n, sizeof(h) - (size_t)n, "%lld,%s", (long long)shape[i],
                                                 i + 1 < rank ? " " : "");
    n += snprintf(h + n, sizeof(h) - (size_t)n, "), }");
    int total = 10 + n + 1;
    int pad = (64 - total % 64) % 64;
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, 0, 0};
    int hl = n + pad + 1;
    pre[8] = (unsigned char)(hl & 0xff);
    pre[9] = (unsigned char)(hl >> 8);
    fwrite(pre, 1, 10, f);
    fwrite(h, 1, (size_t)n, f);
    for (int i = 0; i < pad; i++) fputc(' ', f);
    fputc('\n', f);
    size_t w = nbytes ? fwrite(data, 1, nbytes, f) : 0;
    return (fclose(f) == 0 && w == nbytes) ? 0 : -1;
}

void ec_npy_free(ec_npy *a)
{
    free(a->data);
    a->data = NULL;
}
