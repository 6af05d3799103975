"""Mutators for model texts and binary files: each takes a seeded `random.Random` and bytes.

Text mutators work on tokens (identifiers, numbers, strings, punctuation) so that most results
still lex and reach the parser's, composer's and executor's deeper checks; byte mutators
exercise the decoders. Numeric extremes are the values where integer/float conversions break:
overflow to inf, subnormals, 2^63 and friends, huge negative axes.
"""
from __future__ import annotations

import random
import re

NUMBER_EXTREMES = (
    "0", "-0", "1", "-1", "2", "-2", "7", "-9209", "9209", "255", "256", "-129", "127", "-128",
    "65535", "65536", "2147483647", "2147483648", "-2147483649", "4294967296",
    "9223372036854775807", "9223372036854775808", "-9223372036854775809", "18446744073709551616",
    "1" + "0" * 400, "1e400", "-1e400", "5e-324", "1e-400", "3.4028236e38", "1.0e308", "nan", "inf",
    "0.0", "-0.0", "1e-45", "0.5", "2.5", "100000", "1000000000", "0x7fffffff",
)
TOKEN = re.compile(rb"[A-Za-z_][A-Za-z0-9_.]*|\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|'[^'\n]*'|\"[^\"\n]*\"|\s+|.",
                   re.DOTALL)
NUMBER = re.compile(rb"-?\d+(?:\.\d*)?(?:[eE][-+]?\d+)?")
PUNCT = [b"(", b")", b"[", b"]", b"{", b"}", b",", b";", b":", b"=", b"..", b"->", b"?", b"|",
         b"+", b"-", b"*", b"/", b"\\", b"^", b"<", b">", b"!", b"&&", b"??", b"@", b"'", b'"', b"#"]
NON_UTF8 = [b"\xff", b"\xfe\xff", b"\xc3\x28", b"\xed\xa0\x80", b"\x00", b"\xe2\x82", b"\x80"]


def _tokens(blob: bytes) -> list[bytes]:
    return TOKEN.findall(blob)


def byte_flip(rng: random.Random, blob: bytes) -> bytes:
    if not blob:
        return bytes([rng.randrange(256)])
    data = bytearray(blob)
    for _ in range(rng.choice((1, 1, 2, 4, 16))):
        i = rng.randrange(len(data))
        data[i] = rng.randrange(256) if rng.random() < 0.5 else data[i] ^ (1 << rng.randrange(8))
    return bytes(data)


def byte_splice(rng: random.Random, blob: bytes) -> bytes:
    """Deletes, duplicates or truncates a byte range."""
    if not blob:
        return blob
    i = rng.randrange(len(blob))
    j = min(len(blob), i + rng.choice((1, 2, 8, 64, 4096)))
    action = rng.randrange(3)
    if action == 0:
        return blob[:i] + blob[j:]
    if action == 1:
        return blob[:j] + blob[i:j] * rng.choice((1, 2, 100)) + blob[j:]
    return blob[:i]


def token_delete(rng: random.Random, blob: bytes) -> bytes:
    toks = _tokens(blob)
    if not toks:
        return blob
    for _ in range(rng.choice((1, 1, 3))):
        if toks:
            del toks[rng.randrange(len(toks))]
    return b"".join(toks)


def token_duplicate(rng: random.Random, blob: bytes) -> bytes:
    toks = _tokens(blob)
    if not toks:
        return blob
    i = rng.randrange(len(toks))
    j = min(len(toks), i + rng.choice((1, 2, 5, 20)))
    return b"".join(toks[:j] + toks[i:j] * rng.choice((1, 2, 50)) + toks[j:])


def token_insert(rng: random.Random, blob: bytes) -> bytes:
    toks = _tokens(blob)
    i = rng.randrange(len(toks) + 1)
    pick = rng.random()
    if pick < 0.5:
        new = rng.choice(PUNCT)
    elif pick < 0.8 and toks:
        new = rng.choice(toks)
    else:
        new = rng.choice(NUMBER_EXTREMES).encode()
    return b"".join(toks[:i] + [new] + toks[i:])


def token_swap(rng: random.Random, blob: bytes) -> bytes:
    toks = _tokens(blob)
    if len(toks) < 2:
        return blob
    i, j = rng.randrange(len(toks)), rng.randrange(len(toks))
    toks[i], toks[j] = toks[j], toks[i]
    return b"".join(toks)


def number_extreme(rng: random.Random, blob: bytes) -> bytes:
    """Replaces one (or every) number literal with an extreme value."""
    matches = list(NUMBER.finditer(blob))
    if not matches:
        return token_insert(rng, blob)
    if rng.random() < 0.2:
        value = rng.choice(NUMBER_EXTREMES).encode()
        return NUMBER.sub(lambda m: value, blob)
    m = rng.choice(matches)
    return blob[:m.start()] + rng.choice(NUMBER_EXTREMES).encode() + blob[m.end():]


def deep_nesting(rng: random.Random, blob: bytes) -> bytes:
    """Wraps an expression (a number or identifier after '=' or '(' ) in many brackets."""
    depth = rng.choice((50, 199, 200, 201, 500, 1000, 5000))
    opener, closer = rng.choice(((b"(", b")"), (b"[", b"]"), (b"-(", b")"), (b"(-", b")")))
    matches = list(re.finditer(rb"(?<=[=(,]) *([A-Za-z_][A-Za-z0-9_.]*|\d+(?:\.\d+)?)", blob))
    if not matches:
        return opener * depth + blob + closer * depth
    m = rng.choice(matches)
    core = m.group(1)
    return blob[:m.start(1)] + opener * depth + core + closer * depth + blob[m.end(1):]


def long_chain(rng: random.Random, blob: bytes) -> bytes:
    """Turns one operand into a long operator chain: x + x + ... or x ? x : x ? ..."""
    matches = list(re.finditer(rb"(?<=[=(,] )([A-Za-z_][A-Za-z0-9_]*|\d+)(?=[,;)\]])", blob))
    length = rng.choice((100, 300, 1000, 1000, 5000))
    if not matches:
        return blob + b" " + b" + ".join([b"1"] * length)
    m = rng.choice(matches)
    op = rng.choice((b" + ", b" * ", b" - ", b" && ", b" == ", b" ?? ", b" ^ "))
    return blob[:m.start()] + op.join([m.group(1)] * length) + blob[m.end():]


def non_utf8(rng: random.Random, blob: bytes) -> bytes:
    i = rng.randrange(len(blob) + 1)
    return blob[:i] + rng.choice(NON_UTF8) + blob[i:]


def line_shuffle(rng: random.Random, blob: bytes) -> bytes:
    lines = blob.split(b"\n")
    if len(lines) < 2:
        return blob
    action = rng.randrange(3)
    i = rng.randrange(len(lines))
    if action == 0:
        del lines[i]
    elif action == 1:
        lines.insert(rng.randrange(len(lines)), lines[i])
    else:
        j = rng.randrange(len(lines))
        lines[i], lines[j] = lines[j], lines[i]
    return b"\n".join(lines)


TEXT_MUTATORS = (byte_flip, byte_splice, token_delete, token_duplicate, token_insert, token_swap,
                 number_extreme, number_extreme, number_extreme, deep_nesting, long_chain, non_utf8,
                 line_shuffle, token_delete, token_insert)
BYTE_MUTATORS = (byte_flip, byte_flip, byte_splice)


def mutate_text(rng: random.Random, blob: bytes, rounds: int | None = None) -> tuple[bytes, str]:
    """Applies 1..3 text mutators; returns the result and their names."""
    names = []
    for _ in range(rounds or rng.choice((1, 1, 1, 2, 3))):
        m = rng.choice(TEXT_MUTATORS)
        blob = m(rng, blob)
        names.append(m.__name__)
    return blob, "+".join(names)
