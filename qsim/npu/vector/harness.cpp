// qsim vector unit Verilator harness: one instruction per call, the same cycle protocol as
// tests/hw/vector_bench.py (Amaranth) and qsim/npu/vector/model.py.
//
// Built into a shared library with the verilated qsim_vector (verilator.py). The unit
// is created and reset on the first call and kept between calls (its table memories persist,
// like the RTL's). Per call: cycle 0 offers and must accept the instruction; from cycle 1 the
// beats are offered while source_valid[t-1] (1 past the pattern's end) and results taken
// while sink_ready[t-1]; the call returns the first cycle with all beats accepted and `busy`
// low, or -1 after max_cycles. Outputs: results (OUT_BYTES each), their cycles, the beats'
// accept cycles, and the number of results through *n_results.
#include <cstdint>
#include <cstring>
#include "Vqsim_vector.h"
#include "verilated.h"

// Amaranth names stream members cfg__valid etc.; Verilator escapes "__" as "___05F".
template <std::size_t N>
static void set_bits(VlWide<N>& wide, const uint8_t* bytes, size_t n) {
    std::memset(wide.data(), 0, sizeof(wide));
    std::memcpy(wide.data(), bytes, n);      // x86-64 is little-endian: byte k is bits [8k, 8k+8)
}
template <typename T>
static void set_bits(T& word, const uint8_t* bytes, size_t n) {
    word = 0;
    std::memcpy(&word, bytes, n < sizeof(T) ? n : sizeof(T));
}
template <std::size_t N>
static void get_bits(const VlWide<N>& wide, uint8_t* bytes, size_t n) {
    std::memcpy(bytes, wide.data(), n);
}
template <typename T>
static void get_bits(const T& word, uint8_t* bytes, size_t n) {
    std::memcpy(bytes, &word, n < sizeof(T) ? n : sizeof(T));
}

static VerilatedContext* context = nullptr;
static Vqsim_vector* top = nullptr;

static void tick() {
    top->clk = 1; top->eval(); top->clk = 0; top->eval();
}

static void ensure_top() {
    if (top) return;
    context = new VerilatedContext;
    top = new Vqsim_vector{context};
    top->clk = 0; top->rst = 1;
    for (int i = 0; i < 2; i++) tick();
    top->rst = 0;
    top->eval();
}

static bool on(const uint8_t* pattern, int64_t length, int64_t t) {
    return t - 1 >= length || pattern[t - 1] != 0;
}

extern "C" int64_t qsim_vector_run(const uint8_t* cfg, const uint8_t* beats, int64_t n,
                                   const uint8_t* source_valid, const uint8_t* sink_ready,
                                   int64_t pattern_length, uint8_t* results, int64_t* result_cycles,
                                   int64_t* accept_cycles, int64_t* n_results, int64_t max_cycles) {
    ensure_top();
    set_bits(top->cfg___05Fpayload, cfg, CFG_BYTES);
    top->cfg___05Fvalid = 1;
    top->i___05Fvalid = 0;
    top->o___05Fready = 0;
    top->eval();
    if (!top->cfg___05Fready) return -2;     // the unit must be idle between calls
    tick();
    top->cfg___05Fvalid = 0;
    int64_t k = 0, r = 0;
    for (int64_t t = 1;; t++) {
        if (k == n && !top->busy) { *n_results = r; return t; }
        if (t >= max_cycles) { *n_results = r; return -1; }
        const bool offer = k < n && on(source_valid, pattern_length, t);
        const bool ready = on(sink_ready, pattern_length, t);
        top->i___05Fvalid = offer;
        if (offer) set_bits(top->i___05Fpayload, beats + k * BEAT_BYTES, BEAT_BYTES);
        top->o___05Fready = ready;
        top->eval();
        if (top->o___05Fvalid && ready) {
            get_bits(top->o___05Fpayload, results + r * OUT_BYTES, OUT_BYTES);
            result_cycles[r++] = t;
        }
        if (offer && top->i___05Fready) accept_cycles[k++] = t;
        tick();
    }
}
