#!/usr/bin/env python3
"""The layer rule on the real tree, and the checker itself on a planted violation."""
import os
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import check_layers  # noqa: E402

ROOT = os.environ.get("HOSTOFF_SRC", os.path.join(HERE, "..", ".."))


def write(root, rel, text):
    path = os.path.join(root, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


class Layers(unittest.TestCase):
    def test_tree_has_no_upward_include(self):
        self.assertEqual(check_layers.check(os.path.abspath(ROOT)), [])

    def test_planted_violations_are_found(self):
        with tempfile.TemporaryDirectory() as t:
            write(t, "interpose/hook.h", "#pragma once\n")
            write(t, "tools/cli.h", "#pragma once\n")
            write(t, "src/real.h", "#pragma once\n")
            write(t, "policy/plan.h", "#pragma once\n")
            write(t, "src/engine.c", '#include "real.h"\n#include "plan.h"\n'
                                     '#include "../interpose/hook.h"\n')
            write(t, "policy/plan.c", '#include "plan.h"\n#include <cuda.h>\n')
            write(t, "interpose/init.c", '#include "real.h"\n#include "cli.h"\n')
            problems = check_layers.check(t)
            text = "\n".join(problems)
            self.assertEqual(len(problems), 3, text)
            self.assertIn("src/engine.c:3: src/ includes interpose/hook.h", text)
            self.assertIn("policy/plan.c:2: policy/ includes CUDA", text)
            self.assertIn("interpose/init.c:2: \"cli.h\" is not on interpose/'s include path", text)


if __name__ == "__main__":
    unittest.main()
