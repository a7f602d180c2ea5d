"""The session's throttling budget counts the time some thread waits out a throttling answer, not the sum."""

from __future__ import annotations

import threading

from azgpu.deploy.session import ThrottleBudget


def test_waits_of_many_threads_at_once_count_once():
    now = [1000.0]
    budget = ThrottleBudget(600, clock=lambda: now[0])
    refused = []

    def wait_a_minute():
        refused.append(budget.take(60))

    threads = [threading.Thread(target=wait_a_minute) for _ in range(500)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert refused == [None] * 500  # summed, the 11th thread's minute was beyond 600 s
    assert budget.spent == 60
    now[0] += 30  # half a minute on, a wait to 90 s adds the 30 s beyond what the others cover
    assert budget.take(60) is None and budget.spent == 90


def test_one_threads_waits_follow_each_other_and_each_counts_whole():
    budget = ThrottleBudget(10, clock=lambda: 0.0)  # a virtual sleep moves no clock: its waits still add
    assert budget.take(7) is None
    assert "(3 s left)" in budget.take(7)
    assert budget.spent == 7
