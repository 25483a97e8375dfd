"""JWE throughput beside the raw primitives and joserfc, and the memory of a streamed encrypted upload.

    .venv/bin/python benchmarks/jwe_bench.py            # full run
    .venv/bin/python benchmarks/jwe_bench.py --quick    # under a minute

For payloads of 1 KB, 64 KB, 1 MB and 16 MB, in the same run and alternating so a noisy machine hits all alike:

* ``raw``: AES-128-CBC + HMAC-SHA256 over the same bytes with ``cryptography`` and ``hmac``, no encoding, no
  JSON: the limit any implementation on these primitives can reach;
* ``ours``: :func:`health_async.jwe.encrypt` / :func:`~health_async.jwe.decrypt` (JSON envelope, base64url);
* ``joserfc``: ``jwe.encrypt_compact`` / ``decrypt_compact`` with ``dir`` / ``A128CBC-HS256``.

Printed: MB/s (medians) and the ratios ours/raw and ours/joserfc against the targets (at 1 MB and above:
encrypt >= 0.85 and decrypt >= 0.75 of raw, >= 2x joserfc encrypting and >= 4x decrypting; at 1 KB no slower
than joserfc). Last, peak RSS growth while producing the encrypted upload body of a 64 MB file, streamed versus
the naive way (read, base64, JSON, encrypt in one go), each in a fresh child process.
"""

from __future__ import annotations

import argparse
import hashlib
import hmac
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from health_async import jwe

KEY_STRING = "0123456789abcdef"
SIZES = [("1 KB", 1024), ("64 KB", 64 * 1024), ("1 MB", 1024 * 1024), ("16 MB", 16 * 1024 * 1024)]


def raw_encrypt(data: bytes, raw_key: bytes) -> tuple[bytes, bytes, bytes]:
    iv = os.urandom(16)
    pad = 16 - len(data) % 16
    enc = Cipher(algorithms.AES(raw_key[16:]), modes.CBC(iv)).encryptor()
    ct = enc.update(data) + enc.update(bytes((pad,)) * pad) + enc.finalize()
    mac = hmac.new(raw_key[:16], iv, hashlib.sha256)
    mac.update(ct)
    return iv, ct, mac.digest()[:16]


def raw_decrypt(iv: bytes, ct: bytes, tag: bytes, raw_key: bytes) -> bytes:
    mac = hmac.new(raw_key[:16], iv, hashlib.sha256)
    mac.update(ct)
    if not hmac.compare_digest(mac.digest()[:16], tag):
        raise ValueError
    dec = Cipher(algorithms.AES(raw_key[16:]), modes.CBC(iv)).decryptor()
    pt = dec.update(ct) + dec.finalize()
    return pt[: -pt[-1]]


def timed(fn: Callable[[], object], min_time: float) -> float:
    """Seconds per call: repeat until ``min_time`` has passed, at least twice."""
    calls, started = 0, time.perf_counter()
    while True:
        fn()
        calls += 1
        elapsed = time.perf_counter() - started
        if calls >= 2 and elapsed >= min_time:
            return elapsed / calls


def throughput(repeats: int, min_time: float) -> None:
    from joserfc import jwe as jose_jwe
    from joserfc.jwe import JWERegistry
    from joserfc.jwk import OctKey

    raw_key = (KEY_STRING * 2).encode()
    key = jwe.derive_key(KEY_STRING)
    oct_key = OctKey.import_key(raw_key)
    registry = JWERegistry()
    registry.max_ciphertext_length = 64 * 1024 * 1024  # joserfc refuses ciphertexts over 64 K characters by default
    header = {"alg": "dir", "enc": "A128CBC-HS256"}
    print(
        f"{'size':>6} {'op':8} {'raw MB/s':>9} {'ours MB/s':>10} {'joserfc':>9} {'ours/raw':>9} {'ours/jose':>10}"
        "  target"
    )
    verdicts = []
    for label, size in SIZES:
        data = os.urandom(size)
        iv, ct, tag = raw_encrypt(data, raw_key)
        env = jwe.encrypt(data, key)
        token = jose_jwe.encrypt_compact(header, data, oct_key, registry=registry)
        cases = {
            "encrypt": (
                lambda d=data: raw_encrypt(d, raw_key),
                lambda d=data: jwe.encrypt(d, key),
                lambda d=data: jose_jwe.encrypt_compact(header, d, oct_key, registry=registry),
            ),
            "decrypt": (
                lambda i=iv, c=ct, t=tag: raw_decrypt(i, c, t, raw_key),
                lambda e=env: jwe.decrypt(e, key),
                lambda t=token: jose_jwe.decrypt_compact(t, oct_key, registry=registry),
            ),
        }
        for op, (raw_fn, our_fn, jose_fn) in cases.items():
            samples: dict[str, list[float]] = {"raw": [], "ours": [], "jose": []}
            for _ in range(repeats):
                for name, fn in (("raw", raw_fn), ("ours", our_fn), ("jose", jose_fn)):
                    samples[name].append(size / timed(fn, min_time) / 1e6)
            raw_m, our_m, jose_m = (statistics.median(samples[n]) for n in ("raw", "ours", "jose"))
            vs_raw, vs_jose = our_m / raw_m, our_m / jose_m
            if size >= 1024 * 1024:
                want_raw, want_jose = (0.85, 2.0) if op == "encrypt" else (0.75, 4.0)
                ok = vs_raw >= want_raw and vs_jose >= want_jose
                target = f">= {want_raw:.2f} raw, >= {want_jose:.0f}x jose: {'PASS' if ok else 'MISS'}"
            elif size == 1024:
                ok = vs_jose >= 1.0
                target = f">= 1x jose: {'PASS' if ok else 'MISS'}"
            else:
                ok, target = True, ""
            verdicts.append(ok)
            print(
                f"{label:>6} {op:8} {raw_m:>9.0f} {our_m:>10.0f} {jose_m:>9.0f} {vs_raw:>9.2f} {vs_jose:>10.2f}"
                f"  {target}"
            )
    print(f"throughput targets: {sum(verdicts)}/{len(verdicts)} met")


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


def memory(file_mb: int) -> None:
    root = str(Path(__file__).resolve().parent.parent)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "big.pdf"
        with path.open("wb") as fh:
            for _ in range(file_mb):
                fh.write(os.urandom(1024 * 1024))
        growth = {}
        for mode in ("stream", "naive"):
            out = subprocess.run(
                [sys.executable, "-c", _CHILD.format(root=root), str(path), mode],
                check=True,
                capture_output=True,
                text=True,
            )
            growth[mode] = float(out.stdout.strip())
    ratio = growth["stream"] / file_mb
    verdict = "PASS" if ratio <= 0.1 else "MISS"
    print(
        f"memory, encrypted upload of a {file_mb} MB file: streamed +{growth['stream']:.1f} MB peak RSS"
        f" ({ratio:.3f}x the file; target <= 0.1x: {verdict}), naive +{growth['naive']:.1f} MB"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer repeats, shorter timings")
    args = parser.parse_args()
    repeats, min_time = (3, 0.1) if args.quick else (7, 0.3)
    # Memory first: on Linux a child starts with its parent's peak RSS, so measure while the parent is small.
    memory(64)
    throughput(repeats, min_time)


if __name__ == "__main__":
    main()
