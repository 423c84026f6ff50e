"""The tuning database: measured per-layer variants, one SQLite file per user under the cache dir.

A record says: on the device with this fingerprint, the layer with this signature ran fastest with this
variant (time, and the cost model's pick and its time, both measured). The fingerprint hashes what makes
timings comparable: CPU model and features, cores, cache sizes, the compiler and its version, the target,
edgec's code generator, and whether the board is emulated. Records apply only to builds for a device of
the same fingerprint; emulated (qemu) timings are flagged and never applied to a real board.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import shlex
import sqlite3
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from edgec.errors import EdgecError
from edgec.files import write_text_atomic

SCHEMA_VERSION = 1
_COLUMNS = """
  fingerprint TEXT NOT NULL, signature TEXT NOT NULL, class TEXT NOT NULL, variant TEXT NOT NULL,
  forced TEXT NOT NULL, algo TEXT NOT NULL, time_ms REAL NOT NULL, default_algo TEXT NOT NULL,
  default_ms REAL NOT NULL, source TEXT NOT NULL, model TEXT NOT NULL, device TEXT NOT NULL, date TEXT NOT NULL,
  emulated INTEGER NOT NULL, facts TEXT NOT NULL, trials TEXT NOT NULL,
  PRIMARY KEY (fingerprint, signature)"""

# a record the whole-model check of `edgec tune` found slower inside one model (devices/tune.py guard): records
# are per layer signature and shared by every model, so the rejection is kept per model (its file's content
# hash) and only that model's builds leave the record out (or, instead_*: use the record's runner-up the check
# kept in its place)
_REJECT_COLUMNS = """
  fingerprint TEXT NOT NULL, model_key TEXT NOT NULL, signature TEXT NOT NULL, model TEXT NOT NULL,
  variant TEXT NOT NULL, algo TEXT NOT NULL, reason TEXT NOT NULL, device TEXT NOT NULL, date TEXT NOT NULL,
  instead TEXT NOT NULL DEFAULT '', instead_variant TEXT NOT NULL DEFAULT '', instead_algo TEXT NOT NULL DEFAULT '',
  PRIMARY KEY (fingerprint, model_key, signature)"""
# columns added since the table was first made: a database made before them gets them on open
_REJECT_ADDED = ("instead", "instead_variant", "instead_algo")


# the pseudo-signature of a rejection of the constants learned from the records (devices/tune.py
# learned_constants): they move the picks of layers without a forcing record, so the check times them as one item
LEARNED = "learned-constants"


def model_key(path: Path) -> str:
    """A model's identity for per-model rejections: its bytes (two models both named model.onnx differ)."""
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:20]
    except OSError as e:
        raise EdgecError(f"cannot read {path}: {e.strerror}") from None


# a rejection's reason when the whole-model check ran out of budget before the record, with the tuned build slower
UNCHECKED = "not checked in the model"


@dataclass
class Rejection:
    fingerprint: str
    model_key: str
    signature: str
    model: str        # the model's file name (for people; model_key identifies it)
    variant: str      # the record's variant and kernel when it was rejected
    algo: str
    reason: str       # what the whole-model timing showed
    device: str
    date: str
    # the record's runner-up the check kept for this model in its place: its forced fields ("": the cost
    # model's pick), variant and kernel
    instead: str = ""
    instead_variant: str = ""
    instead_algo: str = ""

    def note(self) -> str:
        """The --explain text of a layer of this model that does not use its record."""
        if self.reason.startswith(UNCHECKED):
            return (f"the tuning record for this layer ({self.algo}) is not applied to {self.model} until a tune "
                    f"checks it: edgec tune on {self.device}, {self.date}: {self.reason}")
        text = (f"the tuning record for this layer ({self.algo}) is not applied to {self.model}: edgec tune on "
                f"{self.device}, {self.date}, found it slower inside the whole model ({self.reason})")
        if self.instead:
            text += f"; its runner-up {self.instead_variant} ({self.instead_algo}) is used instead"
        return text


# a transfer also tries a source layer's variants timed within this factor of its fastest (Record.transferable)
NEAR_TIE = 1.05
MIN_GAIN = 1.03       # a variant replaces the cost model's pick only when this much faster (noise)
# a blocking (blk-*) needs more: on Zen 3, ResNet-50's 7 blocking records at 1.03-1.09x alone made the model 1.04x
# slower together (5 interleaved rounds, CPU time); a scaled block changes what the layer leaves in the caches
BLK_MIN_GAIN = 1.10


def min_gain(variant: str) -> float:
    """How much faster than the cost model's pick a variant must be, alone, to be recorded."""
    # a region's passes (layout-nchwc/kc-half) are a blocking too: the 576ch chain's region timed 1.13x faster so
    # in a tune, 1.02x slower in 11 paired rounds of the model (Zen 4)
    return BLK_MIN_GAIN if any(v.startswith("blk-") or "/kc-" in v for v in variant.split("+")) else MIN_GAIN


@dataclass
class Record:
    fingerprint: str
    signature: str
    cls: str
    variant: str          # variants.VARIANTS name, or "default" (the cost model's pick won)
    forced: str           # CompileOptions fields it forces, "k=v;k=v"
    algo: str             # what the emitter produced with it
    time_ms: float
    default_algo: str     # the cost model's pick for the layer
    default_ms: float
    source: str           # "measured" | "transferred from MODEL"
    model: str            # the model it was measured on
    device: str
    date: str             # ISO date
    emulated: bool
    facts: dict           # what the fingerprint hashes
    trials: list          # every candidate: {variant, algo, ms | rejected}

    @property
    def speedup(self) -> float:
        return self.default_ms / self.time_ms if self.time_ms > 0 else 1.0

    def note(self) -> str:
        """The --explain text of a layer this record forces."""
        where = f"{self.device}{' (emulated)' if self.emulated else ''}, {self.date}"
        src = "" if self.source == "measured" else f" ({self.source})"
        if self.cls.startswith("region["):  # a channel-blocked region: the layout measured faster
            lay = {"layout-nchwc": "NCHWc", "layout-nchw": "NCHW"}.get(self.algo, self.algo)
            if self.algo.startswith("layout-nchwc/"):  # its blocked 1x1 GEMMs' passes (layout=nchwc;blk=...)
                lay = f"NCHWc, the 1x1 passes {self.algo.removeprefix('layout-nchwc/')}"
            elif self.algo.startswith("layout-nchwc-"):  # a Winograd tile for some of the region's convs too
                lay = "NCHWc, Winograd " + ", ".join(f"F({t[1]},3) on {s}" for s, _, t in
                                                     (x.rpartition(":") for x in
                                                      self.algo.removeprefix("layout-nchwc-").split(",")))
            if self.algo == self.default_algo:
                return f"layout tuned on {where}: {lay}, the estimate's pick, measured fastest{src}"
            return f"layout tuned on {where}: {lay}, {self.speedup:.2f}x over the estimate's pick{src}"
        if not self.forced:
            n = sum(1 for t in self.trials if "ms" in t)
            return f"tuned on {where}: the cost model's pick {self.algo} measured fastest of {n} variants{src}"
        return f"tuned on {where}: {self.speedup:.2f}x over the cost model's pick ({self.default_algo} -> " \
               f"{self.algo}){src}"

    def transferable(self) -> list[str]:
        """Variant names a transfer tries on another layer of its class: those that reproduce this record's
        winner (the winner, or for a kept cost-model pick the variants that emitted the same kernel), then the
        near ties (NEAR_TIE): where two paths nearly tie on the source layer, which one wins at another shape is
        for the measurement to settle (mnv2g8 -> mnv2g16: a GSPC tile 1.05x over F(4,3) on the source gave
        1.4-1.6x on the destination's layers when transferred, nothing when the source record kept F(4,3))."""
        # a blocking that gave the default's code there is the cost model's blocking, which the layer has anyway
        names = [self.variant] if self.variant != "default" else \
            [t["variant"] for t in self.trials if t.get("rejected") == "same code as default"
             and min_gain(t["variant"]) <= MIN_GAIN]
        timed = [t for t in self.trials if "ms" in t]
        best = min((t["ms"] for t in timed), default=0.0)
        # a near tie that needs a larger gain to be recorded (a blocking: BLK_MIN_GAIN) only when it came within
        # NEAR_TIE of that gain on the source: ResNet-50's blockings were near ties of its kept picks on most
        # layers (0.95-1.09x) and made a transfer to SqueezeNet measure 16 layers for nothing it could record
        return names + [t["variant"] for t in timed if t["variant"] not in ("default", *names)
                        and t["ms"] <= best * NEAR_TIE
                        and (min_gain(t["variant"]) <= MIN_GAIN
                             or self.default_ms * NEAR_TIE >= t["ms"] * min_gain(t["variant"]))]

    def kernel_of(self, variant: str) -> str:
        """The kernel (emitted algorithm, without its partitioning) a transferable variant gave on the source."""
        trial = next((t for t in self.trials if t["variant"] == variant and "ms" in t), None)
        algo = self.algo if variant == self.variant or trial is None else trial.get("algo", self.algo)
        return algo.split("/")[0]


def fingerprint(facts: dict) -> str:
    return hashlib.sha256(json.dumps(facts, sort_keys=True).encode()).hexdigest()[:20]


def db_path() -> Path:
    from edgec.devices.deploy import cache_dir
    return cache_dir() / "tuning.sqlite"


class TuningDB:
    def __init__(self, path: Path | None = None):
        self.path = Path(path) if path else db_path()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self.con = sqlite3.connect(str(self.path), timeout=30)
            self.con.execute(f"CREATE TABLE IF NOT EXISTS records ({_COLUMNS})")
            self.con.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT)")
            self.con.execute(f"CREATE TABLE IF NOT EXISTS rejections ({_REJECT_COLUMNS})")
            have = {row[1] for row in self.con.execute("PRAGMA table_info(rejections)")}
            for col in _REJECT_ADDED:
                if col not in have:
                    self.con.execute(f"ALTER TABLE rejections ADD COLUMN {col} TEXT NOT NULL DEFAULT ''")
            self.con.execute("INSERT OR IGNORE INTO meta VALUES ('schema', ?)", (str(SCHEMA_VERSION),))
            self.con.commit()
        except sqlite3.DatabaseError as e:
            raise EdgecError(f"tuning database {self.path} is unreadable ({e}): move it away to start afresh") \
                from None

    def close(self) -> None:
        self.con.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def put(self, r: Record) -> None:
        """Insert or replace (one record per fingerprint and signature), committed at once: an interrupted
        tune keeps everything measured before the interruption."""
        row = (r.fingerprint, r.signature, r.cls, r.variant, r.forced, r.algo, float(r.time_ms), r.default_algo,
               float(r.default_ms), r.source, r.model, r.device, r.date, int(bool(r.emulated)),
               json.dumps(r.facts, sort_keys=True), json.dumps(r.trials))
        with self.con:
            self.con.execute(f"INSERT OR REPLACE INTO records VALUES ({','.join('?' * len(row))})", row)

    def _rows(self, where: str = "", args: tuple = ()) -> list[Record]:
        cur = self.con.execute(f"SELECT * FROM records {where} ORDER BY signature", args)
        out = []
        for row in cur.fetchall():
            (fp, sig, cls, var, forced, algo, t, dalgo, dt, src, model, dev, date, emu, facts, trials) = row
            out.append(Record(fp, sig, cls, var, forced, algo, t, dalgo, dt, src, model, dev, date, bool(emu),
                              json.loads(facts), json.loads(trials)))
        return out

    def records(self, fp: str | None = None) -> list[Record]:
        return self._rows("WHERE fingerprint = ?", (fp,)) if fp else self._rows()

    def applicable(self, fp: str, emulated: bool) -> list[Record]:
        """Records a build for this device uses: its own fingerprint; emulated timings only for an emulated
        device (the fingerprint holds the flag too; this keeps an imported record honest)."""
        return [r for r in self._rows("WHERE fingerprint = ?", (fp,)) if emulated or not r.emulated]

    def get(self, fp: str, signature: str) -> Record | None:
        rows = self._rows("WHERE fingerprint = ? AND signature = ?", (fp, signature))
        return rows[0] if rows else None

    def reject(self, r: Rejection) -> None:
        """Leave a record out of one model's builds (committed at once, like put)."""
        row = {f.name: getattr(r, f.name) for f in fields(Rejection)}
        with self.con:
            self.con.execute(f"INSERT OR REPLACE INTO rejections ({', '.join(row)}) VALUES ({','.join('?' * len(row))})",
                             tuple(row.values()))

    def unreject(self, fp: str, key: str, signature: str) -> None:
        """Let a record into one model's builds again (a later check kept it)."""
        with self.con:
            self.con.execute("DELETE FROM rejections WHERE fingerprint = ? AND model_key = ? AND signature = ?",
                             (fp, key, signature))

    def all_rejections(self, fp: str | None = None) -> list[Rejection]:
        where, args = ("WHERE fingerprint = ?", (fp,)) if fp else ("", ())
        rows = self.con.execute(f"SELECT {_REJ_SELECT} FROM rejections {where} ORDER BY fingerprint, model_key, "
                                "signature", args).fetchall()
        return [Rejection(*row) for row in rows]

    def rejections(self, fp: str, key: str) -> dict[str, Rejection]:
        """Per signature, the records left out of the builds of the model with this content key."""
        rows = self.con.execute(f"SELECT {_REJ_SELECT} FROM rejections WHERE fingerprint = ? AND model_key = ? "
                                "ORDER BY signature", (fp, key)).fetchall()
        return {row[2]: Rejection(*row) for row in rows}


_REJ_SELECT = ", ".join(f.name for f in fields(Rejection))  # the dataclass's order, whatever the table's


def today() -> str:
    return _dt.date.today().isoformat()


# -- fingerprints ---------------------------------------------------------------------------------

# CPU flags that change which kernels run or how fast (kernel version noise in /proc/cpuinfo would otherwise
# keep two boards of one kind from sharing records)
SIMD_FEATURES = frozenset({
    "sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512cd",
    "avx512_vnni", "avx512_bf16", "avx512_fp16", "avx_vnni", "neon", "vfpv3", "vfpv4", "asimd", "asimdhp",
    "asimddp", "asimdrdm", "fphp", "i8mm", "bf16", "sve", "sve2"})

def _facts_script(cc: str) -> str:
    q = shlex.quote(cc)
    return f"""echo "@arch=$(uname -m)"
echo "@cores=$(getconf _NPROCESSORS_ONLN 2>/dev/null || nproc 2>/dev/null)"
echo "@cc_version=$({q} -dumpfullversion -dumpversion 2>/dev/null | head -n1)"
for d in /sys/devices/system/cpu/cpu0/cache/index*; do
  [ -r "$d/size" ] && echo "@cache=L$(cat $d/level)$(cut -c1 $d/type):$(cat $d/size)"; done 2>/dev/null
echo "@cpuinfo"
cat /proc/cpuinfo 2>/dev/null
"""


def device_facts(device, t, mode: str, threads: int = 1) -> dict:
    """What a device's timings depend on, read on the device with one short script (and here for a cross
    compiler)."""
    import subprocess

    from edgec.codegen.targets import get_target
    from edgec.devices import probe
    from edgec.devices.deploy import _codegen_fingerprint, cross_compiler

    text = t.run(_facts_script(device.cc), timeout=60).out
    head, _, cpuinfo = text.partition("@cpuinfo\n")
    vals: dict[str, list[str]] = {}
    for line in head.splitlines():
        k, sep, v = line.partition("=")
        if sep and k.startswith("@"):
            vals.setdefault(k[1:], []).append(v.strip())
    info = probe.parse_cpuinfo(cpuinfo)
    if mode in ("cross", "native"):
        cc = cross_compiler(device) or device.cc
        try:
            ver = subprocess.run([cc, "-dumpfullversion", "-dumpversion"], capture_output=True, text=True,
                                 timeout=30).stdout.split()
        except OSError:
            ver = []
        cc_id = f"{Path(cc).name} {ver[0] if ver else '?'} (here)"
    else:
        cc_id = f"{Path(device.cc).name} {(vals.get('cc_version') or ['?'])[0] or '?'} (on the board)"
    cores = (vals.get("cores") or [""])[0]
    facts = {
        "cpu": info["cpu"], "cpu_part": info["cpu_part"], "arch": (vals.get("arch") or [None])[0],
        "features": sorted(set(info["features"]) & SIMD_FEATURES), "cores": int(cores) if cores.isdigit() else
        info["processors"], "caches": sorted(set(vals.get("cache", []))), "compiler": cc_id,
        "target": get_target(device.target).name, "codegen": _codegen_fingerprint(), "emulated": bool(device.emulated),
    }
    if device.emulated:  # the host's CPU facts; what runs is the emulator's model of the board
        facts["emulator"] = shlex.join(device.exec_wrapper)
    return facts


# -- export / import --------------------------------------------------------------------------------

_TYPES = {f.name: f.type for f in fields(Record)}
_PY = {"str": str, "float": (int, float), "bool": bool, "dict": dict, "list": list}


def export(path: Path, db: TuningDB, fp: str | None = None) -> int:
    """Records and the per-model rejections of the whole-model check (a lab's tune of a model ships both:
    without the rejections the model's builds elsewhere would use records it found slower in place)."""
    recs = db.records(fp)
    doc = {"edgec_tuning": SCHEMA_VERSION, "records": [asdict(r) for r in recs],
           "rejections": [asdict(r) for r in db.all_rejections(fp)]}
    write_text_atomic(Path(path), json.dumps(doc, indent=1, sort_keys=True) + "\n")
    return len(recs)


def import_file(path: Path, db: TuningDB) -> int:
    """Validate every record first (one bad record: nothing imported, one line naming it)."""
    path = Path(path)
    try:
        doc = json.loads(path.read_text())
    except OSError as e:
        raise EdgecError(f"cannot read {path}: {e.strerror or e}") from None
    except (ValueError, UnicodeDecodeError) as e:
        raise EdgecError(f"{path} is not a JSON file of tuning records ({str(e)[:80]})") from None
    if not isinstance(doc, dict) or doc.get("edgec_tuning") != SCHEMA_VERSION or not isinstance(doc.get("records"), list):
        raise EdgecError(f"{path} is not an edgec tuning export (version {SCHEMA_VERSION}): "
                         "expected {\"edgec_tuning\": 1, \"records\": [...]}")
    recs = [_record_from(d, i, path) for i, d in enumerate(doc["records"])]
    rejs = doc.get("rejections", [])  # exports before the whole-model check have none
    if not isinstance(rejs, list):
        raise EdgecError(f"{path}: rejections is not a list")
    rejs = [_rejection_from(d, i, path) for i, d in enumerate(rejs)]
    for r in recs:
        db.put(r)
    for j in rejs:
        db.reject(j)
    return len(recs)


_REJ_FIELDS = [f.name for f in fields(Rejection) if f.name not in _REJECT_ADDED]  # exports before the runner-up lack those


def _check_object(d, where: str, names) -> str:
    """An imported entry is a JSON object with every field named; returns where, for the next messages."""
    if not isinstance(d, dict):
        raise EdgecError(f"{where} is not an object")
    missing = [k for k in names if k not in d]
    if missing:
        raise EdgecError(f"{where} lacks {', '.join(missing)}")
    return where


def _rejection_from(d, i: int, path: Path) -> Rejection:
    from edgec.codegen.variants import parse_forced

    where = _check_object(d, f"{path}: rejection {i + 1}", _REJ_FIELDS)
    names = _REJ_FIELDS + [k for k in _REJECT_ADDED if k in d]
    bad = [k for k in names if not isinstance(d[k], str)]
    if bad:
        raise EdgecError(f"{where}: {bad[0]} has the wrong type ({type(d[bad[0]]).__name__})")
    try:
        parse_forced(d.get("instead", ""))
    except EdgecError as e:
        raise EdgecError(f"{where}: {e}") from None
    return Rejection(**{k: d[k] for k in names})


def _record_from(d, i: int, path: Path) -> Record:
    from edgec.codegen.variants import parse_forced

    where = _check_object(d, f"{path}: record {i + 1}", _TYPES)
    for k, typ in _TYPES.items():
        want = _PY[typ if isinstance(typ, str) else typ.__name__]
        if not isinstance(d[k], want) or (want is not bool and isinstance(d[k], bool)):
            raise EdgecError(f"{where}: {k} has the wrong type ({type(d[k]).__name__})")
    if not (d["time_ms"] > 0 and d["default_ms"] > 0):
        raise EdgecError(f"{where}: times must be positive")
    try:
        parse_forced(d["forced"])
    except EdgecError as e:
        raise EdgecError(f"{where}: {e}") from None
    if fingerprint(d["facts"]) != d["fingerprint"] or bool(d["facts"].get("emulated")) != d["emulated"]:
        raise EdgecError(f"{where}: fingerprint does not match its device facts (edited by hand?)")
    return Record(**{k: d[k] for k in _TYPES})
