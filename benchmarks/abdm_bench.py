"""ABDM's ECDH encryption: ``health_async.abdm_crypto`` beside the vendor's ``abdm-ecdh`` package, in one run.

    .venv/bin/python benchmarks/abdm_bench.py              # 7 repeats
    .venv/bin/python benchmarks/abdm_bench.py --repeats 3

Measured, alternating the two libraries call by call so a noisy machine hits both alike, CPU time of this thread:

* ``keygen``: a key material (private key, both public key encodings, nonce);
* ``ecdh``: one encryption of a 100-byte text (a key agreement, HKDF and AES-GCM: the agreement dominates);
* ``100 KB bundle``: encrypting a 100 KB FHIR bundle to a peer (what a data push does per entry);
* ``decrypt 100 KB``: the requester's side.

Prints medians with their spread and the ratio ours / theirs (below 1: ours is faster). Both produce the same
bytes (checked here before timing). No target is set by the issue beyond printing both; ours does no curve
arithmetic on secrets in Python (see the module), which is also why it is faster.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import abdm_ecdh
from _common import spread

from health_async.abdm_crypto import KeyMaterial


def _bundle(size: int) -> str:
    entry = '{"resource":{"resourceType":"Observation","code":{"text":"Haemoglobin"},"valueString":"13.5 g/dL"}},'
    return '{"resourceType":"Bundle","entry":[' + (entry * (size // len(entry) + 1))[: size - 40] + "{}]}"


def _cpu_us(fn: Callable[[], Any], number: int) -> float:
    best = float("inf")
    for _ in range(3):
        started = time.thread_time()
        for _ in range(number):
            fn()
        best = min(best, (time.thread_time() - started) / number * 1e6)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON document too")
    args = parser.parse_args()

    ours, peer = KeyMaterial.generate(), abdm_ecdh.generate_key_material()
    theirs = abdm_ecdh.generate_key_material()
    small, bundle = "x" * 100, _bundle(100 * 1024)
    mine = ours.encrypt(bundle, peer_public_key=peer.x509_public_key, peer_nonce=peer.nonce)
    same = abdm_ecdh.encrypt(bundle, ours.nonce, peer.nonce, ours.private_key, peer.x509_public_key).encrypted_data
    assert mine == same, "the two libraries disagree"
    from_peer = abdm_ecdh.encrypt(bundle, peer.nonce, theirs.nonce, peer.private_key, theirs.public_key).encrypted_data
    ours_too = KeyMaterial.from_private_key(theirs.private_key, theirs.nonce)

    cases: dict[str, tuple[Callable[[], Any], Callable[[], Any], int]] = {
        "keygen": (KeyMaterial.generate, abdm_ecdh.generate_key_material, 50),
        "ecdh": (
            lambda: ours.encrypt(small, peer_public_key=peer.x509_public_key, peer_nonce=peer.nonce),
            lambda: abdm_ecdh.encrypt(small, theirs.nonce, peer.nonce, theirs.private_key, peer.x509_public_key),
            50,
        ),
        "100 KB bundle": (
            lambda: ours.encrypt(bundle, peer_public_key=peer.x509_public_key, peer_nonce=peer.nonce),
            lambda: abdm_ecdh.encrypt(bundle, theirs.nonce, peer.nonce, theirs.private_key, peer.x509_public_key),
            30,
        ),
        "decrypt 100 KB": (
            lambda: ours_too.decrypt(from_peer, peer_public_key=peer.public_key, peer_nonce=peer.nonce),
            lambda: abdm_ecdh.decrypt(from_peer, peer.nonce, theirs.nonce, theirs.private_key, peer.public_key),
            30,
        ),
    }
    results: dict[str, Any] = {}
    print(f"abdm_crypto against abdm-ecdh, us of CPU per call, {args.repeats} repeats (median [min-max])")
    print(f"  {'case':16} {'ours':>22} {'abdm-ecdh':>24} {'ours / theirs':>22}")
    for name, (ours_fn, theirs_fn, number) in cases.items():
        mine_runs, theirs_runs = [], []
        for _ in range(args.repeats):
            mine_runs.append(_cpu_us(ours_fn, number))
            theirs_runs.append(_cpu_us(theirs_fn, number))
        ratio = spread([m / t for m, t in zip(mine_runs, theirs_runs, strict=True)], 3)
        m, t = spread(mine_runs, 1), spread(theirs_runs, 1)
        results[name] = {"ours_us": m, "abdm_ecdh_us": t, "ratio": ratio}
        print(
            f"  {name:16} {m['median']:9.1f} [{m['min']:.1f}-{m['max']:.1f}] {t['median']:10.1f} "
            f"[{t['min']:.1f}-{t['max']:.1f}]   {ratio['median']:.3f} [{ratio['min']:.3f}-{ratio['max']:.3f}]"
        )
    print(f"  (pid {os.getpid()}; the same ciphertext from both checked before timing)")
    if args.json:
        print(json.dumps(results))


if __name__ == "__main__":
    main()
