// qsim NPU Verilator harness: the cycle loop, the instruction stream and the modelled DRAM.
//
// Built into a shared library together with the verilated qsim_npu (see sim_verilator.py);
// PORT_BYTES and INSTR_BYTES are passed with -D. Semantics match qsim/npu/sim_amaranth.py:
// cycle 0 is the first cycle after reset; DRAM reads return data one cycle after dram_re, writes go to dram_waddr
// (reads past the end return zeros); with DRAM timing (qsim/npu/dram/timing.py: params = trcd, trp,
// tcl, banks, row_bytes) a request that misses its bank's open row holds dram_stall high for its
// cost, during which nothing is served, no instruction accepted and dram_rdata kept; the result is the first cycle with `idle` high and
// no instruction left, or -1 if max_cycles is reached first.
// A build with Verilator's --trace (VM_TRACE) also exports qsim_npu_run_vcd, which writes
// a VCD of the cycles [vcd_from, vcd_to]: two samples per cycle, at 10*cycle (inputs of the
// cycle applied, before the rising edge) and 10*cycle + 5 (after it).
#include <cstdint>
#include <cstring>
#include <vector>
#include "Vqsim_npu.h"
#include "verilated.h"
#if VM_TRACE
#include "verilated_vcd_c.h"
#else
class VerilatedVcdC;
#endif
// Amaranth names stream members instr__valid etc.; Verilator escapes "__" as "___05F".

template <typename W>
static void set_wide(W& wide, const uint8_t* bytes, size_t n) {
    uint8_t* words = reinterpret_cast<uint8_t*>(wide.data());
    std::memset(words, 0, sizeof(wide));
    std::memcpy(words, bytes, n);  // x86-64 is little-endian: byte k is bits [8k, 8k+8)
}

// The open row of every bank (qsim/npu/dram/timing.py RowBuffers): the cost of one request.
struct RowBuffers {
    int64_t trcd, trp, tcl, banks, row_bytes;
    std::vector<int64_t> open;
    explicit RowBuffers(const int64_t* p)
        : trcd(p[0]), trp(p[1]), tcl(p[2]), banks(p[3]), row_bytes(p[4]), open(p[3], -1) {}
    int64_t cost(int64_t addr) {
        const int64_t bank = (addr / row_bytes) % banks, row = addr / (row_bytes * banks);
        const int64_t was = open[bank];
        open[bank] = row;
        return was == row ? 0 : was < 0 ? trcd + tcl : trp + trcd + tcl;
    }
};

static int64_t run(VerilatedContext& context, Vqsim_npu& top, const uint8_t* instrs,
                   int64_t n_instr, uint8_t* dram, int64_t dram_bytes, int64_t max_cycles,
                   VerilatedVcdC* vcd, int64_t vcd_from, int64_t vcd_to,
                   const int64_t* dram_params = nullptr) {
    uint8_t rdata[PORT_BYTES] = {0};
    std::vector<RowBuffers> rows;
    if (dram_params) rows.emplace_back(dram_params);
    int64_t owed = 0;
    bool charged = false;
    top.dram_stall = 0;
    top.clk = 0;
    top.rst = 1;
    for (int i = 0; i < 2; i++) {  // two reset cycles
        top.eval(); top.clk = 1; top.eval(); top.clk = 0;
    }
    top.rst = 0;
    int64_t index = 0;
    // Outputs depend only on registers (no combinational path from the inputs), so after
    // each clock edge they already hold the next cycle's values: one edge per cycle.
    top.eval();
    for (int64_t cycle = 0;; cycle++) {
        bool pending = index < n_instr;
        if (!pending && top.idle) return cycle;
        if (cycle >= max_cycles) return -1;
        const int64_t addr = top.dram_addr;
        if (!rows.empty() && !charged && (top.dram_we || top.dram_re)) {
            // the write of a cycle before its read, as they are served
            owed = (top.dram_we ? rows[0].cost(top.dram_waddr) : 0) + (top.dram_re ? rows[0].cost(addr) : 0);
            charged = true;
        }
        if (owed > 0) {  // a stalled cycle: the NPU stands still, the inputs stay as they are
            owed--;
            top.dram_stall = 1;
            top.clk = 1; top.eval(); top.clk = 0; top.eval();
            continue;
        }
        charged = false;
        top.dram_stall = 0;
        if (top.dram_we) {  // the write channel; lands before this cycle's read
            const int64_t waddr = top.dram_waddr;
            int64_t n = top.dram_wlen;
            if (waddr + n > dram_bytes) n = waddr < dram_bytes ? dram_bytes - waddr : 0;
            if (n > 0) std::memcpy(dram + waddr, reinterpret_cast<const uint8_t*>(top.dram_wdata.data()), n);
        }
        const bool accepted = pending && top.instr___05Fready;
        // Inputs of this cycle: the instruction stream and last cycle's DRAM read data.
        top.instr___05Fvalid = pending;
        if (pending) set_wide(top.instr___05Fpayload, instrs + index * INSTR_BYTES, INSTR_BYTES);
        set_wide(top.dram_rdata, rdata, PORT_BYTES);
        std::memset(rdata, 0, PORT_BYTES);
        if (top.dram_re && addr < dram_bytes) {
            int64_t n = dram_bytes - addr < PORT_BYTES ? dram_bytes - addr : PORT_BYTES;
            std::memcpy(rdata, dram + addr, n);
        }
        if (accepted) index++;
#if VM_TRACE
        const bool dump = vcd && cycle >= vcd_from && cycle <= vcd_to;
        if (dump) { top.eval(); vcd->dump(static_cast<uint64_t>(10 * cycle)); }
#endif
        top.clk = 1;
        top.eval();
#if VM_TRACE
        if (dump) vcd->dump(static_cast<uint64_t>(10 * cycle + 5));
#endif
        top.clk = 0;
        top.eval();
    }
}

extern "C" {

int64_t qsim_npu_run(const uint8_t* instrs, int64_t n_instr, uint8_t* dram, int64_t dram_bytes,
                     int64_t max_cycles) {
    VerilatedContext context;
    Vqsim_npu top{&context};
    return run(context, top, instrs, n_instr, dram, dram_bytes, max_cycles, nullptr, 0, -1);
}

int64_t qsim_npu_run_dram(const uint8_t* instrs, int64_t n_instr, uint8_t* dram, int64_t dram_bytes,
                          int64_t max_cycles, const int64_t* dram_params) {
    VerilatedContext context;
    Vqsim_npu top{&context};
    return run(context, top, instrs, n_instr, dram, dram_bytes, max_cycles, nullptr, 0, -1, dram_params);
}

#if VM_TRACE
int64_t qsim_npu_run_vcd(const uint8_t* instrs, int64_t n_instr, uint8_t* dram, int64_t dram_bytes,
                         int64_t max_cycles, const char* vcd_path, int64_t vcd_from, int64_t vcd_to) {
    VerilatedContext context;
    context.traceEverOn(true);
    Vqsim_npu top{&context};
    VerilatedVcdC vcd;
    top.trace(&vcd, 99);
    vcd.open(vcd_path);
    const int64_t cycles = run(context, top, instrs, n_instr, dram, dram_bytes, max_cycles, &vcd,
                               vcd_from, vcd_to);
    vcd.close();
    return cycles;
}
#endif

}
