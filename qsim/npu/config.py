"""NPU configuration: one TOML file (table [npu]), validated on load; named presets.

Keys (all required except name and clock_mhz):
  rows, cols                    systolic array size, 1..64 each
  dataflow                      "ws" / "weight_stationary" or "os" / "output_stationary"
  input_buffer_bytes            multiple of rows (input words hold R int8 lanes)
  weight_buffer_bytes           multiple of cols (weight words hold C int8 lanes)
  accumulator_buffer_bytes      multiple of 4*cols (accumulator words hold C int32 lanes);
                                the int8 output buffer has the same depth in words
  dram_bytes_per_cycle          1..4096
  clock_mhz                     (0, 10000], default 1000
  dram                          optional: a DRAM timing profile of qsim/npu/dram/profiles.toml
                                ("ddr4-3200", "lpddr4-4266"; "off" = absent), converted to
                                cycles at clock_mhz; or all six of dram_trcd, dram_trp, dram_tcl
                                (cycles, >= 0), dram_banks, dram_row_bytes, dram_burst_bytes
                                (>= 1). Absent: the ideal memory (qsim/npu/dram/timing.py), as before.
  cores                         optional, 1..16 (default 1): NPU cores of this geometry sharing the
                                DRAM port through an arbiter (qsim/npu/cores/); not with `dram`
  mapping                       optional: "fixed" (default: the compiler's one rule) or "search"
                                (per GEMM the loop order and tile sizes that minimize the objective;
                                qsim/npu/mapping/)
  mapping_objective             with mapping = "search": "cycles", "energy" or "edp" (default:
                                energy-delay product)
Each buffer holds 2..65536 words (16-bit addresses), and at least 2*rows
(weights, WS), 2*rows (accumulators) words so that both halves of a double
buffer hold a full tile.
"""
from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, fields
from pathlib import Path

from ..errors import DataError, Location, UsageError
from ..userdata import check_nesting
from ..hw.params import Dataflow, Geometry
from .dram import SHAPE_KEYS, TIMING_KEYS, DramTiming, profile_timing, profiles
from .mapping.policy import FIXED_POLICY, MappingMode, MappingPolicy
from ..textfile import decode_utf8

MAX_DIM = 64
MAX_DEPTH_WORDS = 1 << 16
MAX_CORES = 16

_DATAFLOW_NAMES = {"ws": Dataflow.WEIGHT_STATIONARY, "weight_stationary": Dataflow.WEIGHT_STATIONARY,
                   "os": Dataflow.OUTPUT_STATIONARY, "output_stationary": Dataflow.OUTPUT_STATIONARY}


@dataclass(frozen=True)
class NpuConfig(Geometry):
    """A configuration: the hardware's Geometry (hw/params.py, the one definition of the
    array, buffer and bandwidth parameters) plus what only the reports need."""
    name: str = ""
    clock_mhz: float = 1000.0
    cores: int = 1      # identical cores sharing DRAM (qsim/npu/cores/); `geometry` is one core's
    mapping: MappingPolicy = FIXED_POLICY       # how the compiler maps each GEMM (not hardware)

    @property
    def geometry(self) -> Geometry:
        """The hardware part alone (what the RTL and its build caches are keyed by)."""
        return Geometry(**{f.name: getattr(self, f.name) for f in fields(Geometry)})

    def to_toml(self) -> str:
        """The [npu] table that parse_config reads back as this configuration."""
        return (f'[npu]\nname = {toml_string(self.name)}\nrows = {self.rows}\ncols = {self.cols}\n'
                f'dataflow = "{self.dataflow.value}"\n'
                f"input_buffer_bytes = {self.input_buffer_bytes}\n"
                f"weight_buffer_bytes = {self.weight_buffer_bytes}\n"
                f"accumulator_buffer_bytes = {self.accumulator_buffer_bytes}\n"
                f"dram_bytes_per_cycle = {self.dram_bytes_per_cycle}\n"
                f"clock_mhz = {self.clock_mhz}\n" + (f"cores = {self.cores}\n" if self.cores != 1 else "")
                + dram_toml(self.dram) + mapping_toml(self.mapping))


def mapping_toml(policy: MappingPolicy) -> str:
    """The [npu] lines that give `policy` back (none for the fixed rule, the default)."""
    if policy.mode is MappingMode.FIXED:
        return ""
    return f'mapping = "search"\nmapping_objective = "{policy.objective.value}"\n'


def dram_toml(timing: DramTiming | None) -> str:
    """The [npu] lines that give `timing` back (none for the ideal memory)."""
    if timing is None:
        return ""
    if timing.profile:
        return f'dram = "{timing.profile}"\n'
    return "".join(f"dram_{k} = {getattr(timing, k)}\n" for k in TIMING_KEYS + SHAPE_KEYS)


def toml_string(text: str) -> str:
    """`text` as a TOML basic string (TOML 1.0 "String"): backslash, quote and every control
    character escaped, other characters (non-ASCII included) kept as they are in UTF-8."""
    out = []
    for ch in text:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04X}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def _preset(n: int, dataflow=Dataflow.WEIGHT_STATIONARY) -> NpuConfig:
    kib = 1024
    return NpuConfig(name=f"{n}x{n}", rows=n, cols=n, dataflow=dataflow,
                     input_buffer_bytes=16 * n * kib // 8, weight_buffer_bytes=16 * n * kib // 8,
                     accumulator_buffer_bytes=64 * n * kib // 8, dram_bytes_per_cycle=n,
                     clock_mhz=1000.0)


# 8x8: 16 KiB input, 16 KiB weight, 64 KiB accumulator buffers, 8 B/cycle; scaled by n/8.
PRESETS = {p.name: p for p in (_preset(8), _preset(16), _preset(32))}


def _line_of(text: str, key: str) -> int | None:
    for number, line in enumerate(text.splitlines(), start=1):
        if re.match(rf"\s*{re.escape(key)}\s*=", line):
            return number
    return None


def parse_config(text: str, file: str = "<config>") -> NpuConfig:
    """Validates a TOML text; every failure is a DataError naming file:line, key, value, range."""
    def fail(key, message, hint="the keys, their types and ranges are listed in docs/npu.md"):
        raise DataError(message, location=Location(file, _line_of(text, key) if key else None), hint=hint)

    check_nesting(text, file, toml=True)
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise DataError(f"not valid TOML: {err}", location=Location(file),
                        hint="the file needs a [npu] table of key = value lines") from None
    if set(doc) != {"npu"} or not isinstance(doc["npu"], dict):
        fail(None, f"expected exactly one table [npu], found {sorted(doc) or 'none'}",
             hint="put all keys under a [npu] header")
    table = dict(doc["npu"])
    required = ("rows", "cols", "dataflow", "input_buffer_bytes", "weight_buffer_bytes",
                "accumulator_buffer_bytes", "dram_bytes_per_cycle")
    check_keys(table, required, ("name", "clock_mhz", "dram", "cores", "mapping", "mapping_objective") + DRAM_KEYS,
               "npu", fail)

    def integer(key, low, high):
        value = table[key]
        if isinstance(value, bool) or not isinstance(value, int):
            fail(key, f"key '{key}' = {value!r} must be an integer in [{low}, {high}]")
        if not low <= value <= high:
            fail(key, f"key '{key}' = {value} is out of range: allowed [{low}, {high}]")
        return value

    rows, cols = integer("rows", 1, MAX_DIM), integer("cols", 1, MAX_DIM)
    name = table.get("name", f"{rows}x{cols}")
    if not isinstance(name, str):
        fail("name", f"key 'name' = {name!r} must be a string")
    flow = table["dataflow"]
    if not isinstance(flow, str) or flow.lower() not in _DATAFLOW_NAMES:
        fail("dataflow", f"key 'dataflow' = {flow!r} is not a dataflow: allowed "
                         f"{', '.join(repr(k) for k in _DATAFLOW_NAMES)}")
    dataflow = _DATAFLOW_NAMES[flow.lower()]
    bandwidth = integer("dram_bytes_per_cycle", 1, 4096)
    clock = table.get("clock_mhz", 1000.0)
    if isinstance(clock, bool) or not isinstance(clock, (int, float)) or not 0 < clock <= 10000:
        fail("clock_mhz", f"key 'clock_mhz' = {clock!r} is out of range: allowed (0, 10000]")

    def buffer(key, word_bytes, min_words):
        value = integer(key, 1, word_bytes * MAX_DEPTH_WORDS)
        if value % word_bytes:
            fail(key, f"key '{key}' = {value} is not a multiple of its word size {word_bytes} bytes",
                 hint=f"use {value - value % word_bytes or word_bytes} or "
                      f"{value - value % word_bytes + word_bytes}")
        if value // word_bytes < min_words:
            fail(key, f"key '{key}' = {value} holds {value // word_bytes} words; at least "
                      f"{min_words} words ({min_words * word_bytes} bytes) are needed for a "
                      f"{rows}x{cols} array", hint="double buffering needs two full tiles")
        return value

    cores = integer("cores", 1, MAX_CORES) if "cores" in table else 1
    dram = _dram(table, float(clock), fail)
    if cores > 1 and dram is not None:
        fail("cores", f"key 'cores' = {cores} with DRAM timing: several cores are modelled with the "
                      "ideal memory only", hint="remove the dram keys, or use cores = 1")
    return NpuConfig(
        cores=cores, dram=dram, name=name, rows=rows, cols=cols, dataflow=dataflow,
        input_buffer_bytes=buffer("input_buffer_bytes", rows, 2),
        weight_buffer_bytes=buffer("weight_buffer_bytes", cols, 2 * rows),
        accumulator_buffer_bytes=buffer("accumulator_buffer_bytes", 4 * cols, 2 * rows),
        dram_bytes_per_cycle=bandwidth, clock_mhz=float(clock), mapping=_mapping(table, fail))


def _mapping(table: dict, fail) -> MappingPolicy:
    """The `mapping` and `mapping_objective` keys (qsim/npu/mapping/policy.py)."""
    mode, objective = table.get("mapping", "fixed"), table.get("mapping_objective")
    if not isinstance(mode, str) or mode.lower() not in ("fixed", "search"):
        fail("mapping", f"key 'mapping' = {mode!r} is not a mapping: allowed 'fixed', 'search'")
    if objective is not None and mode.lower() != "search":
        fail("mapping_objective", "key 'mapping_objective' needs mapping = \"search\"",
             hint="add mapping = \"search\", or remove mapping_objective")
    if objective is not None and (not isinstance(objective, str)
                                  or objective.lower() not in ("cycles", "energy", "edp")):
        fail("mapping_objective", f"key 'mapping_objective' = {objective!r} is not an objective: "
                                  "allowed 'cycles', 'energy', 'edp'")
    return MappingPolicy.parse(mode if objective is None else f"{mode}:{objective}")


DRAM_KEYS = tuple(f"dram_{k}" for k in TIMING_KEYS + SHAPE_KEYS)


def _dram(table: dict, clock_mhz: float, fail) -> DramTiming | None:
    """The `dram` profile or the six explicit dram_* keys; None when neither is given."""
    explicit = [k for k in DRAM_KEYS if k in table]
    if "dram" in table:
        name = table["dram"]
        if explicit:
            fail(explicit[0], f"key '{explicit[0]}' and a 'dram' profile are both given",
                 hint="give either dram = \"PROFILE\" or all of the explicit dram_* keys")
        if not isinstance(name, str) or name.lower() not in (*profiles(), "off"):
            fail("dram", f"key 'dram' = {name!r} is not a DRAM profile: allowed "
                         f"{', '.join(repr(k) for k in (*profiles(), 'off'))}",
                 hint="profiles and their sources: qsim/npu/dram/profiles.toml, docs/npu.md")
        return None if name.lower() == "off" else profile_timing(name, clock_mhz)
    if not explicit:
        return None
    missing = [k for k in DRAM_KEYS if k not in table]
    if missing:
        fail(explicit[0], f"explicit DRAM timing needs all of {', '.join(DRAM_KEYS)}; missing "
                          f"{', '.join(missing)}", hint="or use a profile: dram = \"ddr4-3200\"")
    values = {}
    for key in DRAM_KEYS:
        value, low = table[key], 0 if key[5:] in TIMING_KEYS else 1
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= 1 << 20:
            fail(key, f"key '{key}' = {value!r} must be an integer in [{low}, {1 << 20}]",
                 hint="DRAM times are whole NPU cycles; a latency cannot be negative")
        values[key[5:]] = value
    return DramTiming(**values)


def check_keys(table: dict, required, optional, header: str, fail) -> None:
    """Every key of `table` is known and every required key is there; `fail(key, message,
    hint=...)` raises (the caller's error names the file and the key's line)."""
    known = set(required) | set(optional)
    for key in table:
        if key not in known:
            fail(key, f"unknown key '{key}' in [{header}]", hint=f"known keys: {', '.join(sorted(known))}")
    for key in required:
        if key not in table:
            fail(None, f"missing key '{key}' in [{header}]", hint=f"add '{key} = ...' under [{header}]")


def with_cores(config: NpuConfig, cores: int | None) -> NpuConfig:
    """`config` with `cores` cores (None: as it is); `qsim simulate --cores N`."""
    if cores is None:
        return config
    if not 1 <= cores <= MAX_CORES:
        raise UsageError(f"--cores {cores} is out of range: allowed [1, {MAX_CORES}]")
    if cores > 1 and config.dram is not None:
        raise UsageError(f"--cores {cores} with DRAM timing: several cores are modelled with the ideal memory only",
                         hint="drop the DRAM profile from --config, or use --cores 1")
    return NpuConfig(**{**config.__dict__, "cores": cores})


def load_config(spec: str | Path) -> NpuConfig:
    """A preset name (8x8, 16x16, 32x32; with ':os' / ':ws' for the dataflow and/or ':ddr4-3200'
    / ':lpddr4-4266' for DRAM timing) or a TOML path."""
    text_spec = str(spec)
    base, *suffixes = text_spec.split(":")
    if base in PRESETS:
        config = PRESETS[base]
        for suffix in suffixes:
            if suffix.lower() in _DATAFLOW_NAMES:
                config = NpuConfig(**{**config.__dict__, "dataflow": _DATAFLOW_NAMES[suffix.lower()]})
            elif suffix.lower() in profiles():
                config = NpuConfig(**{**config.__dict__, "dram": profile_timing(suffix, config.clock_mhz)})
            else:
                raise UsageError(f"unknown dataflow '{suffix}' in '{text_spec}' (nor a DRAM profile)",
                                 hint=f"use ':ws' or ':os' and/or a DRAM profile "
                                      f"({', '.join(':' + p for p in profiles())}) after the preset name")
        return config
    path = Path(text_spec)
    if not is_file(path, "NPU configuration"):
        raise UsageError(f"no NPU configuration '{text_spec}': not a preset and not a file",
                         hint=f"presets: {', '.join(PRESETS)} (append ':os' for output-stationary)")
    text = read_utf8(path, "NPU configuration")
    return parse_config(text, file=str(path))


def is_file(path: Path, what: str) -> bool:
    """Whether `path` names a file; a name the OS rejects (too long, ...) is a DataError."""
    try:
        return path.is_file()
    except OSError as err:
        raise DataError(f"cannot use {str(path)[:80]!r}{'...' if len(str(path)) > 80 else ''} as the "
                        f"{what}: {err.strerror or err}", hint="give a shorter path") from None


def read_utf8(path: Path, what: str) -> str:
    """The UTF-8 text of a user's TOML file; unreadable or non-UTF-8 files are DataErrors."""
    try:
        data = path.read_bytes()
    except OSError as err:
        raise DataError(f"cannot read the {what} ({err.strerror or err})",
                        location=Location(str(path))) from None
    return decode_utf8(data, str(path), what=f"the {what}",
                       hint="TOML files are UTF-8: save the file as UTF-8")
