"""Round-robin arbiter of the DRAM port that N NPU cores share (hw/cores.py).

The port is granted per DMA instruction: a core's LOAD, STORE, LOADW or VRUN dispatches only
with its grant, and no core is granted while any core's DRAM unit is busy (so one transfer
owns the port from its dispatch to its last beat, and the shared bandwidth is the single
port's dram_bytes_per_cycle). Among the cores requesting in a free cycle the first after the
last one granted, in index order wrapping around, wins (`last` starts at N - 1: core 0 first).
A core that loses keeps requesting; it waits at most N - 1 transfers. The grant depends on
the requests, `busy` and the `last` register only (combinational, no path back to `req`).
"""
from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out


class RoundRobinArbiter(wiring.Component):
    def __init__(self, n: int):
        self.n = n
        super().__init__({"req": In(n), "busy": In(1), "grant": Out(n)})

    def elaborate(self, platform):
        m = Module()
        n = self.n
        last = Signal(range(max(n, 2)), init=n - 1)
        with m.Switch(last):
            for previous in range(n):
                with m.Case(previous):
                    taken = 0       # a requester earlier in this round-robin order
                    for step in range(1, n + 1):
                        k = (previous + step) % n
                        m.d.comb += self.grant[k].eq(self.req[k] & ~taken & ~self.busy)
                        taken = taken | self.req[k]
        for k in range(n):
            with m.If(self.grant[k]):
                m.d.sync += last.eq(k)
        return m
