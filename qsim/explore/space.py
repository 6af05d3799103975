"""The design space of `qsim explore`: `KEY=V1,V2` terms (the command line) or a TOML [space]
table of lists, split into the precisions and the NPU configurations. The configuration keys
are those of `qsim simulate --sweep` and go through its parser (qsim.npu.simulate.parse_sweep),
so both commands sweep configurations the same way; `cores` among them (several cores sharing
DRAM, qsim/npu/cores/: a point's cycles, energy and area are those of all its cores)."""
from __future__ import annotations

import itertools
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

from ..errors import DataError, UsageError
from ..userdata import check_nesting
from ..npu.config import NpuConfig
from ..npu.simulate import SWEEP_KEYS, parse_sweep

PRECISION_KEY = "precision"
# int8, 16x8 (qsim quantize --precision) or a mixed-precision plan for a target SQNR in dB
# (qsim quantize --target-sqnr DB), written sqnr:DB
FIXED_PRECISIONS = ("int8", "16x8")
_PLAN = re.compile(r"^sqnr:(-?[0-9]+(?:\.[0-9]*)?)$")


@dataclass(frozen=True)
class Space:
    precisions: tuple[str, ...]          # in the order given
    configs: tuple[NpuConfig, ...]

    @property
    def points(self) -> list[tuple[str, NpuConfig]]:
        """Every (precision, configuration), precision-major."""
        return list(itertools.product(self.precisions, self.configs))


def plan_target_db(precision: str) -> float | None:
    """The target SQNR of a `sqnr:DB` precision, None for int8/16x8."""
    match = _PLAN.match(precision)
    return float(match.group(1)) if match else None


def check_precision(value: str, where: str) -> str:
    if value in FIXED_PRECISIONS or _PLAN.match(value):
        return value
    raise UsageError(f"{where}: precision {value!r} is not int8, 16x8 or sqnr:DB",
                     hint="e.g. precision=int8,16x8,sqnr:35 (sqnr:DB: the mixed-precision plan of "
                          "qsim quantize --target-sqnr DB)")


def parse_terms(terms: list[str], base: NpuConfig, flag: str = "--space") -> Space:
    """`KEY=V1,V2,...` terms: `precision` (default int8) and the configuration keys of
    `qsim simulate --sweep` (default: the base configuration alone)."""
    precisions: list[str] | None = None
    config_terms = []
    for term in terms:
        key, sep, values = term.partition("=")
        if key.strip() != PRECISION_KEY:
            config_terms.append(term)
            continue
        if precisions is not None:
            raise UsageError(f"{flag} key 'precision' is given twice", hint="list all values in one term")
        items = [v.strip() for v in values.split(",")]
        if not sep or not all(items):
            raise UsageError(f"{flag} term {term!r} is not KEY=V1,V2,...", hint="e.g. precision=int8,16x8")
        precisions = [check_precision(v, f"{flag} {term}") for v in items]
        if len(set(precisions)) != len(precisions):
            raise UsageError(f"{flag} {term}: a precision is repeated", hint="list each once")
    configs = parse_sweep(config_terms, base, flag) if config_terms else [base]
    return Space(tuple(precisions or ["int8"]), tuple(configs))


def space_terms_from_toml(text: str, file: str) -> list[str]:
    """The [space] table of a TOML file as `KEY=V1,V2` terms: every key a list (or one value)
    of numbers or strings."""
    check_nesting(text, file, toml=True)        # tomllib recurses per nesting level
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise DataError(f"{file} is not valid TOML: {err}", hint="see docs/explore.md for the form") from None
    table = doc.get("space")
    if not isinstance(table, dict) or not table:
        raise DataError(f"{file}: no [space] table with at least one key", hint="e.g. [space]\nrows = [8, 16]\ndataflow = [\"ws\", \"os\"]")
    unknown = [k for k in doc if k != "space"]
    if unknown:
        raise DataError(f"{file}: unknown table or key {unknown[0]!r}",
                        hint="the file has one [space] table")
    terms = []
    for key, values in table.items():
        values = values if isinstance(values, list) else [values]
        if key != PRECISION_KEY and key not in SWEEP_KEYS:
            raise DataError(f"{file}: [space] key {key!r} is not a configuration key or precision", hint=f"keys: precision, {', '.join(SWEEP_KEYS)}")
        if not values or not all(isinstance(v, (int, float, str)) and not isinstance(v, bool) for v in values):
            raise DataError(f"{file}: [space] {key} must be a non-empty list of numbers or strings", hint=f"e.g. {key} = [8, 16]")
        if any(isinstance(v, str) and ("," in v or not v.strip()) for v in values):
            raise DataError(f"{file}: [space] {key} has an empty value or one with a comma", hint="one value per list item")
        terms.append(f"{key}=" + ",".join(str(v) for v in values))
    return terms


def load_space(toml_path: str | None, terms: list[str] | None, base: NpuConfig) -> Space:
    """The space of `--space-file F.toml` and/or `--space TERMS` (the terms override the file's
    keys of the same name)."""
    merged: dict[str, str] = {}
    if toml_path is not None:
        path = Path(toml_path)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as err:
            raise UsageError(f"--space-file {toml_path}: cannot read it ({err.strerror})",
                             hint="pass an existing TOML file with a [space] table") from None
        except UnicodeDecodeError as err:
            raise DataError(f"--space-file {toml_path}: not UTF-8 text (byte {err.start})",
                            hint="a TOML file is UTF-8 text with a [space] table") from None
        for term in space_terms_from_toml(text, str(path)):
            merged[term.partition("=")[0]] = term
    given = set()
    for term in terms or []:
        key = term.partition("=")[0].strip()
        if key in given:
            raise UsageError(f"--space key {key!r} is given twice", hint="list all values in one term")
        given.add(key)
        merged[key] = term
    return parse_terms(list(merged.values()), base)
