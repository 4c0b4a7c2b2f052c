"""`python -m guidepost.tools`: loading modules of tools and serving them as a process."""

import json
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import unittest
import urllib.request

from guidepost.tools import LoadError, load_module, tools_of

PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def write(folder: str, name: str, text: str) -> str:
    path = os.path.join(folder, name)
    with open(path, "w") as f:
        f.write(textwrap.dedent(text))
    return path


class Loading(unittest.TestCase):
    def test_a_file_its_neighbours_and_its_tools_in_order(self) -> None:
        with tempfile.TemporaryDirectory() as folder:
            write(folder, "shop_data.py", "ORDERS = {'1': 'shipped'}\n")
            path = write(folder, "shop_tools_a.py", """
                from guidepost import tool
                from shop_data import ORDERS

                @tool
                def track(order: str) -> str:
                    return ORDERS[order]

                @tool
                async def cancel(order: str) -> None: ...

                def helper() -> None: ...
            """)
            tools = tools_of([load_module(path)])
            self.assertEqual([t.name for t in tools], ["track", "cancel"])

    def test_modules_without_tools_or_with_two_of_a_name(self) -> None:
        with tempfile.TemporaryDirectory() as folder:
            empty = write(folder, "no_tools_b.py", "X = 1\n")
            with self.assertRaisesRegex(LoadError, "no function decorated"):
                tools_of([load_module(empty)])
            one = write(folder, "dup_one_c.py", "from guidepost import tool\n@tool\ndef same() -> None: ...\n")
            two = write(folder, "dup_two_c.py", "from guidepost import tool\n@tool\ndef same() -> None: ...\n")
            with self.assertRaisesRegex(LoadError, "two tools are named `same`"):
                tools_of([load_module(one), load_module(two)])
        with self.assertRaisesRegex(LoadError, "no file"):
            load_module("missing/nowhere.py")


class Process(unittest.TestCase):
    def test_serves_until_sigterm(self) -> None:
        with tempfile.TemporaryDirectory() as folder:
            path = write(folder, "served_d.py", """
                from guidepost import tool

                @tool
                def ping(word: str) -> dict:
                    \"\"\"Answers.\"\"\"
                    return {"pong": word}
            """)
            env = {**os.environ, "PYTHONPATH": PACKAGE_ROOT}
            process = subprocess.Popen([sys.executable, "-m", "guidepost.tools", path, "--port", "0"],
                                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True)
            try:
                line = process.stdout.readline()
                if not line.startswith("listening on http://127.0.0.1:"):
                    process.kill()
                    self.fail(f"no `listening on` line: {line!r}\n{process.stderr.read()}")
                url = line.split()[-1]
                body = json.dumps({"agent_id": "a", "session_id": "s", "customer_id": "c",
                                   "arguments": {"word": "hi"}}).encode()
                request = urllib.request.Request(f"{url}/tools/ping/calls", data=body, method="POST")
                with urllib.request.urlopen(request, timeout=10) as response:
                    self.assertEqual(json.loads(response.read())["result"]["data"], {"pong": "hi"})
            finally:
                process.send_signal(signal.SIGTERM)
                self.assertEqual(process.wait(timeout=10), 0)
                process.stdout.close()
                stderr = process.stderr.read()
                process.stderr.close()
            self.assertIn("ping(word)", stderr)
            self.assertIn("call ping: ok", stderr)

    def test_a_module_that_fails_to_import_exits_2(self) -> None:
        with tempfile.TemporaryDirectory() as folder:
            path = write(folder, "broken_e.py", "import nowhere_to_be_found\n")
            env = {**os.environ, "PYTHONPATH": PACKAGE_ROOT}
            run = subprocess.run([sys.executable, "-m", "guidepost.tools", path], capture_output=True, text=True,
                                 env=env, timeout=30)
            self.assertEqual(run.returncode, 2)
            self.assertIn("ModuleNotFoundError", run.stderr)


if __name__ == "__main__":
    unittest.main()
