"""The machine's float32 peak: derived from the CPU's description, and measured with a matmul.

Derived peak (FLOP/s) = physical cores x FMA units per core x float32 lanes per FMA unit
x 2 FLOPs per FMA x clock (Hz):

- physical cores: distinct (physical id, core id) pairs of /proc/cpuinfo (SMT siblings share
  their core's FMA units);
- FMA units per core and their width: not exposed by Linux, so taken from a table of the
  microarchitectures we meet, identified by vendor, family and model (`MICROARCHITECTURES`), with
  a fallback on the ISA flags (printed as an assumption). Zen 4 executes AVX-512 on 256-bit
  pipes (two passes), so its lanes per unit are 8, not 16;
- clock: /sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq (what `lscpu` prints as max MHz)
  when the kernel exposes it, else `cpu MHz` of /proc/cpuinfo (in a VM usually the nominal
  TSC clock: the cores may run faster under boost, which the measured peak then shows).

Measured peak: a large float32 `tf.matmul` (oneDNN) in a fresh process with 1 and with N
intra-op threads, best of several calls (the achievable peak; on a shared machine the best call
is the one least disturbed). The learner update's achieved FLOP/s (`impala_tf.benchmark.flops`)
is reported against both (paper section 5.1 reports throughput only; this says how far the
update is from what the hardware allows).
"""

from __future__ import annotations

import dataclasses
import json
import os
import statistics
import tempfile
import time
from typing import Any

# (vendor, family) -> [(first model, last model, name, FMA units per core, bits per FMA unit)].
MICROARCHITECTURES: dict[tuple[str, int], list[tuple[int, int, str, int, int]]] = {
    ("AuthenticAMD", 0x17): [
        (0x00, 0x2F, "AMD Zen/Zen+", 2, 128),
        (0x30, 0xFF, "AMD Zen 2", 2, 256),
    ],
    ("AuthenticAMD", 0x19): [
        (0x00, 0x0F, "AMD Zen 3", 2, 256),
        (0x10, 0x1F, "AMD Zen 4", 2, 256),  # AVX-512 double-pumped on 256-bit pipes.
        (0x20, 0x5F, "AMD Zen 3", 2, 256),
        (0x60, 0xAF, "AMD Zen 4", 2, 256),
    ],
    ("AuthenticAMD", 0x1A): [(0x00, 0xFF, "AMD Zen 5", 2, 512)],
    ("GenuineIntel", 6): [
        # Gold 6xxx / Platinum have two 512-bit FMA units; Silver, Bronze and some Gold 5xxx one.
        (0x55, 0x55, "Intel Skylake-SP/Cascade Lake", 2, 512),
        (0x6A, 0x6C, "Intel Ice Lake-SP", 2, 512),
        (0x8F, 0x8F, "Intel Sapphire Rapids", 2, 512),
        (0xCF, 0xCF, "Intel Emerald Rapids", 2, 512),
    ],
}


BFLOAT16_FLAGS = frozenset({"avx512_bf16", "amx_bf16"})
# The ISA flags printed beside the peak (the float32 and bfloat16 dot-product extensions).
ISA_FLAGS = frozenset({"avx2", "fma", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile"})


@dataclasses.dataclass(frozen=True)
class CpuInfo:
    """What /proc/cpuinfo says about the CPUs (the first processor's fields)."""

    vendor: str
    family: int
    model: int
    model_name: str
    flags: frozenset[str]
    mhz: float
    physical_cores: int
    logical_cpus: int


def parse_cpuinfo(text: str) -> CpuInfo:
    """Parses the text of /proc/cpuinfo."""
    processors = [block for block in text.split("\n\n") if block.strip()]
    fields = []
    for block in processors:
        entry = {}
        for line in block.splitlines():
            if ":" in line:
                key, value = line.split(":", 1)
                entry[key.strip()] = value.strip()
        fields.append(entry)
    first = fields[0]
    cores = {(f.get("physical id", "0"), f.get("core id", str(i))) for i, f in enumerate(fields)}
    return CpuInfo(
        vendor=first.get("vendor_id", ""),
        family=int(first.get("cpu family", "0")),
        model=int(first.get("model", "0")),
        model_name=first.get("model name", ""),
        flags=frozenset(first.get("flags", "").split()),
        mhz=float(first.get("cpu MHz", "0") or 0),
        physical_cores=len(cores),
        logical_cpus=len(fields),
    )


def read_cpuinfo(path: str = "/proc/cpuinfo") -> CpuInfo:
    with open(path) as f:
        return parse_cpuinfo(f.read())


def max_mhz(path: str = "/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq") -> float | None:
    """The kernel's maximum clock (`lscpu`'s max MHz), or None when not exposed (many VMs)."""
    try:
        with open(path) as f:
            return int(f.read().strip()) / 1000.0
    except (OSError, ValueError):
        return None


def microarchitecture(info: CpuInfo) -> tuple[str, int, int, str]:
    """`(name, FMA units per core, bits per FMA unit, how it was decided)` for the CPU."""
    for first, last, name, units, bits in MICROARCHITECTURES.get((info.vendor, info.family), []):
        if first <= info.model <= last:
            source = f"table: {info.vendor} family {info.family:#x} model {info.model:#x}"
            return name, units, bits, source
    if "avx512f" in info.flags:
        return "unknown (avx512f)", 2, 512, "assumed from flags: avx512f -> 2 x 512-bit FMA"
    if "avx2" in info.flags and "fma" in info.flags:
        return "unknown (avx2, fma)", 2, 256, "assumed from flags: avx2+fma -> 2 x 256-bit FMA"
    return "unknown", 1, 128, "assumed: 1 x 128-bit unit (no avx2/fma flag)"


def derived_peak(info: CpuInfo, max_clock_mhz: float | None = None) -> dict[str, Any]:
    """The float32 peak from the CPU's description (see the module docstring for each factor)."""
    name, units, bits, source = microarchitecture(info)
    lanes = bits // 32
    if max_clock_mhz:
        mhz, clock_source = max_clock_mhz, "cpufreq cpuinfo_max_freq (lscpu max MHz)"
    else:
        mhz, clock_source = info.mhz, "/proc/cpuinfo cpu MHz (nominal; boost not seen)"
    flops_per_cycle = units * lanes * 2
    return {
        "cpu_model": info.model_name,
        "microarchitecture": name,
        "microarchitecture_source": source,
        "isa_flags": sorted(info.flags & ISA_FLAGS),
        "physical_cores": info.physical_cores,
        "fma_units_per_core": units,
        "fp32_lanes_per_fma_unit": lanes,
        "flops_per_cycle_per_core": flops_per_cycle,
        "clock_ghz": mhz / 1000.0,
        "clock_source": clock_source,
        "peak_flops_per_core": flops_per_cycle * mhz * 1e6,
        "peak_flops": info.physical_cores * flops_per_cycle * mhz * 1e6,
    }


def format_derivation(d: dict[str, Any]) -> str:
    """One line: the formula with this machine's factors."""
    return (
        f"derived fp32 peak = {d['physical_cores']} cores x {d['fma_units_per_core']} FMA units x "
        f"{d['fp32_lanes_per_fma_unit']} lanes x 2 FLOPs x {d['clock_ghz']:.3f} GHz = "
        f"{d['peak_flops'] / 1e9:.1f} GFLOP/s ({d['microarchitecture']}; "
        f"{d['microarchitecture_source']}; clock: {d['clock_source']}; {d['cpu_model']}; "
        f"flags: {' '.join(d['isa_flags'])})"
    )


# --------------------------------------------------------------------------------------------
# The measured peak, in fresh processes (TF's thread counts are fixed once it starts).


def matmul_rates(threads: int, size: int, calls: int, dtype: str = "float32") -> list[float]:
    """FLOP/s of `calls` `[size, size] x [size, size]` matmuls in `dtype` on `threads` TF threads.

    Must run in a process whose TF runtime has not started yet (it sets the thread counts).
    """
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    a = tf.cast(tf.random.normal([size, size], seed=1), dtype)
    b = tf.cast(tf.random.normal([size, size], seed=2), dtype)
    # Only a corner of the product leaves the matmul: the reduction costs nothing.
    product = tf.function(lambda: tf.reduce_sum(tf.cast(tf.matmul(a, b)[:1, :1], tf.float32)))
    product().numpy()
    rates = []
    for _ in range(calls):
        start = time.perf_counter()
        product().numpy()
        rates.append(2.0 * size**3 / (time.perf_counter() - start))
    return rates


def matmul_main(spec: dict[str, Any]) -> int:
    """Child (`role="matmul_peak"`): writes `matmul_rates` to `spec["output"]` as JSON."""
    rates = matmul_rates(spec["threads"], spec["size"], spec["calls"], spec["dtype"])
    with open(spec["output"], "w") as f:
        json.dump(rates, f)
    return 0


def measure_matmul_peak(
    threads: int, size: int, calls: int, dtype: str = "float32", timeout: float = 600.0
) -> dict:
    """`matmul_rates` in a fresh process: best and median FLOP/s."""
    from impala_tf.benchmark import process

    with tempfile.TemporaryDirectory(prefix="impala_bench_peak_") as tmp:
        output = os.path.join(tmp, "rates.json")
        spec = dict(
            role="matmul_peak", threads=threads, size=size, calls=calls, dtype=dtype, output=output
        )
        child = process.spawn(spec, os.path.join(tmp, "log"))
        try:
            code = child.wait(timeout)
        finally:
            process.stop_children([child])
        if code != 0:
            raise RuntimeError(f"matmul peak child failed (exit {code})")
        with open(output) as f:
            rates = json.load(f)
    return {
        "threads": threads,
        "dtype": dtype,
        "matmul_size": size,
        "calls": calls,
        "best_flops": max(rates),
        "median_flops": statistics.median(rates),
    }


def machine_peak(size: int = 4096, calls: int = 8) -> dict[str, Any]:
    """The derived peak and the measured matmul peak with 1 and with all CPUs' threads."""
    info = read_cpuinfo()
    derived = derived_peak(info, max_mhz())
    cpus = len(os.sched_getaffinity(0))
    threads = sorted({1, cpus})
    measured = [measure_matmul_peak(t, size, calls) for t in threads]
    per_cycle = derived["flops_per_cycle_per_core"]
    # With bfloat16 dot products (avx512_bf16: 2 products per float32 lane; AMX), the opt-in
    # bfloat16 torso has its own peak.
    bfloat16 = []
    if info.flags & BFLOAT16_FLAGS:
        bfloat16 = [measure_matmul_peak(t, size, calls, "bfloat16") for t in threads]
    return {
        "derived": derived,
        "measured": measured,
        "measured_bfloat16": bfloat16,
        # The clock the one-thread matmul implies if it ran at the derived FLOPs per cycle.
        "implied_clock_ghz": measured[0]["best_flops"] / per_cycle / 1e9,
        "cpus": cpus,
    }


def format_peak(peak: dict[str, Any]) -> list[str]:
    """The derivation line and one line per measured thread count."""
    lines = [format_derivation(peak["derived"])]
    for m in peak["measured"] + peak.get("measured_bfloat16", []):
        lines.append(
            f"measured {m.get('dtype', 'float32')} matmul {m['matmul_size']}^2, "
            f"{m['threads']} thread(s): best {m['best_flops'] / 1e9:.1f} GFLOP/s, "
            f"median {m['median_flops'] / 1e9:.1f} ({m['calls']} calls)"
        )
    lines.append(
        f"the 1-thread float32 matmul implies a clock >= {peak['implied_clock_ghz']:.2f} GHz at "
        f"{peak['derived']['flops_per_cycle_per_core']} FLOPs/cycle"
    )
    return lines
