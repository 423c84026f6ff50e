"""The int8 AVX-512 / VNNI / VBMI, AVX-VNNI and AMX kernel files, compiled with -Werror on any x86 host.

Their kernel tests (test_q8_*) need the CPU features to run and skip before compiling elsewhere; without this a
warning or a build break in them would only show on an AVX-512 machine. Run-time checks stay with those tests."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from edgec.runtime_c import root as runtime_root
from qkit import WFLAGS

FLAGS = ["-mavx2", "-mfma", "-mf16c", "-mavx512f", "-mavx512bw", "-mavx512vl", "-mavx512vnni", "-mavx512vbmi"]
AVXVNNI_FLAGS = ["-mavx2", "-mfma", "-mf16c", "-mavxvnni"]  # x86_64-avx2-vnni: no AVX-512 flag at all
AMX_FLAGS = FLAGS + ["-mavx512dq", "-mamx-tile", "-mamx-int8"]  # x86_64-avx512-amx
FILES = sorted(p.relative_to(runtime_root()).as_posix() for p in runtime_root().glob("q8-*/*.c")
               if any(tag in p.name for tag in ("avx512", "vnni", "vbmi", "amx")))


def test_the_int8_avx512_files_are_found():
    # The glob must not go silently empty if the family layout moves.
    assert len(FILES) >= 7, FILES


@pytest.mark.parametrize("src", FILES)
def test_int8_avx512_file_compiles_warning_free(src, tmp_path):
    if shutil.which("gcc") is None:
        pytest.skip("gcc not installed")
    rt = runtime_root()
    flags = AVXVNNI_FLAGS if "avxvnni" in src else AMX_FLAGS if "amx" in src else FLAGS
    cmd = ["gcc", *WFLAGS, *flags, f"-I{rt}", "-c", str(rt / src), "-o", str(tmp_path / "k.o")]
    r = subprocess.run(cmd, capture_output=True, text=True)
    assert r.returncode == 0, f"{' '.join(cmd)}\n{r.stderr}"
