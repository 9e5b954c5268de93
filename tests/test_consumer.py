import threading
import time

import numpy as np
import pytest

from kernels_lab.topics import consumer as C

P = 96  # payload floats (small: each simulated request runs 256 Python threads)
N_MANY = 6  # requests from several producers (each costs ~1 s on the simulator)


@pytest.fixture
def weights(rng):
    return rng.standard_normal(P).astype(np.float32)


def test_many_requests_from_several_producers_are_each_answered_once(weights, rng):
    # 3 producers, 2 requests each, through 2 slots: each slot serves 3 tickets (reused twice), as 12 did in 4
    payloads = [rng.uniform(-1, 2, P).astype(np.float32) for _ in range(N_MANY)]
    answers: dict[int, list[float]] = {}
    lock = threading.Lock()

    def producer(chunk):
        for i in chunk:
            t = c.submit(payloads[i], timeout=30)
            value = c.result(t, timeout=30)
            with lock:
                answers.setdefault(i, []).append(value)

    with C.PersistentConsumer(weights, slots=2, idle_timeout_s=30) as c:
        threads = [threading.Thread(target=producer, args=(range(k, N_MANY, 3),)) for k in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert not any(t.is_alive() for t in threads)
    assert sorted(answers) == list(range(N_MANY))
    for i, got in answers.items():
        assert len(got) == 1
        assert got[0] == pytest.approx(C.reference(payloads[i], weights), rel=1e-4, abs=1e-4)
    assert c.status()["served"] == N_MANY and c.status()["exit_codes"] == [C.EXIT_STOPPED] * c.blocks


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
    with pytest.raises(C.ConsumerStopped, match="consumer is new"):
        c.request(np.zeros(P, np.float32))
    c.start()
    with pytest.raises(ValueError, match="dtype float64"):
        c.submit(np.zeros(P))
    with pytest.raises(ValueError, match=r"shape \(5,\)"):
        c.submit(np.zeros(5, np.float32))
    with pytest.raises(ValueError, match="dtype float64"):  # request()'s compiled path refuses them too
        c.request(np.zeros(P))
    with pytest.raises(ValueError, match=r"shape \(5,\)"):
        c.request(np.zeros(5, np.float32))
    assert c.last_ticket == -1  # nothing was reserved
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


@pytest.mark.parametrize("protocol,hot_us", [("ll", 1e6), ("ll", 0.0), ("seq", 100.0), ("seq-relaxed", 100.0)])
def test_every_protocol_with_ragged_payloads_and_reused_slots(protocol, hot_us, rng):
    # ll with hot_us=0 takes every request through the cold probe first; 1e6 polls hot throughout
    w = rng.standard_normal(P + 1).astype(np.float32)
    with C.PersistentConsumer(w, slots=2, idle_timeout_s=30, protocol=protocol, hot_us=hot_us) as c:
        for k in range(4):  # slots are reused: stale rows or marks would show
            p = rng.uniform(-2, 1, P + 1).astype(np.float32)
            if k % 2:
                got = c.request(p[::-1].copy()[::-1], timeout=30)  # a strided view: copied, same answer
            else:
                got = c.result(c.submit(p, timeout=30), timeout=30)
            assert got == pytest.approx(C.reference(p, w), rel=1e-4, abs=1e-4)
            assert c.gpu_span_ns(k) >= 0
    assert c.status()["served"] == 4


def test_ll_waits_for_every_word_of_the_row(rng):
    """A row with one word still carrying an old mark is not taken; when the word arrives it is."""
    from kernels_lab.topics.consumer.hostpath import publish_marked, reserve
    w = rng.standard_normal(P).astype(np.float32)
    p = rng.standard_normal(P).astype(np.float32)
    with C.PersistentConsumer(w, slots=1, idle_timeout_s=30, protocol="ll", hot_us=1e6) as c:
        t = reserve(c._book)  # ticket 0 by hand: publish all of its row but one word
        publish_marked(c._words, 0, p, t + 1)
        c._words[P // 2] = np.int64(7) << 32  # a word whose mark is not ticket 0's
        time.sleep(1.0)
        assert c._answer[0] >> 32 == 0 and c.status()["served"] == 0
        publish_marked(c._words, 0, p, t + 1)
        assert c.result(C.Ticket(t, 0), timeout=30) == pytest.approx(C.reference(p, w), rel=1e-4, abs=1e-4)


def test_echo_mode_and_protocol_choice(rng):
    w = rng.standard_normal(P).astype(np.float32)
    for protocol in ("ll", "seq"):
        with C.PersistentConsumer(w, slots=2, idle_timeout_s=30, echo=True, protocol=protocol) as c:
            assert c.request(rng.standard_normal(P).astype(np.float32), timeout=30) == 0.0
    assert C.default_protocol(1024) == "ll" and C.default_protocol(C.LL_MAX_BYTES + 4) == "seq"
    assert C.PersistentConsumer(w).protocol == C.default_protocol(4 * P)
    with pytest.raises(ValueError, match="protocol 'spin'"):
        C.PersistentConsumer(w, protocol="spin")


def test_a_full_queue_reserves_nothing_so_no_ticket_is_handed_out_twice(weights, rng):
    payloads = rng.standard_normal((4, P)).astype(np.float32)
    with C.PersistentConsumer(weights, slots=2, idle_timeout_s=30) as c:
        t0, t1 = c.submit(payloads[0]), c.submit(payloads[1])
        assert c.result(t1, timeout=30) == pytest.approx(C.reference(payloads[1], weights), rel=1e-4, abs=1e-4)
        # ticket 2 needs slot 0 (ticket 0 not collected): two producers wait for it, neither gets
        # ticket 3 meanwhile, and both give up without using a ticket
        errors = []

        def impatient():
            try:
                c.submit(payloads[2], timeout=0.3)
            except C.QueueFull as e:
                errors.append(e)
        waiters = [threading.Thread(target=impatient) for _ in range(2)]
        for w in waiters:
            w.start()
        for w in waiters:
            w.join(30)
        assert len(errors) == 2 and "slot 0 still holds ticket 0" in str(errors[0]) and c.last_ticket == 1
        c.result(t0, timeout=30)
        t2, t3 = c.submit(payloads[2]), c.submit(payloads[3])
        assert (t2.number, t3.number) == (2, 3)
        for t, p in ((t2, payloads[2]), (t3, payloads[3])):
            assert c.result(t, timeout=30) == pytest.approx(C.reference(p, weights), rel=1e-4, abs=1e-4)


def test_the_ticket_book_hands_each_ticket_out_once_under_contention():
    from kernels_lab.topics.consumer import hostpath as H
    book, slots, per_thread = H.new_book(8, 1), 8, 20000
    taken = [[] for _ in range(4)]

    def producer(k):  # reserve and collect as fast as possible, from four threads without the GIL
        while len(taken[k]) < per_thread:
            t = H.reserve(book)
            if t >= 0:
                taken[k].append(t)
                assert H.collect(book, t) and not H.collect(book, t)  # once, never twice
    threads = [threading.Thread(target=producer, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    every = sorted(t for ts in taken for t in ts)
    assert every == list(range(4 * per_thread))
    assert H.close(book) == 4 * per_thread and H.reserve(book) == H.STOPPED
    assert H.reserve(H.new_book(slots, 1)) == 0


def test_host_wait_sees_another_threads_write_and_is_bounded():
    from kernels_lab.topics.consumer import hostpath
    words = np.zeros(3, np.int64)
    address = hostpath.word_address(words, 1)
    assert not hostpath.wait_for_mark(address, 5, spins=1000)  # bounded: returns False
    writer = threading.Timer(0.05, lambda: words.__setitem__(1, (5 << 32) | 123))
    writer.start()
    deadline = time.monotonic() + 10
    while not hostpath.wait_for_mark(address, 5) and time.monotonic() < deadline:
        pass
    assert words[1] & 0xFFFFFFFF == 123
    with pytest.raises(ValueError, match="int64"):
        hostpath.word_address(np.zeros(2, np.float32), 0)


def test_host_publishing_writes_what_each_protocol_reads(rng):
    from kernels_lab.topics.consumer import hostpath
    data = rng.standard_normal(5).astype(np.float32)
    words = np.full(8, -1, np.int64)
    hostpath.publish_marked(words, 1, data, 9)
    assert (words[1:7] >> 32 == 9).all() and words[0] == -1 and words[7] == -1  # 6 words: one line of padding
    np.testing.assert_array_equal(words[1:6].astype(np.uint64).astype(np.uint32).view(np.float32), data)
    assert words[6] & 0xFFFFFFFF == 0  # the padding word's value: 0.0
    rows, seq = np.zeros(8, np.float32), np.zeros(2, np.int32)
    hostpath.publish_row(rows, 2, data, hostpath.word_address(seq, 1), 4)
    np.testing.assert_array_equal(rows[2:7], data)
    assert seq.tolist() == [0, 4]


@pytest.mark.gpu
@pytest.mark.parametrize("size,protocol", [(1024, "ll"), (4099, "ll"), (1024, "seq"), (4099, "seq"),
                                           (1024, "seq-relaxed")])
def test_gpu_consumer_with_several_blocks(size, protocol, rng):
    w = rng.standard_normal(size).astype(np.float32)
    with C.PersistentConsumer(w, slots=32, blocks=4, idle_timeout_s=10, protocol=protocol) as c:
        for k in range(300):
            p = rng.standard_normal(size).astype(np.float32)
            got = c.request(p, timeout=5) if k % 2 else c.result(c.submit(p), timeout=5)
            assert got == pytest.approx(C.reference(p, w), rel=1e-4, abs=1e-3)
    assert c.status()["served"] == 300


@pytest.mark.gpu
def test_gpu_ll_consumer_under_several_producers_and_a_cold_start(rng):
    # hot_us=0: every request goes through the cold probe; four producers keep all blocks busy
    w = rng.standard_normal(1000).astype(np.float32)
    payloads = rng.standard_normal((400, 1000)).astype(np.float32)
    got = np.full(400, np.nan)
    with C.PersistentConsumer(w, slots=16, blocks=4, idle_timeout_s=10, protocol="ll", hot_us=0) as c:
        def producer(k):
            for i in range(k, 400, 4):
                got[i] = c.request(payloads[i], timeout=5)
        threads = [threading.Thread(target=producer, args=(k,)) for k in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
    want = payloads.astype(np.float64) @ w.astype(np.float64)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3)
    assert c.status()["served"] == 400
