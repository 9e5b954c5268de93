from kernels_lab.profile.sweep import add_model, model_time_ms


def test_model_is_launch_bound_when_small_and_bandwidth_bound_when_large():
    ceiling = 4000.0  # GB/s
    # three kernels of 1 KB: each dependent launch waits for the host (c = 15 us)
    assert abs(model_time_ms([1000] * 3, ceiling, 0.004, 0.015) - (0.004 + 2 * 0.015)) < 1e-4
    # three kernels of 4 GB: 1 ms each, the launches hide behind them
    big = model_time_ms([4_000_000_000] * 3, ceiling, 0.004, 0.015)
    assert abs(big - 3 * 1.004) < 1e-6


def test_add_model_recovers_the_costs_that_made_the_data():
    ceiling = 4000.0
    recs = []
    for n in (1 << 10, 1 << 16, 1 << 22, 1 << 26):
        for kb in ([12 * n], [12 * n, 8 * n, 8 * n]):
            t = model_time_ms(kb, ceiling, 0.003, 0.020)
            recs.append({"time_ms": t, "kernel_bytes": kb})
    add_model(recs, ceiling)
    assert abs(recs[0]["model_fixed_kernel_us"] - 3.0) < 0.3 and abs(recs[0]["model_launch_us"] - 20.0) < 0.6
    assert all(abs(r["model_error"]) < 0.02 for r in recs)


def test_rotation_needs_copies_only_when_the_data_fits_in_l2(monkeypatch):
    from kernels_lab.profile import measure
    from kernels_lab.runtime import DeviceFacts
    facts = DeviceFacts("gpu", "test", (9, 0), 132, 60 << 20, 1 << 37)
    monkeypatch.setattr(measure, "device_facts", lambda: facts)
    assert measure.rotation_copies(1 << 30) == 1
    assert measure.rotation_copies(30 << 20) == 4
    assert measure.rotation_copies(1 << 10) == 8
    calls = []
    turn = measure.rotating([lambda: calls.append(0), lambda: calls.append(1)])
    for _ in range(3):
        turn()
    assert calls == [0, 1, 0]


def test_a_size_the_device_cannot_hold_says_how_much_it_needs(monkeypatch):
    import pytest

    from kernels_lab import get_workload
    from kernels_lab.profile import measure
    monkeypatch.setattr(measure.BACKEND, "free_memory", lambda: 1 << 30)
    w = get_workload("elementwise")
    with pytest.raises(measure.MeasurementError, match=r"needs about 5\.5 GiB .* 1\.0 GiB are free"):
        measure.check_fits(w, list(w.variants.values()), w.size(1 << 28))


def test_few_bytes_in_flight_bound_the_bandwidth_by_littles_law():
    ceiling, latency = 4000.0, 0.0006  # GB/s, ms (600 ns)
    big = 4_000_000_000
    at_ceiling = model_time_ms([big], ceiling, 0.003, 0.02, latency, in_flight=[100_000_000])
    starved = model_time_ms([big], ceiling, 0.003, 0.02, latency, in_flight=[1_000_000])
    assert abs(at_ceiling - (0.003 + latency + big / 4e9)) < 1e-9  # enough in flight: the ceiling
    # 1 MB in flight per 600 ns round trip is 1.67 TB/s, well under the ceiling
    assert abs(starved - (0.003 + latency + latency * (big / 1_000_000 - 1))) < 1e-9
    assert model_time_ms([big], ceiling, 0.003, 0.02, latency, in_flight=[0]) == at_ceiling  # 0: undeclared


def test_the_fit_finds_the_latency_that_made_the_data():
    ceiling = 4000.0
    recs = []
    for n in (1 << 12, 1 << 18, 1 << 22, 1 << 26):
        for kb, fl in (([12 * n], [min(n, 1 << 18) * 8]), ([12 * n], [min(n // 4, 1 << 18) * 32])):
            recs.append({"time_ms": model_time_ms(kb, ceiling, 0.003, 0.020, 0.0007, fl),
                         "kernel_bytes": kb, "kernel_bytes_in_flight": fl})
    add_model(recs, ceiling)
    assert abs(recs[0]["model_latency_ns"] - 700) <= 50 and abs(recs[0]["model_fixed_kernel_us"] - 3.0) < 0.3
    assert all(abs(r["model_error"]) < 0.03 for r in recs)


def test_plans_declare_bytes_in_flight_per_thread():
    from kernels_lab import get_workload
    w = get_workload("elementwise")
    naive = w.variant("fused_naive").plan(w.size(1 << 20)).launches[0]
    fused = w.variant("fused").plan(w.size(1 << 20)).launches[0]
    assert naive.read_bytes_in_flight == 8 and fused.read_bytes_in_flight == 32  # 4-byte vs 16-byte loads
    assert fused.device_bytes_in_flight(1 << 30) == 8 * (1 << 20)  # every load of the kernel at once
    assert naive.device_bytes_in_flight(270_336) == 270_336 * 8     # bounded by the resident threads


def test_the_copy_ceilings_kernel_copies_every_element_at_sizes_that_are_not_multiples_of_four():
    import numpy as np

    from kernels_lab.arrays import poisoned
    from kernels_lab.profile.ceiling import BLOCK, copy_kernel
    from kernels_lab.runtime import cuda
    rng = np.random.default_rng()
    for n in (1, 4, 7, BLOCK * 4 + 3):
        src = rng.standard_normal(n).astype(np.float32)
        dst = poisoned({"dst": ((n,), np.float32)})["dst"]
        copy_kernel[(n // 4 + BLOCK) // BLOCK, BLOCK](cuda.to_device(src), dst)
        assert np.array_equal(dst.copy_to_host(), src), n
