"""The ledger's checks catch what they claim to: each test writes a small ledger by hand with
one broken promise and asserts `check()` names it (and that a clean ledger passes).

    python3 -m unittest tests/chaos/test_ledger.py      (standard library only)
"""

import os
import random
import sys
import tempfile
import unittest
from decimal import Decimal

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import payloads  # noqa: E402
from ledger import Ledger, check  # noqa: E402


class LedgerChecks(unittest.TestCase):
    def ledger(self, n=5):
        """A clean run of `n` messages: sent, acknowledged, stored and delivered once."""
        self.dir = tempfile.mkdtemp(prefix="qb-ledger-test-")
        self.path = os.path.join(self.dir, "t.sqlite")
        led = Ledger(self.path)
        rng = random.Random(1)
        self.bodies = [payloads.body_for(i, "t", rng) for i in range(n)]
        for b in self.bodies:
            led.sent(b)
            led.attempt(b.n, "http:202")
            led.ack(b.n, "http:202")
        led.stored([(b.key, "processed", b.digest) for b in self.bodies])
        led.meta(stores_checked=1)
        return led

    def deliver(self, led, b, mid=None, raw=None):
        raw = raw if raw is not None else b.raw
        led.delivery(b.n, b.key, payloads.digest(raw), mid or f"row-{b.n}", True, raw)

    def problems(self, led):
        led.close()
        return check(self.path, "t")

    def test_a_clean_run_passes(self):
        led = self.ledger()
        for b in self.bodies:
            self.deliver(led, b)
        s = self.problems(led)
        self.assertTrue(s.passed, s.problems)
        self.assertEqual((s.sent, s.acked, s.delivered, s.lost), (5, 5, 5, 0))

    def test_an_acknowledged_message_never_delivered_is_lost(self):
        led = self.ledger()
        for b in self.bodies[1:]:
            self.deliver(led, b)
        s = self.problems(led)
        self.assertEqual(s.lost, 1)
        self.assertTrue(any("LOST" in p and "n = 0" in p for p in s.problems), s.problems)

    def test_a_delivery_the_receiver_refused_does_not_count(self):
        led = self.ledger(1)
        led.delivery(0, self.bodies[0].key, self.bodies[0].digest, "row-0", False, self.bodies[0].raw)
        self.assertEqual(self.problems(led).lost, 1)

    def test_a_duplicate_with_no_kill_and_no_lost_claim_is_unexplained(self):
        led = self.ledger(1)
        self.deliver(led, self.bodies[0])
        self.deliver(led, self.bodies[0])
        s = self.problems(led)
        self.assertEqual(s.duplicates, {"UNEXPLAINED (same row)": 1})
        self.assertFalse(s.passed)

    def test_a_duplicate_across_a_kill_is_explained(self):
        led = self.ledger(1)
        self.deliver(led, self.bodies[0])
        led.restarted(led.kill("relay", 1))
        self.deliver(led, self.bodies[0])
        s = self.problems(led)
        self.assertEqual(s.duplicates, {"after a kill or pause (same row)": 1})
        self.assertTrue(s.passed, s.problems)

    def test_a_copy_sent_by_a_process_waking_from_a_pause_is_explained(self):
        led = self.ledger(1)
        pause = led.kill("pause:relay1", 1)  # relay1 stops holding the claim …
        self.deliver(led, self.bodies[0])  # … relay2 takes the row over once the lease expired …
        led.restarted(pause)
        self.deliver(led, self.bodies[0])  # … and relay1 wakes up and finishes its send
        self.assertEqual(self.problems(led).duplicates, {"after a kill or pause (same row)": 1})

    def test_a_lost_claim_explains_one_duplicate_of_its_kind_only(self):
        led = self.ledger(2)
        led.claims_lost(1, {"outbox": 1.0, "inbox": 0.0})
        for b in self.bodies:
            self.deliver(led, b)
        self.deliver(led, self.bodies[0])  # same row: the outbox lost claim explains it
        self.deliver(led, self.bodies[1], mid="another-row")  # two rows: needs an inbox lost claim
        s = self.problems(led)
        self.assertEqual(s.duplicates, {"claim lost (same row)": 1, "UNEXPLAINED (two rows)": 1})

    def test_a_changed_payload_is_corrupted_and_names_the_field(self):
        led = self.ledger(1)
        b = self.bodies[0]
        changed = payloads.parse(b.raw)
        changed["n"] = Decimal(99)
        self.deliver(led, b, raw=payloads.canonical(changed).encode())
        s = self.problems(led)
        self.assertGreaterEqual(s.corrupted, 1)
        self.assertTrue(any("$.n: sent 0, got 99" in p for p in s.problems), s.problems)

    def test_reencoded_json_with_the_same_value_is_not_corrupted(self):
        led = self.ledger(1)
        b = self.bodies[0]
        self.deliver(led, b, raw=payloads.canonical(payloads.parse(b.raw)).encode())
        self.assertTrue(self.problems(led).passed)

    def test_canonical_numbers_are_exact(self):
        same = [("1.0", "1"), ("1e2", "100"), ("1E+300", "1" + "0" * 300), ("-0", "0"), ("1e-7", "0.0000001")]
        for a, b in same:
            self.assertEqual(payloads.digest(a), payloads.digest(b), (a, b))
        differ = [("123456789012345678901234567890", "123456789012345680000000000000"), ("0.9784987278375255", "0.9784987278375256")]
        for a, b in differ:
            self.assertNotEqual(payloads.digest(a), payloads.digest(b), (a, b))

    def test_an_unfinished_row_is_stuck(self):
        led = self.ledger(1)
        self.deliver(led, self.bodies[0])
        led.stuck([("outbox", "id-1", "processing", "lease_expires_at=…")])
        s = self.problems(led)
        self.assertEqual(s.stuck, 1)
        self.assertFalse(s.passed)

    def test_two_inbox_rows_for_one_key_fail(self):
        led = self.ledger(1)
        b = self.bodies[0]
        led.stored([(b.key, "processed", b.digest)])
        self.deliver(led, b)
        self.assertTrue(any("more than one inbox row" in p for p in self.problems(led).problems))

    def test_a_rolled_back_publish_delivered_fails_and_one_in_doubt_may_go_either_way(self):
        # Messages 3 and 4 were never acknowledged: 3 rolled back, 4's publisher died before
        # its COMMIT answered. 4 delivered or not is right; 3 delivered is a phantom.
        self.dir = tempfile.mkdtemp(prefix="qb-ledger-test-")
        self.path = os.path.join(self.dir, "t.sqlite")
        led = Ledger(self.path)
        rng = random.Random(1)
        self.bodies = [payloads.body_for(i, "t", rng, http=False) for i in range(5)]
        for b in self.bodies:
            led.sent(b)
        for b in self.bodies[:3]:
            led.ack(b.n, "commit")
            self.deliver(led, b)
        led.rolled_back(3)
        led.in_doubt(4)
        led.meta(source="outbox", stores_checked=1)
        led.close()
        s = check(self.path, "t")
        self.assertTrue(s.passed, s.problems)  # nothing delivered of 3 and 4, no inbox rows expected
        led = Ledger(self.path)
        self.deliver(led, self.bodies[4])
        led.close()
        self.assertTrue(check(self.path, "t").passed)
        led = Ledger(self.path)
        self.deliver(led, self.bodies[3])
        s = self.problems(led)
        self.assertEqual(s.phantoms, 1)
        self.assertTrue(any("ROLLED BACK but delivered" in p and "n = 3" in p for p in s.problems), s.problems)


if __name__ == "__main__":
    unittest.main()
