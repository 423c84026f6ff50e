/* Int8 1x1 stride-1 ungrouped conv whose output goes straight into a residual Add (QDQ Conv -> Add with
 * the other operand already computed): the Add runs in the GEMM's requantize-and-store, so neither the
 * conv's output tensor nor a separate Add pass exists. Bytes equal q8_conv followed by q8_add. */
#ifndef Q8_CONV1X1_ADD_H
#define Q8_CONV1X1_ADD_H

#include "../q8-conv/q8-conv.h"
#include "../q8-eltwise/q8-eltwise.h"

/* p: a pointwise conv (kh = kw = sh = sw = 1, no padding, groups = 1); r: the Add's other operand,
 * shaped like y; ap: the Add with the conv's bytes as operand a; scratch: q8_conv_scratch_bytes(p). */
void q8_conv1x1_add(const q8_conv_params *p, q8_gemm_add_fn gemm, const uint8_t *x, const uint8_t *r,
                    const q8_add_params *ap, uint8_t *y, uint8_t *scratch, ec_pool *pool);

#endif
