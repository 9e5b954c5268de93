import threading
import time

import numpy as np
import pytest

from kernels_lab.patterns import consumer as C

P = 96  # payload floats (small: each simulated request runs 256 Python threads)


@pytest.fixture
def weights(rng):
    return rng.standard_normal(P).astype(np.float32)


def test_many_requests_from_several_producers_are_each_answered_once(weights, rng):
    payloads = [rng.uniform(-1, 2, P).astype(np.float32) for _ in range(12)]
    answers: dict[int, list[float]] = {}
    lock = threading.Lock()

    def producer(chunk):
        for i in chunk:
            t = c.submit(payloads[i], timeout=30)
            value = c.result(t, timeout=30)
            with lock:
                answers.setdefault(i, []).append(value)

    with C.PersistentConsumer(weights, slots=4, idle_timeout_s=30) as c:
        threads = [threading.Thread(target=producer, args=(range(k, 12, 3),)) for k in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert not any(t.is_alive() for t in threads)
    assert sorted(answers) == list(range(12))
    for i, got in answers.items():
        assert len(got) == 1
        assert got[0] == pytest.approx(C.reference(payloads[i], weights), rel=1e-4, abs=1e-4)
    assert c.status()["served"] == 12 and c.status()["exit_codes"] == [C.EXIT_STOPPED] * c.blocks


def test_stop_drains_published_work(weights, rng):
    c = C.PersistentConsumer(weights, slots=4, idle_timeout_s=30).start()
    tickets = [c.submit(rng.standard_normal(P).astype(np.float32)) for _ in range(3)]
    assert c.stop(drain=True, timeout=30) == []
    assert all(np.isfinite(c.result(t, timeout=5)) for t in tickets)


def test_stop_without_drain_reports_what_was_not_served(weights, rng):
    c = C.PersistentConsumer(weights, slots=8, idle_timeout_s=30).start()
    tickets = [c.submit(rng.standard_normal(P).astype(np.float32)) for _ in range(6)]
    abandoned = c.stop(drain=False, timeout=30)
    for t in tickets:  # each is either answered or reported, never both, never silently lost
        if t.number in abandoned:
            with pytest.raises(C.ConsumerStopped, match="never answered"):
                c.result(t, timeout=1)
        else:
            assert np.isfinite(c.result(t, timeout=1))


def test_idle_budget_returns_control_with_a_clear_status(weights, rng):
    c = C.PersistentConsumer(weights, slots=2, idle_timeout_s=0.2).start()
    deadline = time.monotonic() + 30
    while not c.kernel_exited() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert c.kernel_exited() and c.status()["exit_codes"][0] == C.EXIT_IDLE_BUDGET
    with pytest.raises(C.ConsumerError, match="idle budget of 0.2 s ran out"):
        c.submit(rng.standard_normal(P).astype(np.float32))


def test_bad_input_and_misuse_are_clear_errors(weights, rng):
    c = C.PersistentConsumer(weights, slots=1, idle_timeout_s=30)
    with pytest.raises(C.ConsumerStopped, match="consumer is new"):
        c.submit(np.zeros(P, np.float32))
    c.start()
    with pytest.raises(ValueError, match="dtype float64"):
        c.submit(np.zeros(P))
    with pytest.raises(ValueError, match=r"shape \(5,\)"):
        c.submit(np.zeros(5, np.float32))
    first = c.submit(rng.standard_normal(P).astype(np.float32))
    with pytest.raises(C.QueueFull, match="queue full"):
        c.submit(rng.standard_normal(P).astype(np.float32), timeout=0.1)  # slot 0 not collected yet
    c.result(first, timeout=30)
    with pytest.raises(C.ConsumerError, match="already collected"):
        c.result(first, timeout=1)
    second = c.submit(rng.standard_normal(P).astype(np.float32), timeout=5)  # the refused ticket is reused
    assert second.number == 1
    c.result(second, timeout=30)
    c.stop()
    with pytest.raises(C.ConsumerStopped, match="submit\\(\\): the consumer is stopped"):
        c.submit(np.zeros(P, np.float32))
    with pytest.raises(C.ConsumerStopped, match="stop\\(\\): the consumer is stopped"):
        c.stop()
    with pytest.raises(ValueError, match="non-empty 1-D"):
        C.PersistentConsumer(np.zeros((2, 2), np.float32))


@pytest.mark.parametrize("size", [P, P + 3, 1029])  # 16-byte rows, a ragged tail, > 4 vectors per thread
def test_baseline_computes_the_same_job(size, rng):
    weights = rng.standard_normal(size).astype(np.float32)
    base = C.LaunchPerRequest(weights, batch=3)
    payloads = rng.standard_normal((3, size)).astype(np.float32)
    got = base(payloads)
    np.testing.assert_allclose(got, [C.reference(p, weights) for p in payloads], rtol=1e-4, atol=1e-4)


def test_ragged_payload_and_echo_mode(rng):
    w = rng.standard_normal(P + 1).astype(np.float32)
    with C.PersistentConsumer(w, slots=2, idle_timeout_s=30) as c:
        for _ in range(3):  # slots are reused: stale rows or marks would show
            p = rng.uniform(-2, 1, P + 1).astype(np.float32)
            t = c.submit(p, timeout=30)
            assert c.result(t, timeout=30) == pytest.approx(C.reference(p, w), rel=1e-4, abs=1e-4)
            assert c.gpu_span_ns(t) >= 0
    with C.PersistentConsumer(w, slots=2, idle_timeout_s=30, echo=True, poll="relaxed") as c:
        assert c.result(c.submit(rng.standard_normal(P + 1).astype(np.float32)), timeout=30) == 0.0
    with pytest.raises(ValueError, match="poll 'spin'"):
        C.PersistentConsumer(w, poll="spin")


def test_host_wait_sees_another_threads_write_and_is_bounded():
    from kernels_lab import hostwait
    words = np.zeros(3, np.int64)
    address = hostwait.word_address(words, 1)
    assert not hostwait.wait_for_mark(address, 5, spins=1000)  # bounded: returns False
    writer = threading.Timer(0.05, lambda: words.__setitem__(1, (5 << 32) | 123))
    writer.start()
    deadline = time.monotonic() + 10
    while not hostwait.wait_for_mark(address, 5) and time.monotonic() < deadline:
        pass
    assert words[1] & 0xFFFFFFFF == 123
    with pytest.raises(ValueError, match="int64"):
        hostwait.word_address(np.zeros(2, np.int32), 0)


@pytest.mark.gpu
@pytest.mark.parametrize("size,poll", [(1024, "acquire"), (4099, "acquire"), (1024, "relaxed"), (4099, "relaxed")])
def test_gpu_consumer_with_several_blocks(size, poll, rng):
    w = rng.standard_normal(size).astype(np.float32)
    with C.PersistentConsumer(w, slots=32, blocks=4, idle_timeout_s=10, poll=poll) as c:
        for _ in range(200):
            p = rng.standard_normal(size).astype(np.float32)
            assert c.result(c.submit(p), timeout=5) == pytest.approx(C.reference(p, w), rel=1e-4, abs=1e-3)
    assert c.status()["served"] == 200
