"""Durations in seconds or timedelta: what reaches the core, the deprecated `*_ms`
names (still working, warning), and refusals naming the field. Rows written with a delay are
checked against the database in test_app_tx.py (publish) and test_worker.py (Retry)."""

import json
import warnings
from datetime import timedelta

import pytest

from queuebox_inbox import ConfigError, InvalidInput, OutboxMessage, Retry, RetryPolicy, Worker

URL = "postgres://nobody@127.0.0.1:1/none"


def core(w):
    return json.loads(w._core_json)


def test_seconds_and_timedelta_reach_the_core_as_milliseconds():
    a = Worker(URL, "s", lease=timedelta(seconds=30), poll_interval=0.25, shutdown_grace=2,
               retry=RetryPolicy(base_delay=timedelta(milliseconds=1500), max_delay=60.0))
    assert {k: core(a)[k] for k in ("leaseMs", "pollIntervalMs", "shutdownGraceMs")} == {
        "leaseMs": 30000, "pollIntervalMs": 250, "shutdownGraceMs": 2000}
    assert core(a)["retry"] == {"baseDelayMs": 1500, "maxDelayMs": 60000}
    assert (a.options.lease, a.options.poll_interval, a.options.shutdown_grace) == (
        timedelta(seconds=30), timedelta(milliseconds=250), timedelta(seconds=2))
    assert a.options.retry.base_delay == timedelta(milliseconds=1500)
    assert Retry("later", delay=timedelta(minutes=2))._ms == 120000
    assert Retry("later", delay=0.5).delay == timedelta(milliseconds=500)


def test_the_ms_names_still_work_and_warn_at_the_callers_line():
    with pytest.warns(DeprecationWarning, match="`lease_ms` is deprecated") as w:
        old = Worker(URL, "s", lease_ms=30000, poll_interval_ms=250, shutdown_grace_ms=2000)
    assert all(r.filename == __file__ for r in w), [r.filename for r in w]
    new = Worker(URL, "s", lease=30, poll_interval=0.25, shutdown_grace=2)
    assert core(old) == core(new)
    with pytest.warns(DeprecationWarning, match="retry.base_delay_ms"):
        p = RetryPolicy(3, base_delay_ms=10, max_delay_ms=20)
    assert p == RetryPolicy(3, base_delay=0.01, max_delay=0.02)
    with pytest.warns(DeprecationWarning, match="read `lease`"):
        assert new.options.lease_ms == 30000
    with pytest.warns(DeprecationWarning, match="read `base_delay`"):
        assert p.base_delay_ms == 10
    with pytest.warns(DeprecationWarning, match="Retry.delay_ms"):
        assert Retry("x", delay_ms=5000).delay_ms == 5000
    with pytest.warns(DeprecationWarning, match="`delay_ms` is deprecated"):
        OutboxMessage("t", {}, delay_ms=5)


def test_the_new_names_do_not_warn():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        w = Worker(URL, "s", lease=1, retry={"base_delay": 1})
        (w.options.lease, w.options.retry.max_delay, Retry("x", delay=1).delay, OutboxMessage("t", {}, delay=1))


@pytest.mark.parametrize("bad", [-1, float("nan"), float("inf"), "30", True, None.__class__])
def test_a_bad_duration_is_refused_naming_the_field(bad):
    with pytest.raises(ConfigError, match=r"`shutdown_grace`"):
        Worker(URL, "s", shutdown_grace=bad)
    with pytest.raises(ConfigError, match=r"`retry\.max_delay`"):
        RetryPolicy(max_delay=bad)
    with pytest.raises(InvalidInput, match=r"`delay`"):
        Retry("x", delay=bad)


def test_both_names_of_one_field_are_refused():
    with pytest.raises(ConfigError, match="`poll_interval`.*not both"):
        Worker(URL, "s", poll_interval=1, poll_interval_ms=1000)
    with pytest.raises(InvalidInput, match="`delay`.*not both"):
        Retry("x", delay=1, delay_ms=1000)


def test_the_delays_of_a_retry_policy_are_keyword_only():
    # Positional delays were milliseconds; read as seconds they would wait 1000 times longer.
    with pytest.raises(TypeError):
        RetryPolicy(5, 1000, 300000, 0.2)  # type: ignore[misc]
