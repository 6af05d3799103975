// qsim multi-core Verilator harness: N instruction streams and the one memory the cores share
// (hw/cores.py, top qsim_cores). Semantics are those of qsim/npu/harness.cpp (one core) with
// the memory of qsim/npu/cores/memory.py: cycle 0 is the first cycle after reset; reads return
// data one cycle after dram_re (past the end: zeros); a cycle's write lands before its read.
// Core k's result is the first cycle with idle<k> high and none of its instructions left;
// the run ends when every core has one, or returns -1 at max_cycles.
// CORES, PORT_BYTES and INSTR_BYTES come with -D; the per-core port table below is generated
// (qsim/npu/cores/verilator.py fills in the table), since Verilator names each port.
#include <cstdint>
#include <cstring>
#include "Vqsim_cores.h"
#include "verilated.h"

template <typename W>
static void set_wide(W& wide, const uint8_t* bytes, size_t n) {
    uint8_t* words = reinterpret_cast<uint8_t*>(wide.data());
    std::memset(words, 0, sizeof(wide));
    std::memcpy(words, bytes, n);  // x86-64 is little-endian: byte k is bits [8k, 8k+8)
}

using Payload = std::remove_reference<decltype(Vqsim_cores::instr0___05Fpayload)>::type;  // ports are references
struct CorePorts {
    CData* valid;
    CData* ready;
    Payload* payload;
    CData* idle;
    IData* base;
};

extern "C" int64_t qsim_cores_run(const uint8_t* instrs, const int64_t* counts, uint8_t* dram,
                                  int64_t dram_bytes, const int64_t* bases, int64_t max_cycles,
                                  int64_t* finish) {
    VerilatedContext context;
    Vqsim_cores top{&context};
    CorePorts ports[CORES] = {
        CORE_PORTS
    };
    const uint8_t* stream[CORES];
    int64_t index[CORES], left = CORES;
    for (int k = 0, offset = 0; k < CORES; k++) {
        stream[k] = instrs + offset * INSTR_BYTES;
        offset += counts[k];
        index[k] = 0;
        finish[k] = -1;
        *ports[k].base = static_cast<IData>(bases[k]);
    }
    uint8_t rdata[PORT_BYTES] = {0};
    top.clk = 0;
    top.rst = 1;
    for (int i = 0; i < 2; i++) {  // two reset cycles
        top.eval(); top.clk = 1; top.eval(); top.clk = 0;
    }
    top.rst = 0;
    top.eval();  // outputs depend only on registers: after each edge they hold the next cycle's values
    for (int64_t cycle = 0;; cycle++) {
        bool pending[CORES];
        for (int k = 0; k < CORES; k++) {
            pending[k] = index[k] < counts[k];
            if (!pending[k] && finish[k] < 0 && *ports[k].idle) { finish[k] = cycle; left--; }
        }
        if (left == 0) return cycle;
        if (cycle >= max_cycles) return -1;
        if (top.dram_we) {
            const int64_t waddr = top.dram_waddr;
            int64_t n = top.dram_wlen;
            if (waddr + n > dram_bytes) n = waddr < dram_bytes ? dram_bytes - waddr : 0;
            if (n > 0) std::memcpy(dram + waddr, reinterpret_cast<const uint8_t*>(top.dram_wdata.data()), n);
        }
        bool accepted[CORES];
        for (int k = 0; k < CORES; k++) {
            accepted[k] = pending[k] && *ports[k].ready;
            *ports[k].valid = pending[k];
            if (pending[k]) set_wide(*ports[k].payload, stream[k] + index[k] * INSTR_BYTES, INSTR_BYTES);
        }
        set_wide(top.dram_rdata, rdata, PORT_BYTES);
        std::memset(rdata, 0, PORT_BYTES);
        const int64_t addr = top.dram_addr;
        if (top.dram_re && addr < dram_bytes) {
            int64_t n = dram_bytes - addr < PORT_BYTES ? dram_bytes - addr : PORT_BYTES;
            std::memcpy(rdata, dram + addr, n);
        }
        for (int k = 0; k < CORES; k++) if (accepted[k]) index[k]++;
        top.clk = 1;
        top.eval();
        top.clk = 0;
        top.eval();
    }
}
