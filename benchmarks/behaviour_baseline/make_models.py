"""Builds the models of the behaviour baseline (run.sh): "mix" (SkriptND, seeded random weights:
conv, depthwise, batch norm, sigmoid, residual add, concat, max pool, strided conv, tanh, mean,
matmul, linear, softmax), "mixns" (without the softmax output, for 16x8), "cvmmix" (what CVM
lowers: sigmoid/tanh as relu, no matmul) and the calibration array.

    python benchmarks/behaviour_baseline/make_models.py DIR
"""
import re
import sys

import numpy as np
from pathlib import Path
from qsim.tensorfile import write_tensor
root = Path(sys.argv[1]); m = root / "mix"; m.mkdir(parents=True, exist_ok=True)
rng = np.random.default_rng(42)
def w(name, shape, s=0.3):
    write_tensor(m / f"{name}.dat", rng.normal(0, s, size=shape).astype(np.float32))
w("c1", (8, 3, 3, 3)); w("b1", (8,), 0.1)
w("dw", (8, 1, 3, 3)); w("c2", (8, 8, 1, 1)); w("b2", (8,), 0.1)
w("bnm", (8,), 0.1); write_tensor(m / "bnv.dat", rng.uniform(0.5, 2, 8).astype(np.float32)); w("bnb", (8,), 0.1); write_tensor(m / "bns.dat", rng.uniform(0.5, 1.5, 8).astype(np.float32))
w("c3", (16, 16, 3, 3)); w("fc", (10, 16)); w("fcb", (10,), 0.1); w("mm", (16, 16))
(m / "main.sknd").write_text("""import nn;
import math;
import layout;
import linalg;

graph mix {
    @input { input: real[1, 3, 16, 16]; }
    @output { output: real[1, 10]; probs: real[1, 10]; }
    @variable {
        c1: real[8, 3, 3, 3]; b1: real[8]; dw: real[8, 1, 3, 3]; c2: real[8, 8, 1, 1]; b2: real[8];
        bnm: real[8]; bnv: real[8]; bnb: real[8]; bns: real[8];
        c3: real[16, 16, 3, 3]; fc: real[10, 16]; fcb: real[10]; mm: real[16, 16];
    }
    @compose {
        x1 = nn.conv{padding=[1, 1, 1, 1]}(input, c1, b1);
        r1 = nn.relu(x1);
        d = nn.conv{padding=[1, 1, 1, 1], groups=8}(r1, dw);
        bn = nn.batch_norm{epsilon=1e-05}(d, bnm, bnv, bnb, bns);
        s = nn.sigmoid(bn);
        p = nn.conv(s, c2, b2);
        a = math.add(p, r1);
        cat = layout.concat{axis=1}([a, r1]);
        mp = nn.max_pool{size=[2, 2], stride=[2, 2]}(cat);
        c = nn.conv{stride=[2, 2], padding=[1, 1, 1, 1]}(mp, c3);
        t = math.tanh(c);
        g = math.mean_reduce{axes=[2, 3], squeeze=true}(t);
        h = linalg.matmul(g, mm);
        output = nn.linear(h, fc, fcb);
        probs = nn.softmax{axes=[1]}(output);
    }
}
""")
np.save(root / "mix_calib.npy", rng.uniform(0, 1, (24, 3, 16, 16)).astype(np.float32))

text = (m / "main.sknd").read_text()
for name, edit in (("mixns", lambda t: t.replace(" probs: real[1, 10];", "")),
                   ("cvmmix", lambda t: t.replace(" probs: real[1, 10];", "").replace("nn.sigmoid(bn)", "nn.relu(bn)")
                    .replace("math.tanh(c)", "nn.relu(c)").replace("        h = linalg.matmul(g, mm);\n", "")
                    .replace("nn.linear(h, fc, fcb)", "nn.linear(g, fc, fcb)").replace(" mm: real[16, 16];", ""))):
    folder = root / name
    folder.mkdir(exist_ok=True)
    for dat in m.glob("*.dat"):
        (folder / dat.name).write_bytes(dat.read_bytes())
    body = re.sub(r"        probs = .*\n", "", edit(text)).replace("graph mix ", f"graph {name} ")
    (folder / "main.sknd").write_text(body)
