"""A DRA allocator that predicts wrong, to test what the extender does when its prediction and
kube-scheduler's allocation differ (a race, a stale watch): the real helper behind it, every
device named in its answers swapped by ``--swap A=B`` (both ways).

    python -m testkit.dra_liar --helper BIN/toposched-dra-allocate --swap gpu-0=gpu-1
"""

import argparse
import json
import subprocess
import sys
import threading


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--helper", required=True)
    parser.add_argument("--swap", action="append", default=[], metavar="A=B")
    args = parser.parse_args()
    swap: dict[str, str] = {}
    for pair in args.swap:
        a, _, b = pair.partition("=")
        swap[a], swap[b] = b, a
    helper = subprocess.Popen([args.helper], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert helper.stdin is not None
    assert helper.stdout is not None

    def forward() -> None:
        assert helper.stdin is not None
        for line in sys.stdin.buffer:
            helper.stdin.write(line)
            helper.stdin.flush()
        helper.stdin.close()

    threading.Thread(target=forward, daemon=True).start()
    for line in helper.stdout:
        answer = json.loads(line)
        for node in (*(answer.get("nodes") or {}).values(), *(answer.get("changed") or {}).values()):
            for device in node.get("devices") or ():
                device[4] = swap.get(device[4], device[4])
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()
    helper.wait()


if __name__ == "__main__":
    main()
