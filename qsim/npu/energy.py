"""Energy of an NPU run: event counts from the emitted programs, times a per-event energy table.

Events are counted from the instructions the compiler emits (the schedule the cycle model
and the RTL both execute), one instruction at a time, following hw/compute.py and hw/dma.py:

  LOAD  n words into buffer B     DRAM read n*W bytes; B written n full words
  STORE n words from buffer B     B read n full words; DRAM written n*W bytes
  COMPUTE ws (count M)            weight buffer read R words (preload); input buffer read M
                                  words; R*C*M MACs; accumulators written M words (and read
                                  M words when accumulating); with requant: the parameter
                                  word read once, the output buffer written M words
  COMPUTE os (count K)            input and weight buffers read K words each; R*C*K MACs;
                                  accumulators written R words (read R when accumulating);
                                  with requant: parameter word read, output buffer written R

Words are the int8 / int32 words of hw/README.md: an int16 result (COMPUTE out16, its STORE)
moves two output words per row; the accumulators' 48-bit lanes (hw/compute.py) are counted
as their int32 words, so the int48 layers' extra accumulator bits cost no energy here.

MACs are PE slots: every PE fires every streaming cycle, padded lanes (holding the zero
point) included, so the MAC events of a layer are >= its useful MACs. Vector-unit stages
count one `vector_op` per lane of every beat through the vector unit (cycle_model.py), plus one
`vector_mul` per lane of a MUL or DOT beat and one `vector_div` per lane of an INTDIV beat (their
multiplier and divider; the input and output scalers, like the array's requantization unit, are
part of the element operation), and their DRAM bytes; host stages count nothing (they are not
NPU work).

Energy tables (qsim/npu/tech/<name>.toml or a user file of the same form, docs/npu.md):
[energy_pj] mac, vector_op, register_byte, dram_byte (optional: vector_mul, vector_div, mux_byte, default 0);
[sram_pj_per_64bit] size_bytes = pJ
for a 64-bit access. A buffer of S bytes costs, per byte, the log-log interpolation of the
SRAM points at S (clamped to the end points) divided by 8; writes cost as much as reads.
The parameter buffer (4 words) is a register file: register_byte per byte.
"""
from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass, fields
from importlib import resources
from pathlib import Path

from ..errors import DataError, Location
from ..hw.isa import LoadBuffer, Opcode, StoreBuffer
from ..hw.params import PARAM_DEPTH_WORDS, Dataflow, Geometry
from ..userdata import check_nesting
from .config import check_keys, is_file, read_utf8

DEFAULT_TECH = "45nm"
ENERGY_KEYS = ("mac", "vector_op", "register_byte", "dram_byte")
# Optional entries (absent: 0, so a table written before they existed costs what it did):
# the extra energy of a vector lane that multiplies (MUL, DOT) or divides (INTDIV).
OPTIONAL_ENERGY_KEYS = ("vector_mul", "vector_div", "mux_byte")
# The area tables of the same file, read by qsim.npu.area (an energy table may leave them out).
AREA_TABLES = ("area_um2", "sram_area")
BUFFERS = ("input", "weight", "param", "accumulator", "output")
# Components of the per-layer breakdown, in plot order.
COMPONENTS = ("mac", "input_buffer", "weight_buffer", "param_buffer", "accumulator_buffer",
              "output_buffer", "dram", "vector", "arbiter")
_BUFFER_OF_LOAD = {LoadBuffer.INPUT: "input", LoadBuffer.WEIGHT: "weight", LoadBuffer.PARAM: "param"}
_BUFFER_OF_STORE = {StoreBuffer.OUTPUT: "output", StoreBuffer.ACCUMULATOR: "accumulator"}


@dataclass(frozen=True)
class EventCounts:
    """Countable events of a stage; buffer traffic in bytes of whole buffer words."""
    macs: int = 0
    input_read_bytes: int = 0
    input_write_bytes: int = 0
    weight_read_bytes: int = 0
    weight_write_bytes: int = 0
    param_read_bytes: int = 0
    param_write_bytes: int = 0
    accumulator_read_bytes: int = 0
    accumulator_write_bytes: int = 0
    output_read_bytes: int = 0
    output_write_bytes: int = 0
    dram_read_bytes: int = 0
    dram_write_bytes: int = 0
    vector_ops: int = 0
    vector_mul_ops: int = 0          # lanes of beats through MUL or DOT: a 32 x 32-bit multiply each
    vector_div_ops: int = 0          # lanes of beats through INTDIV: a 32-bit division each
    arbiter_grants: int = 0          # several cores: DRAM instructions granted the shared port
    arbiter_mux_bytes: int = 0       # several cores: DRAM bytes x the port multiplexer's levels

    def __add__(self, other: "EventCounts") -> "EventCounts":
        return EventCounts(**{f.name: getattr(self, f.name) + getattr(other, f.name)
                              for f in fields(self)})

    def to_json(self) -> dict[str, int]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


def _word_bytes(geom: Geometry, buffer: str) -> int:
    return {"input": geom.input_word_bytes, "weight": geom.weight_word_bytes,
            "param": geom.param_word_bytes, "accumulator": geom.acc_word_bytes,
            "output": geom.output_word_bytes}[buffer]


def buffer_bytes(geom: Geometry) -> dict[str, int]:
    """Capacity of each buffer (the output buffer mirrors the accumulators' depth)."""
    return {"input": geom.input_buffer_bytes, "weight": geom.weight_buffer_bytes,
            "param": PARAM_DEPTH_WORDS * geom.param_word_bytes,
            "accumulator": geom.accumulator_buffer_bytes,
            "output": geom.acc_depth_words * geom.output_word_bytes}


def program_events(geom: Geometry, instrs, window_read_bytes: int = 0) -> EventCounts:
    """The events of one program (module docstring); `window_read_bytes`: the DRAM bytes its
    LOADWs move (Program.dram_input_bytes: they depend on the window descriptors)."""
    R, C = geom.rows, geom.cols
    ws = geom.dataflow is Dataflow.WEIGHT_STATIONARY
    n = {f.name: 0 for f in fields(EventCounts)}
    word_bytes = {buffer: _word_bytes(geom, buffer) for buffer in BUFFERS}   # once: a mapping search
                                                                              # counts 100k+ instructions
    def words(buffer: str, kind: str, count: int) -> None:
        n[f"{buffer}_{kind}_bytes"] += count * word_bytes[buffer]

    for instr in instrs:
        if instr.opcode is Opcode.LOAD:
            n["dram_read_bytes"] += instr.get("count") * instr.get("word_bytes")
            if instr.get("buf") != LoadBuffer.VCONFIG:      # registers, not a buffer
                words(_BUFFER_OF_LOAD[LoadBuffer(instr.get("buf"))], "write", instr.get("count"))
        elif instr.opcode is Opcode.LOADW:
            words("input", "write", instr.get("count"))
        elif instr.opcode is Opcode.STORE:
            n["dram_write_bytes"] += instr.get("count") * instr.get("word_bytes")
            words(_BUFFER_OF_STORE[StoreBuffer(instr.get("buf"))], "read", instr.get("count"))
            if instr.get("buf") == StoreBuffer.OUTPUT and instr.get("word_bytes") > geom.output_word_bytes:
                words("output", "read", instr.get("count"))         # int16 lanes: words twice as wide
        elif instr.opcode is Opcode.COMPUTE:
            count = instr.get("count")
            n["macs"] += R * C * count
            words("input", "read", count)
            words("weight", "read", R if ws else count)
            results = count if ws else R
            words("accumulator", "write", results)
            if instr.get("accumulate"):
                words("accumulator", "read", results)
            if instr.get("requant"):
                words("param", "read", 1)
                words("output", "write", results * (2 if instr.get("out16") else 1))
    n["dram_read_bytes"] += window_read_bytes
    return EventCounts(**n)


def vector_events(work: int, dram_read_bytes: int, dram_write_bytes: int, multiplies: int = 0,
                  divisions: int = 0) -> EventCounts:
    """A vector-unit stage: its element operations (and how many of them multiply or divide),
    streamed from and to DRAM."""
    return EventCounts(vector_ops=work, dram_read_bytes=dram_read_bytes, dram_write_bytes=dram_write_bytes,
                       vector_mul_ops=multiplies, vector_div_ops=divisions)


# -- tables ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class EnergyTable:
    name: str
    description: str
    source: str                          # packaged table name or file path
    energy_pj: dict[str, float]          # ENERGY_KEYS
    sram_pj_per_64bit: tuple[tuple[int, float], ...]   # (size bytes, pJ), sizes ascending

    def sram_pj_per_byte(self, size_bytes: int) -> float:
        """Log-log interpolation of the SRAM points at `size_bytes`, clamped, per byte."""
        points = self.sram_pj_per_64bit
        exact = dict(points).get(size_bytes)
        if exact is not None:               # a published size: its figure, not a rounded power
            return exact / 8
        if size_bytes <= points[0][0]:
            return points[0][1] / 8
        for (s0, e0), (s1, e1) in zip(points, points[1:]):
            if size_bytes <= s1:
                if e0 <= 0 or e1 <= 0:      # log of zero: interpolate linearly instead
                    t = (size_bytes - s0) / (s1 - s0)
                    return (e0 + t * (e1 - e0)) / 8
                t = math.log(size_bytes / s0) / math.log(s1 / s0)
                return math.exp(math.log(e0) + t * math.log(e1 / e0)) / 8
        return points[-1][1] / 8

    def to_json(self) -> dict:
        return {"name": self.name, "description": self.description, "source": self.source,
                "energy_pj": dict(self.energy_pj),
                "sram_pj_per_64bit": {str(s): e for s, e in self.sram_pj_per_64bit}}


def packaged_techs() -> list[str]:
    return sorted(p.name[:-5] for p in resources.files("qsim.npu").joinpath("tech").iterdir()
                  if p.name.endswith(".toml"))


def tech_text(spec: str | None, what: str = "energy table") -> tuple[str, str, str]:
    """(text, file, source) of a packaged table by name (`45nm`, `7nm`; None: the default) or
    of a TOML file path: the one lookup the energy and the area tables (qsim.npu.area) share."""
    spec = DEFAULT_TECH if spec is None else str(spec)
    if spec in packaged_techs():
        text = resources.files("qsim.npu").joinpath("tech", f"{spec}.toml").read_text(encoding="utf-8")
        return text, f"qsim/npu/tech/{spec}.toml", spec
    path = Path(spec)
    if not is_file(path, what):
        raise DataError(f"no {what} '{spec}': not a packaged technology and not a file",
                        hint=f"packaged: {', '.join(packaged_techs())}; or a TOML file of the "
                             "same form (docs/npu.md, Energy and Area)")
    return read_utf8(path, what), str(path), str(path)


def load_tech(spec: str | None) -> EnergyTable:
    """A packaged table by name (`45nm`, `7nm`; None: the default) or a TOML file path."""
    text, file, source = tech_text(spec)
    return parse_tech(text, file, source=source)


def _line_of(text: str, key: str) -> int | None:
    """The first line that starts with `key` followed by `=` (or `key` itself for a `[table`)."""
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if key.startswith("[") and stripped.startswith(key):
            return number
        name, sep, _ = stripped.partition("=")
        if sep and name.strip().strip('"\'') == key:
            return number
    return None


def parse_tech(text: str, file: str = "<tech>", source: str | None = None) -> EnergyTable:
    """Validates an energy table; every failure is a DataError naming file:line and the key."""
    form_hint = "docs/npu.md (Energy) shows the form: [tech], [energy_pj] and [sram_pj_per_64bit]"

    def fail(key, message, hint=form_hint):
        raise DataError(message, location=Location(file, _line_of(text, key) if key else None), hint=hint)

    check_nesting(text, file, toml=True)
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise DataError(f"not valid TOML: {err}", location=Location(file), hint=form_hint) from None
    tables = ("tech", "energy_pj", "sram_pj_per_64bit")
    for key in doc:
        if key not in tables + AREA_TABLES:
            fail(f"[{key}", f"unknown table [{key}]", hint=f"the tables are {', '.join(tables + AREA_TABLES)}")
    for key in tables:
        if not isinstance(doc.get(key), dict):
            fail(None, f"missing table [{key}]", hint=form_hint)
    tech = doc["tech"]
    name = tech.get("name", Path(file).stem)
    description = tech.get("description", "")
    for key, value in (("name", name), ("description", description)):
        if not isinstance(value, str):
            fail(key, f"[tech] {key} = {value!r} must be a string")

    def picojoules(key, value, where):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            fail(key, f"{where} {key} = {value!r} must be a number of picojoules")
        if value < 0:
            fail(key, f"{where} {key} = {value} is negative", hint="energies are >= 0 pJ")
        return float(value)

    energy = doc["energy_pj"]
    check_keys(energy, ENERGY_KEYS, OPTIONAL_ENERGY_KEYS, "energy_pj", fail)
    values = {key: picojoules(key, energy[key], "[energy_pj]") for key in ENERGY_KEYS + OPTIONAL_ENERGY_KEYS
              if key in energy}
    points = []
    for key, value in doc["sram_pj_per_64bit"].items():
        if not key.isdigit() or int(key) <= 0:
            fail(key, f"[sram_pj_per_64bit] key '{key}' is not a size in bytes",
                 hint="write the SRAM size in bytes, e.g. 8192 = 10.0")
        points.append((int(key), picojoules(key, value, "[sram_pj_per_64bit]")))
    if not points:
        fail("[sram_pj_per_64bit", "[sram_pj_per_64bit] has no entries",
             hint="give at least one size, e.g. 8192 = 10.0")
    return EnergyTable(name=name, description=description, source=source or file,
                       energy_pj=values, sram_pj_per_64bit=tuple(sorted(points)))


# -- energy ------------------------------------------------------------------------------------

def energy_by_component(events: EventCounts, table: EnergyTable, geom: Geometry) -> dict[str, float]:
    """Picojoules per COMPONENTS entry: sum over events of count x table entry."""
    pj = table.energy_pj
    sizes = buffer_bytes(geom)
    out = {"mac": events.macs * pj["mac"]}
    for buffer in BUFFERS:
        traffic = getattr(events, f"{buffer}_read_bytes") + getattr(events, f"{buffer}_write_bytes")
        per_byte = pj["register_byte"] if buffer == "param" else table.sram_pj_per_byte(sizes[buffer])
        out[f"{buffer}_buffer"] = traffic * per_byte
    out["dram"] = (events.dram_read_bytes + events.dram_write_bytes) * pj["dram_byte"]
    out["vector"] = (events.vector_ops * pj["vector_op"] + events.vector_mul_ops * pj.get("vector_mul", 0.0)
                     + events.vector_div_ops * pj.get("vector_div", 0.0))
    # several cores (qsim/npu/cores/layer.py): a grant updates the arbiter's state (a register
    # byte); every byte through the shared port passes ceil(log2 N) 2:1 multiplexer levels
    out["arbiter"] = events.arbiter_grants * pj["register_byte"] + events.arbiter_mux_bytes * pj.get("mux_byte", 0.0)
    return {key: out[key] for key in COMPONENTS}
