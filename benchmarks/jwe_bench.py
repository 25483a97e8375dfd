"""JWE throughput against a one-pass reference on the same primitives, on one core and on two, and beside joserfc.

    .venv/bin/python benchmarks/jwe_bench.py                 # full run
    .venv/bin/python benchmarks/jwe_bench.py --quick         # about a minute
    .venv/bin/python benchmarks/jwe_bench.py --quick --json  # the same figures as one JSON document

What is compared, in the same process and alternating call by call so a noisy machine hits all alike:

* ``ref``: the one-pass reference, built in this file from the same primitives: ``cryptography`` AES-128-CBC into a
  preallocated buffer, the standard library's HMAC-SHA256 over AAD || IV || ciphertext || AL, ``pybase64`` for
  base64url; each primitive once over the whole payload, no JSON, no checks beyond the tag and the padding. It
  produces and reads exactly what ``ours`` does (base64url text of the ciphertext, IV and tag);
* ``ours``: :func:`health_async.jwe.encrypt` / :func:`~health_async.jwe.decrypt` (JSON envelope, strict canonical
  base64url, every header check);
* ``joserfc``: ``jwe.encrypt_compact`` / ``decrypt_compact`` with ``dir`` / ``A128CBC-HS256`` (small payloads).

Each configuration runs in a child process pinned with ``os.sched_setaffinity`` (what ``taskset -c`` does): one
core (CPU 0), then two cores (CPUs 0 and 1) when the machine has them. ``health_async.jwe`` reads the affinity, so
the helper thread is only used in the second. Every figure is a median over repeats, with the spread (lowest and
highest of the per-repeat ratios). Targets (1 MiB and 16 MiB): on one core, encrypt >= 0.92 and decrypt >= 0.90 of
the reference; on two cores, faster than it (> 1.00); a 1 KiB envelope in <= 0.4x joserfc's time, both ways.
Wall-clock time is the default measure; the process CPU time is printed beside it (``cpu o/r``), and
``--clock cpu`` judges the one-core targets on it, which a busy machine disturbs far less (two cores: always wall).
The children run with fixed glibc malloc thresholds (``STEADY_MALLOC``) unless ``--default-malloc`` is given.

Last, peak RSS growth while producing the encrypted upload body of a 64 MB file, streamed versus the naive way
(read, base64, JSON, encrypt in one go), each in a fresh child process (``--no-memory`` skips it).
"""

from __future__ import annotations

import argparse
import hashlib
import hmac
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import pybase64
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from health_async import jwe  # noqa: E402

KEY_STRING = "0123456789abcdef"
KIB, MIB = 1024, 1024 * 1024
SIZES = [("1 KiB", KIB), ("64 KiB", 64 * KIB), ("1 MiB", MIB), ("16 MiB", 16 * MIB)]
AAD = jwe.DEFAULT_PROTECTED.encode("ascii")
AL = (len(AAD) * 8).to_bytes(8, "big")
TARGET_ONE_CORE = {"encrypt": 0.92, "decrypt": 0.90}
TARGET_JOSE_TIME = 0.4


# ----------------------------------------------------------------------------------------------- the reference


def _b64url(data: bytes | bytearray | memoryview) -> str:
    encoded = pybase64.urlsafe_b64encode(data)
    return str(memoryview(encoded)[: len(encoded) - (-len(data) % 3)], "ascii")


def _b64url_decode(text: str) -> bytes:
    return pybase64.b64decode(text + "=" * (-len(text) % 4), altchars=b"-_", validate=True)


def ref_encrypt(data: bytes, raw_key: bytes) -> tuple[str, str, str]:
    """One pass of each primitive over the whole payload: ``(iv, ciphertext, tag)`` in base64url."""
    iv = os.urandom(16)
    pad = 16 - len(data) % 16
    buffer = bytearray(len(data) + pad + 15)
    encryptor = Cipher(algorithms.AES(raw_key[16:]), modes.CBC(iv)).encryptor()
    n = encryptor.update_into(data, buffer)
    n += encryptor.update_into(bytes((pad,)) * pad, memoryview(buffer)[n:])
    ciphertext = memoryview(buffer)[:n]
    mac = hmac.new(raw_key[:16], AAD, hashlib.sha256)
    mac.update(iv)
    mac.update(ciphertext)
    mac.update(AL)
    return _b64url(iv), _b64url(ciphertext), _b64url(mac.digest()[:16])


def ref_decrypt(iv_text: str, text: str, tag_text: str, raw_key: bytes) -> bytes:
    """One pass of each primitive: decode, check the tag, decrypt, strip the padding."""
    iv, tag = _b64url_decode(iv_text), _b64url_decode(tag_text)
    ciphertext = _b64url_decode(text)
    mac = hmac.new(raw_key[:16], AAD, hashlib.sha256)
    mac.update(iv)
    mac.update(ciphertext)
    mac.update(AL)
    if not hmac.compare_digest(mac.digest()[:16], tag):
        raise ValueError("tag")
    padded = Cipher(algorithms.AES(raw_key[16:]), modes.CBC(iv)).decryptor().update(ciphertext)
    pad = padded[-1]
    if not 1 <= pad <= 16 or padded[-pad:] != bytes((pad,)) * pad:
        raise ValueError("padding")
    return padded[:-pad]


# ----------------------------------------------------------------------------------------------- measuring


def timed(fn: Callable[[], object], min_time: float) -> tuple[float, float]:
    """Wall-clock and CPU seconds per call: repeat until ``min_time`` has passed, at least twice.

    The CPU time (of the whole process, helper thread included) does not count the time another process held
    the core, so on a busy machine it is the steadier figure for the one-core configuration; with two cores only
    the wall clock shows what the helper thread gains.
    """
    calls, started, cpu_started = 0, time.perf_counter(), time.process_time()
    while True:
        fn()
        calls += 1
        elapsed = time.perf_counter() - started
        if calls >= 2 and elapsed >= min_time:
            return elapsed / calls, (time.process_time() - cpu_started) / calls


def _summary(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "low": min(values), "high": max(values)}


def measure(repeats: int, min_time: float, sizes: list[tuple[str, int]]) -> dict[str, Any]:
    """Run in the child: every size, both directions, ours vs the reference (and joserfc up to 64 KiB)."""
    from joserfc import jwe as jose_jwe
    from joserfc.jwe import JWERegistry
    from joserfc.jwk import OctKey

    raw_key = (KEY_STRING * 2).encode()
    key = jwe.derive_key(KEY_STRING)
    oct_key = OctKey.import_key(raw_key)
    registry = JWERegistry()
    registry.max_ciphertext_length = 64 * MIB  # joserfc refuses ciphertexts over 64 K characters by default
    header = {"alg": "dir", "enc": "A128CBC-HS256"}
    rows = []
    for label, size in sizes:
        data = os.urandom(size)
        env = jwe.encrypt(data, key)
        ref_iv, ref_text, ref_tag = ref_encrypt(data, raw_key)
        assert ref_decrypt(ref_iv, ref_text, ref_tag, raw_key) == data == jwe.decrypt(env, key)
        with_jose = size <= 64 * KIB
        token = jose_jwe.encrypt_compact(header, data, oct_key, registry=registry) if with_jose else ""
        cases: dict[str, dict[str, Callable[[], object]]] = {
            "encrypt": {
                "ours": partial(jwe.encrypt, data, key),
                "ref": partial(ref_encrypt, data, raw_key),
                "jose": partial(jose_jwe.encrypt_compact, header, data, oct_key, registry=registry),
            },
            "decrypt": {
                "ours": partial(jwe.decrypt, env, key),
                "ref": partial(ref_decrypt, ref_iv, ref_text, ref_tag, raw_key),
                "jose": partial(jose_jwe.decrypt_compact, token, oct_key, registry=registry),
            },
        }
        for op, fns in cases.items():
            names = ["ours", "ref"] + (["jose"] if with_jose else [])
            seconds: dict[str, list[float]] = {name: [] for name in names}
            cpu: dict[str, list[float]] = {name: [] for name in names}
            for repeat in range(repeats):
                for name in names if repeat % 2 == 0 else names[::-1]:  # alternate who goes first
                    wall_s, cpu_s = timed(fns[name], min_time)
                    seconds[name].append(wall_s)
                    cpu[name].append(cpu_s)
            row: dict[str, Any] = {"size": label, "bytes": size, "op": op}
            for name in names:
                row[f"{name}_mb_s"] = _summary([size / s / 1e6 for s in seconds[name]])
            row["ours_vs_ref"] = _summary([r / o for o, r in zip(seconds["ours"], seconds["ref"], strict=True)])
            row["ours_vs_ref_cpu"] = _summary([r / o for o, r in zip(cpu["ours"], cpu["ref"], strict=True)])
            if with_jose:
                row["ours_time_vs_jose"] = _summary(
                    [o / j for o, j in zip(seconds["ours"], seconds["jose"], strict=True)]
                )
                row["ours_us"] = _summary([s * 1e6 for s in seconds["ours"]])
                row["jose_us"] = _summary([s * 1e6 for s in seconds["jose"]])
            rows.append(row)
    return {
        "cpus": sorted(os.sched_getaffinity(0)),
        "helper_thread": jwe._cores() >= 2,
        # the helper rests after a run in which the two threads did not overlap (a busy second core)
        "helper_resting_at_end": jwe._cores() >= 2 and not jwe._use_helper(),
    } | {"rows": rows}


#: glibc malloc settings of the measuring child (unless ``--default-malloc``): with the defaults, whether a freed
#: megabyte-sized buffer goes back to the kernel (and the next one is page-faulted in again) depends on what was
#: allocated before, which changed the reference's speed threefold from one run to the next. Fixed thresholds keep
#: every large buffer in the heap, so both sides are measured at their best and the ratios repeat.
STEADY_MALLOC = {"MALLOC_MMAP_THRESHOLD_": str(256 * MIB), "MALLOC_TRIM_THRESHOLD_": str(256 * MIB)}


def run_child(
    cpus: list[int], repeats: int, min_time: float, sizes: list[str], *, steady_malloc: bool = True
) -> dict[str, Any]:
    """The measurements in a fresh process pinned to ``cpus`` (like ``taskset -c``)."""
    command = [sys.executable, __file__, "--child", ",".join(map(str, cpus))]
    command += ["--repeats", str(repeats), "--min-time", str(min_time), "--sizes", ",".join(sizes)]
    env = {**os.environ, **STEADY_MALLOC} if steady_malloc else None
    out = subprocess.run(command, check=True, capture_output=True, text=True, env=env)
    result: dict[str, Any] = json.loads(out.stdout)
    return result


def verdicts(config: str, rows: list[dict[str, Any]], clock: str) -> list[dict[str, Any]]:
    """The targets this configuration's rows are held to, with PASS / MISS (two cores: always the wall clock)."""
    found = []
    for row in rows:
        ratio = row["ours_vs_ref_cpu" if clock == "cpu" and config == "one core" else "ours_vs_ref"]["median"]
        if row["bytes"] >= MIB:
            want = TARGET_ONE_CORE[row["op"]] if config == "one core" else 1.0
            ok = ratio >= want if config == "one core" else ratio > want
            rule = f"ours/ref {'>=' if config == 'one core' else '>'} {want:.2f}"
            found.append(
                {"config": config, "size": row["size"], "op": row["op"], "rule": rule, "value": ratio, "ok": ok}
            )
        if row["bytes"] == KIB:
            value = row["ours_time_vs_jose"]["median"]
            rule = f"time ours/joserfc <= {TARGET_JOSE_TIME}"
            ok = value <= TARGET_JOSE_TIME
            found.append(
                {"config": config, "size": row["size"], "op": row["op"], "rule": rule, "value": value, "ok": ok}
            )
    return found


def print_table(config: str, result: dict[str, Any]) -> None:
    helper = "on" if result["helper_thread"] else "off"
    if result.get("helper_resting_at_end"):
        helper += " (resting at the end: its runs did not overlap, the second core was busy)"
    print(f"\n== {config}: CPUs {result['cpus']}, helper thread {helper}")
    print(
        f"{'size':>7} {'op':8} {'ours MB/s':>10} {'ref MB/s':>9} {'ours/ref':>9} {'(low-high)':>12} {'cpu o/r':>8}"
        f" {'jose MB/s':>10} {'ours us':>8} {'jose us':>8} {'t ours/jose':>12}"
    )
    for row in result["rows"]:
        spread = f"{row['ours_vs_ref']['low']:.2f}-{row['ours_vs_ref']['high']:.2f}"
        line = (
            f"{row['size']:>7} {row['op']:8} {row['ours_mb_s']['median']:>10.0f} {row['ref_mb_s']['median']:>9.0f}"
            f" {row['ours_vs_ref']['median']:>9.3f} {spread:>12} {row['ours_vs_ref_cpu']['median']:>8.3f}"
        )
        if "jose_mb_s" in row:
            jose = row["ours_time_vs_jose"]
            line += f" {row['jose_mb_s']['median']:>10.0f} {row['ours_us']['median']:>8.1f}"
            line += f" {row['jose_us']['median']:>8.1f} {jose['median']:>6.3f} ({jose['low']:.2f}-{jose['high']:.2f})"
        print(line)


# ----------------------------------------------------------------------------------------------- memory

_CHILD = r"""
import asyncio, base64, json, resource, sys
sys.path.insert(0, {root!r})
from health_async import jwe
from health_async._files import FileSource
from health_async._jwe_stream import encrypted_upload_body
path, mode = sys.argv[1], sys.argv[2]
key = jwe.derive_key("0123456789abcdef")
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
if mode == "stream":
    async def main():
        size, factory = encrypted_upload_body(FileSource.from_input(path), key, kid="k")
        sent = 0
        async for chunk in factory():
            sent += len(chunk)
        assert sent == size
    asyncio.run(main())
else:
    data = open(path, "rb").read()
    body = json.dumps(jwe.encrypt(json.dumps({{"file": base64.b64encode(data).decode()}}).encode(), key)).encode()
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print((after - before) / 1024)
"""


def memory(file_mb: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "big.pdf"
        with path.open("wb") as fh:
            for _ in range(file_mb):
                fh.write(os.urandom(MIB))
        growth = {}
        for mode in ("stream", "naive"):
            out = subprocess.run(
                [sys.executable, "-c", _CHILD.format(root=str(ROOT)), str(path), mode],
                check=True,
                capture_output=True,
                text=True,
            )
            growth[mode] = float(out.stdout.strip())
    ratio = growth["stream"] / file_mb
    return {
        "file_mb": file_mb,
        "stream_mb": growth["stream"],
        "naive_mb": growth["naive"],
        "ratio": ratio,
        "ok": ratio <= 0.1,
    }


def compact(repeats: int, min_time: float, sizes: list[tuple[str, int]]) -> list[dict[str, Any]]:
    """``jwe.from_compact`` of a token beside the ``jwe.decrypt`` that follows it, and beside a plain
    ``str.split`` of the same token (what it cost before): medians of ``repeats``, in this process."""
    key = jwe.derive_key(os.urandom(32))
    rows = []
    for label, size in sizes:
        token = jwe.to_compact(jwe.encrypt(os.urandom(size), key))
        envelope = jwe.from_compact(token)
        runs: dict[str, list[float]] = {"from_compact": [], "decrypt": [], "split": []}
        for _ in range(repeats):
            runs["from_compact"].append(timed(partial(jwe.from_compact, token), min_time)[0])
            runs["decrypt"].append(timed(partial(jwe.decrypt, envelope, key), min_time)[0])
            runs["split"].append(timed(partial(token.split, "."), min_time)[0])
        ratios = [f / d for f, d in zip(runs["from_compact"], runs["decrypt"], strict=True)]
        rows.append(
            {
                "size": label,
                "from_compact_us": statistics.median(runs["from_compact"]) * 1e6,
                "decrypt_us": statistics.median(runs["decrypt"]) * 1e6,
                "split_us": statistics.median(runs["split"]) * 1e6,
                "share": _summary(ratios),
            }
        )
    return rows


# ----------------------------------------------------------------------------------------------- main


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer repeats, shorter timings")
    parser.add_argument("--json", action="store_true", help="print one JSON document instead of tables")
    parser.add_argument("--no-memory", action="store_true", help="skip the streamed-upload memory measurement")
    parser.add_argument("--repeats", type=int, help="repeats per figure (default 5, quick 3)")
    parser.add_argument("--min-time", type=float, help="seconds per timing (default 0.3, quick 0.1)")
    parser.add_argument(
        "--clock",
        choices=["wall", "cpu"],
        default="wall",
        help="what the one-core targets are judged on (CPU time is steadier on a busy machine); two cores: wall",
    )
    parser.add_argument("--sizes", default=",".join(label for label, _ in SIZES), help="comma-separated size labels")
    parser.add_argument(
        "--default-malloc", action="store_true", help="measure with glibc's default (adaptive) malloc thresholds"
    )
    parser.add_argument("--child", help=argparse.SUPPRESS)  # internal: measure pinned to these CPUs
    args = parser.parse_args()
    repeats = args.repeats or (3 if args.quick else 5)
    min_time = args.min_time or (0.1 if args.quick else 0.3)
    sizes = [(label, size) for label, size in SIZES if label in args.sizes.split(",")]
    if args.child is not None:
        os.sched_setaffinity(0, {int(cpu) for cpu in args.child.split(",")})
        print(json.dumps(measure(repeats, min_time, sizes)))
        return

    report: dict[str, Any] = {
        "repeats": repeats,
        "min_time": min_time,
        "clock": args.clock,
        "malloc": "default" if args.default_malloc else STEADY_MALLOC,
        "load_average": os.getloadavg(),
        "configs": {},
        "targets": [],
    }
    # Memory first: on Linux a child starts with its parent's peak RSS, so measure while the parent is small.
    if not args.no_memory:
        report["memory"] = memory(64)
    available = sorted(os.sched_getaffinity(0))
    configs = {"one core": available[:1]}
    if len(available) >= 2:
        configs["two cores"] = available[:2]
    for config, cpus in configs.items():
        labels = [label for label, _ in sizes]
        result = run_child(cpus, repeats, min_time, labels, steady_malloc=not args.default_malloc)
        report["configs"][config] = result
        report["targets"] += verdicts(config, result["rows"], args.clock)
    report["compact"] = compact(repeats, min_time, sizes)
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print(f"JWE benchmark: medians of {repeats} repeats (each >= {min_time}s), spread = lowest-highest ratio")
    load = ", ".join(f"{x:.1f}" for x in report["load_average"])
    print(
        f"load average at the start: {load} on {os.cpu_count()} CPUs; one-core targets judged on the {args.clock} clock"
    )
    print("ours/ref > 1: ours is faster; 'cpu o/r': the same ratio in process CPU time; t ours/jose: time ratio")
    print(f"malloc: {'glibc defaults' if args.default_malloc else 'fixed thresholds (see STEADY_MALLOC)'}")
    for config, result in report["configs"].items():
        print_table(config, result)
    print("\ncompact form, this process: from_compact beside the decrypt that follows it (and a plain str.split)")
    print("     size  from_compact us  decrypt us  share of decrypt (low-high)  str.split us")
    for row in report["compact"]:
        share = row["share"]
        print(
            f"  {row['size']:>7}  {row['from_compact_us']:15.1f}  {row['decrypt_us']:10.1f}"
            f"  {share['median']:6.3f} ({share['low']:.3f}-{share['high']:.3f})        {row['split_us']:10.1f}"
        )
    if len(available) < 2:
        print("\n(two-core figures skipped: this process may run on one CPU only)")
    print("\ntargets:")
    for target in report["targets"]:
        verdict = "PASS" if target["ok"] else "MISS"
        where = f"{target['config']:9} {target['size']:>7} {target['op']:8}"
        print(f"  {where} {target['rule']:28} {target['value']:.3f} {verdict}")
    met = sum(target["ok"] for target in report["targets"])
    print(f"  {met}/{len(report['targets'])} met")
    if "memory" in report:
        m = report["memory"]
        print(
            f"memory, encrypted upload of a {m['file_mb']} MB file: streamed +{m['stream_mb']:.1f} MB peak RSS"
            f" ({m['ratio']:.3f}x the file; target <= 0.1x: {'PASS' if m['ok'] else 'MISS'}),"
            f" naive +{m['naive_mb']:.1f} MB"
        )


if __name__ == "__main__":
    main()
