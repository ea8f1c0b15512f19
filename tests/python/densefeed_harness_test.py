"""Unit tests of kernels/python/densefeed_harness.py: the protocol's variables
read and checked as the C++ harnesses read them, and the files it writes read
back as densefeed reads them.

    python3 densefeed_harness_test.py KERNELS_PYTHON_DIR
"""

import json
import math
import sys
import tempfile
import unittest
from pathlib import Path

import numpy as np

sys.path.insert(0, sys.argv.pop(1))
from densefeed_harness import Harness, HarnessError, serve  # noqa: E402


class Environment(unittest.TestCase):
    def test_defaults_and_values(self):
        h = Harness(environ={})
        self.assertEqual((h.mode, h.warmup, h.iters, h.case), ("gate", 1, 5, {}))
        h = Harness(environ={"DENSEFEED_MODE": "bench", "DENSEFEED_SEED": str(2**64 - 1), "DENSEFEED_WARMUP": "0",
                             "DENSEFEED_ITERS": "7", "DENSEFEED_CASE": '{"T": 8192, "shards": 2}'})
        self.assertEqual((h.mode, h.seed, h.warmup, h.iters), ("bench", 2**64 - 1, 0, 7))
        self.assertEqual(h.case, {"T": 8192, "shards": 2})

    def test_empty_counts_as_unset(self):
        self.assertEqual(Harness(environ={"DENSEFEED_MODE": "", "DENSEFEED_ITERS": ""}).iters, 5)

    def test_malformed_values_name_the_variable(self):
        for env, variable in [({"DENSEFEED_MODE": "profile"}, "DENSEFEED_MODE"),
                              ({"DENSEFEED_SEED": "-1"}, "DENSEFEED_SEED"),
                              ({"DENSEFEED_SEED": "0x10"}, "DENSEFEED_SEED"),
                              ({"DENSEFEED_SEED": str(2**64)}, "DENSEFEED_SEED"),
                              ({"DENSEFEED_ITERS": "0"}, "DENSEFEED_ITERS"),
                              ({"DENSEFEED_WARMUP": "1.5"}, "DENSEFEED_WARMUP"),
                              ({"DENSEFEED_CASE": "[1]"}, "DENSEFEED_CASE"),
                              ({"DENSEFEED_CASE": "{"}, "DENSEFEED_CASE")]:
            with self.assertRaises(HarnessError) as e:
                Harness(environ=env)
            self.assertIn(variable, str(e.exception))

    def test_seed_and_out_are_required_when_used(self):
        h = Harness(environ={})
        with self.assertRaisesRegex(HarnessError, "DENSEFEED_SEED is not set"):
            h.seed
        with self.assertRaisesRegex(HarnessError, "DENSEFEED_OUT is not set"):
            h.out
        with self.assertRaisesRegex(HarnessError, "not a folder"):
            Harness(environ={"DENSEFEED_OUT": "/nonexistent/folder"}).out

    def test_rng_is_a_function_of_the_seed_and_stream(self):
        a = Harness(environ={"DENSEFEED_SEED": "12345678901234567890"})
        b = Harness(environ={"DENSEFEED_SEED": "12345678901234567890"})
        c = Harness(environ={"DENSEFEED_SEED": "12345678901234567891"})
        x = a.rng(0).standard_normal(8)
        np.testing.assert_array_equal(x, b.rng(0).standard_normal(8))
        self.assertFalse(np.array_equal(x, c.rng(0).standard_normal(8)))
        self.assertFalse(np.array_equal(x, a.rng(1).standard_normal(8)))


class Files(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.h = Harness(environ={"DENSEFEED_OUT": self.dir.name, "DENSEFEED_WARMUP": "2", "DENSEFEED_ITERS": "3"})

    def tearDown(self):
        self.dir.cleanup()

    def test_outputs_are_plain_npy_files(self):
        y = self.h.poisoned((2, 3))
        self.assertTrue(np.isnan(y).all())
        y[:, :] = [[1, 2, 3], [4, 5, 6]]
        path = self.h.write_output("final_state", y.T)  # not C-contiguous: written in C order
        self.assertEqual(path, Path(self.dir.name) / "final_state.npy")
        back = np.load(path, allow_pickle=False)
        self.assertEqual((back.dtype, back.shape), (np.float32, (3, 2)))
        np.testing.assert_array_equal(back, y.T)
        with self.assertRaisesRegex(HarnessError, "complex128"):
            self.h.write_output("z", np.zeros(2, dtype=np.complex128))
        with self.assertRaisesRegex(HarnessError, "plain name"):
            self.h.write_output("../y", y)

    def test_samples_time_only_the_timed_iterations(self):
        ticks = iter(range(100))
        calls = []
        samples = self.h.time_iterations(lambda: calls.append(1), clock=lambda: float(next(ticks)))  # seconds
        self.assertEqual(len(calls), 5)  # 2 warm-up + 3 timed
        self.assertEqual(samples, [1000.0, 1000.0, 1000.0])
        doc = json.loads(self.h.write_samples(samples).read_text())
        self.assertEqual(doc, {"unit": "ms", "samples": [1000.0, 1000.0, 1000.0]})
        for bad in ([], [math.nan], [-1.0]):
            with self.assertRaises(HarnessError):
                self.h.write_samples(bad)

    def test_metrics_and_trace(self):
        doc = json.loads(self.h.write_metrics({"ttft_ms": 12.5, "prefill": [10, 10.2]}).read_text())
        self.assertEqual(doc, {"ttft_ms": 12.5, "prefill": [10.0, 10.2]})
        with self.assertRaisesRegex(HarnessError, "metric x"):
            self.h.write_metrics({"x": math.inf})
        trace = json.loads(self.h.write_trace([{"name": "a", "ts": 0, "dur": 5, "tid": 2}]).read_text())
        self.assertEqual(trace["traceEvents"][0]["ph"], "X")
        self.assertEqual(trace["traceEvents"][0]["tid"], 2)
        self.assertEqual(self.h.trace_path().name, "trace.json")
        with self.assertRaisesRegex(HarnessError, "missing 'dur'"):
            self.h.write_trace([{"name": "a", "ts": 0}])


class Serve(unittest.TestCase):
    """densefeed_harness.serve: one handler for sessions and for one process per case."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)
        self.root = Path(self.tmp.name)

    def request(self, i, n, mode="gate"):
        out = self.root / f"req-{i}"
        out.mkdir()
        return json.dumps({"densefeed_session": 1, "id": i, "mode": mode, "case": {"n": n}, "seed": "7", "out": str(out),
                           "warmup": 0, "iters": 2}) + "\n"

    def test_a_session_answers_each_request_after_its_outputs(self):
        answers, answered_before = [], []
        def handle(h):
            answered_before.append(len(answers))  # this request is not answered while it is handled
            if h.case["n"] == 3:
                raise ValueError("no such size")
            h.write_output("y", np.arange(h.case["n"], dtype=np.float64) + h.seed)
        handled = serve(handle, environ={"DENSEFEED_SESSION": "1"},
                        requests=[self.request(0, 2), "\n", self.request(1, 3), self.request(2, 4)], answer=answers.append)
        self.assertEqual(handled, 3)
        self.assertEqual(answered_before, [0, 1, 2])
        self.assertEqual([json.loads(a)["status"] for a in answers], ["ok", "error", "ok"])
        self.assertEqual([json.loads(a)["id"] for a in answers], [0, 1, 2])
        self.assertIn("ValueError: no such size", json.loads(answers[1])["message"])
        self.assertEqual(np.load(self.root / "req-2" / "y.npy").tolist(), [7.0, 8.0, 9.0, 10.0])

    def test_a_session_request_carries_mode_and_iterations(self):
        seen = []
        serve(lambda h: seen.append((h.mode, h.iters, h.warmup)), environ={"DENSEFEED_SESSION": "1"},
              requests=[self.request(0, 1, "bench")], answer=lambda a: None)
        self.assertEqual(seen, [("bench", 2, 0)])

    def test_outside_a_session_it_handles_the_one_case_of_the_environment(self):
        seen = []
        n = serve(lambda h: seen.append(h.case), environ={"DENSEFEED_CASE": '{"n": 5}', "DENSEFEED_SEED": "1",
                                                          "DENSEFEED_OUT": str(self.root)})
        self.assertEqual((n, seen), (1, [{"n": 5}]))
        with self.assertRaisesRegex(KeyError, "n"):
            serve(lambda h: h.case["n"], environ={"DENSEFEED_CASE": "{}"})

    def test_a_line_that_is_not_a_request_is_an_error(self):
        with self.assertRaisesRegex(HarnessError, "not a densefeed request"):
            serve(lambda h: None, environ={"DENSEFEED_SESSION": "1"}, requests=["hello\n"], answer=lambda a: None)


if __name__ == "__main__":
    unittest.main(verbosity=2)
