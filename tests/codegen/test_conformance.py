"""ONNX backend node cases for every op edgec compiles: generated, built with -Werror, run, compared.

Failures of supported ops are bugs; the cases below are excluded, each for the reason given.
"""

from __future__ import annotations

import re
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
import conformance  # noqa: E402

from edgec import zoo  # noqa: E402
from edgec.codegen import SUPPORTED_OPS  # noqa: E402
from edgec.codegen.targets import get_target  # noqa: E402

EXCLUDED = [
    (r"float16|bfloat16|float8|e4m3|e5m2|int4|uint4|int2|uint2|float4|e8m0|string|fp16|bf16|flexattention_double",
     "dtype outside the fp32/integer set the C generator handles (fp16 has its own kernels)"),
    (r"_3d(_|$)", "3-D pooling / ConvTranspose are not implemented (1-D and 2-D are)"),
    (r"resize_.*(antialias|tf_crop_and_resize)",
     "Resize mode outside nearest/linear with the common coordinate modes"),
    (r"maxpool_with_argmax|maxpool_2d_uint8", "MaxPool Indices output / integer MaxPool not implemented"),
    (r"training_mode|training_dropout", "training-mode ops: edgec compiles inference graphs"),
    (r"bitshift_.*(negative_shift|shift_ge_width)", "shift counts outside [0, width) are undefined in C"),
    (r"onehot|nonzero|eyelike|window_expanded|window_symmetric_expanded|range_.*expanded",
     "data-dependent shapes or runtime-computed Range/OneHot: need run-time allocation"),
    (r"identity_opt|identity_sequence", "optional/sequence types are not tensors"),
    (r"center_crop_pad_.*_expanded", "shape inference cannot make the expanded function static"),
    (r"quantizelinear|qlinear|dynamicquantizelinear",
     "quantisation cases with run-time scales or non-int8 types (quant ops need constant per-tensor scales)"),
]


def _reason(name: str, failure: str = "") -> str | None:
    """Why a case is excluded: matched on its name and, for dtypes, on the failure message."""
    for pat, why in EXCLUDED:
        if re.search(pat, name, re.IGNORECASE) or (failure and pat is EXCLUDED[0][0] and re.search(pat, failure)):
            return why
    return None


def _cases():
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")  # the case generators overflow casts on purpose
        return zoo.node_cases(sorted(SUPPORTED_OPS))


@pytest.mark.slow
def test_node_conformance(tmp_path):
    results = conformance.run_cases(_cases(), tmp_path, get_target("native"))
    passed = sum(r.ok for r in results.values())
    excluded = {n: _reason(n, r.why) for n, r in results.items() if not r.ok and _reason(n, r.why)}
    bugs = {n: r.why for n, r in results.items() if not r.ok and n not in excluded}
    print(f"\nONNX node conformance: {passed}/{len(results)} cases pass, {len(excluded)} excluded, {len(bugs)} failing")
    assert passed > 700
    assert not bugs, "\n".join(f"{n}: {w}" for n, w in sorted(bugs.items()))


@pytest.mark.slow
@pytest.mark.qemu
def test_node_conformance_aarch64_subset(tmp_path):
    """Every 6th case, cross-built for aarch64-neon (Cortex-A72) and run under qemu: no ARMv8.2 leaks."""
    import shutil
    target = get_target("aarch64-neon")
    if not shutil.which(target.cc) or not shutil.which(target.qemu[0]):
        pytest.skip("aarch64 cross compiler or qemu-aarch64 not installed")
    cases = [c for c in _cases() if not _reason(c.name)][::6]
    results = conformance.run_cases(cases, tmp_path, target)
    bugs = {n: r.why for n, r in results.items() if not r.ok}
    print(f"\nONNX node conformance on aarch64-neon (qemu): {len(results) - len(bugs)}/{len(results)} pass")
    assert not bugs, "\n".join(f"{n}: {w}" for n, w in sorted(bugs.items()))
