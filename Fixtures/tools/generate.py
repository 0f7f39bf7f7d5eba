#!/usr/bin/env python3
"""Regenerates SiteKeep's known-answer fixtures (Fixtures/*.json).

Inputs (not committed): the C2SP/wycheproof testvectors_v1 JSON files, the NIST CAVP GCM
.rsp files as shipped in PyPI's `cryptography_vectors` wheel, and the RFC / draft / W3C
values transcribed below with their source named.  Everything computed here is computed with
independent implementations (hashlib, `cryptography`, argon2-cffi) and labelled as such.

Usage: generate.py WYCHEPROOF_DIR CRYPTOGRAPHY_VECTORS_DIR OUT_DIR
"""
import hashlib, hmac, json, os, sys

WP, CV, OUT = sys.argv[1], sys.argv[2], sys.argv[3]
WP_COMMIT = os.environ.get("WYCHEPROOF_COMMIT", "unknown")


def write(name, obj):
    path = os.path.join(OUT, name)
    with open(path, "w") as f:
        json.dump(obj, f, indent=1, sort_keys=False)
        f.write("\n")
    print(f"{name}: {os.path.getsize(path)} bytes")


def rsp_sections(path):
    """Parses a NIST CAVP .rsp file into (section-params, [case dict])."""
    params, cases, cur = {}, [], None
    for raw in open(path):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("["):
            k, v = line.strip("[]").split("=")
            params = dict(params)
            params[k.strip()] = int(v)
            continue
        k, _, v = line.partition("=")
        k, v = k.strip(), v.strip()
        if k == "Count":
            cur = {"_params": params, "Count": v}
            cases.append(cur)
        elif cur is not None:
            cur[k] = v if k != "FAIL" else True
        if line == "FAIL" and cur is not None:
            cur["FAIL"] = True
    return cases


# --- HKDF-SHA256: RFC 5869 Appendix A.1-A.3 (via cryptography_vectors KDF/rfc-5869-HKDF-SHA256.txt)
hk = []
block = {}
for raw in open(os.path.join(CV, "KDF/rfc-5869-HKDF-SHA256.txt")):
    line = raw.strip()
    if line.startswith("# A."):
        block = {"name": line[2:].split("  ")[0].strip()}
        hk.append(block)
    elif "=" in line:
        k, _, v = line.partition("=")
        block[k.strip()] = v.strip()
hkdf = {"source": "RFC 5869 Appendix A, test cases 1-3 (HKDF-SHA256); text as carried in PyPI cryptography_vectors KDF/rfc-5869-HKDF-SHA256.txt",
        "vectors": [{"name": b["name"], "ikm": b["IKM"], "salt": b["salt"], "info": b["info"],
                     "length": int(b["L"]), "prk": b["PRK"], "okm": b["OKM"]} for b in hk]}
assert len(hkdf["vectors"]) == 3
for v in hkdf["vectors"]:
    prk = hmac.new(bytes.fromhex(v["salt"]) or b"\0" * 32, bytes.fromhex(v["ikm"]), "sha256").digest()
    assert prk.hex() == v["prk"], v["name"]
write("hkdf-sha256.json", hkdf)

# --- HMAC-SHA256: RFC 4231 section 4, cases 1-7
hm = []
for raw in open(os.path.join(CV, "HMAC/rfc-4231-sha256.txt")):
    line = raw.strip()
    if line.startswith("Key"):
        hm.append({"key": line.split("=")[1].strip()})
    elif line.startswith("Msg"):
        hm[-1]["data"] = line.split("=")[1].strip()
    elif line.startswith("MD"):
        hm[-1]["mac"] = line.split("=")[1].strip()
assert len(hm) == 6  # the source file omits case 5
# RFC 4231 4.6 (test case 5): truncation to 128 bits. Key 20 x 0x0c, data "Test With Truncation".
# Only the first 128 bits of the MAC are published; compare that prefix.
case5 = {"key": "0c" * 20, "data": b"Test With Truncation".hex(),
         "mac": "a3b6167473100ee06e0c796c2955552b", "truncatedToBytes": 16}
assert hmac.new(bytes.fromhex(case5["key"]), bytes.fromhex(case5["data"]), "sha256").hexdigest().startswith(case5["mac"])
cases = hm[:4] + [case5] + hm[4:]
for i, c in enumerate(cases):
    c["name"] = f"RFC 4231 test case {i + 1}"
    full = hmac.new(bytes.fromhex(c["key"]), bytes.fromhex(c["data"]), "sha256").hexdigest()
    assert full.startswith(c["mac"]), c["name"]
write("hmac-sha256.json", {"source": "RFC 4231 section 4, test cases 1-7 (HMAC-SHA-256); cases 1-4,6,7 as carried in PyPI cryptography_vectors HMAC/rfc-4231-sha256.txt; case 5 (truncated to 128 bits) from the RFC text, its prefix checked with Python hmac",
                           "vectors": [{k: c[k] for k in ("name", "key", "data", "mac", "truncatedToBytes") if k in c} for c in cases]})

# --- PBKDF2-HMAC-SHA256
pb = [
    {"name": "RFC 7914 section 11, c=1", "password": b"passwd".hex(), "salt": b"salt".hex(), "iterations": 1, "length": 64,
     "dk": "55ac046e56e3089fec1691c22544b605f94185216dde0465e68b9d57c20dacbc49ca9cccf179b645991664b39d77ef317c71b845b1e30bd509112041d3a19783",
     "source": "RFC 7914 section 11"},
    {"name": "RFC 7914 section 11, c=80000", "password": b"Password".hex(), "salt": b"NaCl".hex(), "iterations": 80000, "length": 64,
     "dk": "4ddcd8f60b98be21830cee5ef22701f9641a4418d04c0414aeff08876b34ab56a1d425a1225833549adb841b51c9b3176a272bdebba1d078478f62b397f33c8d",
     "source": "RFC 7914 section 11"},
]
for v in pb:
    assert hashlib.pbkdf2_hmac("sha256", bytes.fromhex(v["password"]), bytes.fromhex(v["salt"]), v["iterations"], v["length"]).hex() == v["dk"], v["name"]
pw, salt = b"correct horse battery staple", b"sitekeep-pbkdf2-salt"
pb.append({"name": "600,000 iterations (OWASP 2023 PBKDF2-SHA256 count)", "password": pw.hex(), "salt": salt.hex(), "iterations": 600000, "length": 32,
           "dk": hashlib.pbkdf2_hmac("sha256", pw, salt, 600000, 32).hex(),
           "source": "computed with Python hashlib.pbkdf2_hmac (OpenSSL) " + sys.version.split()[0]})
write("pbkdf2-sha256.json", {"source": "RFC 7914 section 11 (both values re-checked with Python hashlib.pbkdf2_hmac); one 600,000-iteration vector computed with hashlib.pbkdf2_hmac", "vectors": pb})

# --- Ed25519: RFC 8032 section 7.1
ed = [
    ("TEST 1", "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60", "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a", "",
     "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b"),
    ("TEST 2", "4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb", "3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c", "72",
     "92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da085ac1e43e15996e458f3613d0f11d8c387b2eaeb4302aeeb00d291612bb0c00"),
    ("TEST 3", "c5aa8df43f9f837bedb7442f31dcb7b166d38535076f094b85ce3a2e0b4458f7", "fc51cd8e6218a1a38da47ed00230f0580816ed13ba3303ac5deb911548908025", "af82",
     "6291d657deec24024827e69c3abe01a30ce548a284743a445e3680d7db5ac3ac18ff9b538d16f290ae67f760984dc6594a7c15e9716ed28dc027beceea1ec40a"),
    ("TEST 1024", "f5e5767cf153319517630f226876b86c8160cc583bc013744c6bf255f5cc0ee5", "278117fc144c72340f67d0f2316e8386ceffbf2b2428c9c51fef7c597f1d426e",
     open(os.path.join(os.path.dirname(__file__), "rfc8032-test1024-message.hex")).read().strip(),
     "0aab4c900501b3e24d7cdf4663326a3a87df5e4843b2cbdb67cbf6e460fec350aa5371b1508f9f4528ecea23c436d94b5e8fcd4f681e30a6ac00a9704a188a03"),
    ("TEST SHA(abc)", "833fe62409237b9d62ec77587520911e9a759cec1d19755b7da901b96dca3d42", "ec172b93ad5e563bf4932c70e1245034c35467ef2efd4d64ebf819683467e2bf",
     hashlib.sha512(b"abc").hexdigest(),
     "dc2a4459e7369633a52b1bf277839a00201009a3efbf3ecb69bea2186c26b58909351fc9ac90b3ecfdfbc7c66431e0303dca179c138ac17ad9bef1177331a704"),
]
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives import serialization
for name, sk, pk, msg, sig in ed:
    k = Ed25519PrivateKey.from_private_bytes(bytes.fromhex(sk))
    assert k.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw).hex() == pk, name
    assert k.sign(bytes.fromhex(msg)).hex() == sig, name
assert len(bytes.fromhex(ed[3][3])) == 1023
write("ed25519.json", {"source": "RFC 8032 section 7.1 (Ed25519): TEST 1, 2, 3, 1024 and SHA(abc); every key and signature re-derived with Python cryptography (OpenSSL) before writing",
                       "vectors": [{"name": n, "secretKey": sk, "publicKey": pk, "message": m, "signature": s} for n, sk, pk, m, s in ed]})

# --- Argon2id p=1
import argon2, importlib.metadata
ARGON2_VERSION = importlib.metadata.version("argon2-cffi")
from argon2.low_level import hash_secret_raw, Type
ar = [
    {"password": b"password".hex(), "salt": b"somesaltsomesalt".hex(), "iterations": 2, "memoryKiB": 65536,
     "output": "fc33b78139231d34b71626bd6245c1d72efa190ad605c3d8166a72adcedfa2c2", "source": "VECTORS.md (reference implementation at p=1, agreed with libsodium 1.0.18)"},
    {"password": b"correct horse".hex(), "salt": b"0123456789abcdef".hex(), "iterations": 3, "memoryKiB": 19456,
     "output": "67ee01f70fb4d311dba6fb01a2050e2d6f26a92edc2019c0e121f4c4cd17d2b0", "source": "VECTORS.md (reference implementation at p=1, agreed with libsodium 1.0.18)"},
]
for pw_, salt_, t, m in [(b"SiteKeep vault passphrase", bytes(range(16)), 2, 19456),
                         (b"\xe2\x9c\x93 unicode and \x00 a NUL", bytes.fromhex("f0e1d2c3b4a5968778695a4b3c2d1e0f"), 4, 32768)]:
    ar.append({"password": pw_.hex(), "salt": salt_.hex(), "iterations": t, "memoryKiB": m,
               "output": hash_secret_raw(pw_, salt_, time_cost=t, memory_cost=m, parallelism=1, hash_len=32, type=Type.ID).hex(),
               "source": f"computed with argon2-cffi {ARGON2_VERSION} hash_secret_raw(type=ID, parallelism=1, hash_len=32)"})
for v in ar:
    got = hash_secret_raw(bytes.fromhex(v["password"]), bytes.fromhex(v["salt"]), time_cost=v["iterations"], memory_cost=v["memoryKiB"],
                          parallelism=1, hash_len=32, type=Type.ID).hex()
    assert got == v["output"], v
write("argon2id.json", {"source": "Argon2id version 0x13, parallelism 1, 16-byte salt, 32-byte output: two from docs/VECTORS.md, two computed with argon2-cffi (each vector names its own source); all re-checked with argon2-cffi", "vectors": ar})

# --- AES-256-GCM: Wycheproof + NIST CAVP
d = json.load(open(os.path.join(WP, "aes_gcm_test.json")))
wp = []
for g in d["testGroups"]:
    if g["keySize"] != 256 or g["ivSize"] != 96 or g["tagSize"] != 128:
        continue
    for t in g["tests"]:
        wp.append({k: t[k] for k in ("tcId", "comment", "flags", "key", "iv", "aad", "msg", "ct", "tag", "result")})
nist = []
for fname, kind in (("gcmEncryptExtIV256.rsp", "encrypt"), ("gcmDecrypt256.rsp", "decrypt")):
    for c in rsp_sections(os.path.join(CV, "ciphers/AES/GCM", fname)):
        p = c["_params"]
        if p.get("IVlen") != 96 or p.get("Taglen") != 128:
            continue
        nist.append({"file": fname, "count": int(c["Count"]), "key": c["Key"], "iv": c["IV"], "aad": c.get("AAD", ""),
                     "pt": c.get("PT", ""), "ct": c.get("CT", ""), "tag": c["Tag"], "result": "invalid" if c.get("FAIL") else "valid"})
# Keep the file small: NIST cases with AAD up to 256 bits and PT up to 512 bits, first 400.
nist = [n for n in nist if len(n["aad"]) <= 64 and len(n["pt"]) <= 128][:400]
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
for n in nist:
    if n["result"] == "valid":
        assert AESGCM(bytes.fromhex(n["key"])).encrypt(bytes.fromhex(n["iv"]), bytes.fromhex(n["pt"]), bytes.fromhex(n["aad"])).hex() == n["ct"] + n["tag"]
write("aes256gcm.json", {"source": f"Wycheproof testvectors_v1/aes_gcm_test.json (C2SP/wycheproof @ {WP_COMMIT}), keySize 256, ivSize 96, tagSize 128 only, valid and invalid; NIST CAVP GCMVS gcmEncryptExtIV256.rsp / gcmDecrypt256.rsp (as shipped in PyPI cryptography_vectors), IVlen 96, Taglen 128, AAD up to 256 bits and PT up to 512 bits, first 400 in file order",
                         "wycheproof": wp, "nist": nist})

# --- XChaCha20-Poly1305
x = {"name": "draft-irtf-cfrg-xchacha-03 Appendix A.3.1",
     "key": "808182838485868788898a8b8c8d8e8f909192939495969798999a9b9c9d9e9f",
     "nonce": "404142434445464748494a4b4c4d4e4f5051525354555657",
     "aad": "50515253c0c1c2c3c4c5c6c7",
     "plaintext": b"Ladies and Gentlemen of the class of '99: If I could offer you only one tip for the future, sunscreen would be it.".hex(),
     "ciphertext": "bd6d179d3e83d43b9576579493c0e939572a1700252bfaccbed2902c21396cbb731c7f1b0b4aa6440bf3a82f4eda7e39ae64c6708c54c216cb96b72e1213b4522f8c9ba40db5d945b11b69b982c1bb9e3f3fac2bc369488f76b2383565d3fff921f9664c97637da9768812f615c68b13b52e",
     "tag": "c0875924c1c7987947deafd8780acf49"}
d = json.load(open(os.path.join(WP, "xchacha20_poly1305_test.json")))
xw = []
for g in d["testGroups"]:
    if g["keySize"] != 256 or g["ivSize"] != 192 or g["tagSize"] != 128:
        continue
    for t in g["tests"]:
        xw.append({k: t[k] for k in ("tcId", "comment", "flags", "key", "iv", "aad", "msg", "ct", "tag", "result")})
write("xchacha20poly1305.json", {"source": "draft-irtf-cfrg-xchacha-03 Appendix A.3.1 (the draft text was not in the reference store; the values are as quoted identically by several independent test suites: libsodium.js, sodium-plus, sodium_compat, NSec, and re-checked here against libsodium by the Swift test); plus Wycheproof testvectors_v1/xchacha20_poly1305_test.json (C2SP/wycheproof @ " + WP_COMMIT + ")",
                                 "draft": [x], "wycheproof": xw})

# --- ECDSA P-256 SHA-256
for fname, out in (("ecdsa_secp256r1_sha256_test.json", "ecdsa-p256-sha256-der.json"), ("ecdsa_secp256r1_sha256_p1363_test.json", "ecdsa-p256-sha256-p1363.json")):
    d = json.load(open(os.path.join(WP, fname)))
    groups = [{"publicKeyDer": g["publicKeyDer"], "publicKeyPem": g["publicKeyPem"],
               "tests": [{k: t[k] for k in ("tcId", "comment", "flags", "msg", "sig", "result")} for t in g["tests"]]} for g in d["testGroups"]]
    write(out, {"source": f"Wycheproof testvectors_v1/{fname} (C2SP/wycheproof @ {WP_COMMIT}), all cases", "notes": {k: v.get("description", "") for k, v in d.get("notes", {}).items()}, "testGroups": groups})

# RFC 6979 A.2.5 (P-256, SHA-256): messages "sample" and "test".
# Key and signatures as in RFC 6979 A.2.5; the key file and "sample" signature also appear in
# OpenSSL's evppkey_ecdsa_rfc6979.txt (PyPI cryptography_vectors).
from cryptography.hazmat.primitives.asymmetric import ec, utils
from cryptography.hazmat.primitives import hashes
x_ = int("60FED4BA255A9D31C961EB74C6356D68C049B8923B61FA6CE669622E60F29FB6", 16)
y_ = int("7903FE1008B8BC99A41AE9E95628BC64F2F1B20C2D7E9F5177A3C294D4462299", 16)
pub = ec.EllipticCurvePublicNumbers(x_, y_, ec.SECP256R1()).public_key()
r6979 = [("sample", "EFD48B2AACB6A8FD1140DD9CD45E81D69D2C877B56AAF991C34D0EA84EAF3716", "F7CB1C942D657C41D436C7A1B6E29F65F3E900DBB9AFF4064DC4AB2F843ACDA8"),
         ("test", "F1ABB023518351CD71D881567B1EA663ED3EFCF6C5132B354F28D3B0B7D38367", "019F4113742A2B14BD25926B49C649155F267E60D3814B4C0CC84250E46F0083")]
for m, r, s in r6979:
    pub.verify(utils.encode_dss_signature(int(r, 16), int(s, 16)), m.encode(), ec.ECDSA(hashes.SHA256()))
ev = open(os.path.join(CV, "asymmetric/ECDSA/RFC6979/evppkey_ecdsa_rfc6979.txt")).read()
assert "3046022100EFD48B2AACB6A8FD1140DD9CD45E81D69D2C877B56AAF991C34D0EA84EAF3716022100F7CB1C942D657C41D436C7A1B6E29F65F3E900DBB9AFF4064DC4AB2F843ACDA8" in ev
spki = pub.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
write("ecdsa-p256-rfc6979.json", {"source": "RFC 6979 Appendix A.2.5 (P-256, SHA-256), messages \"sample\" and \"test\"; each signature verified with Python cryptography before writing; the \"sample\" signature also matches OpenSSL's evppkey_ecdsa_rfc6979.txt",
                                  "privateKey": "C9AFA9D845BA75166B5C215767B1D6934E50C3DB36E89B127B8A622B120F6721".lower(),
                                  "publicKeyDer": spki.hex(),
                                  "vectors": [{"message": m.encode().hex(), "r": r.lower(), "s": s.lower()} for m, r, s in r6979]})

# --- WebAuthn PRF salt transform
seed = b"WebAuthn PRF test vectors"
prf = [{"name": "prf_eval_first", "input": (seed + b"\x02").hex(), "salt": "527413ebb48293772df30f031c5ac4650c7de14bf9498671ae163447b6a772b3"},
       {"name": "prf_eval_second", "input": (seed + b"\x03").hex(), "salt": "d68ac03329a10ee5e0ec834492bb9a96a0e547baf563bf78ccbe8789b22e776b"}]
for v in prf:
    assert hashlib.sha256(b"WebAuthn PRF\x00" + bytes.fromhex(v["input"])).hexdigest() == v["salt"]
cred_random = "437e065e723a98b2f08f39d8baf7c53ecb3c363c5e5104bdaaf5d5ca2e028154"
outputs = {"authenticatorCredRandom": cred_random,
           "output1": "3c33e07d202c3b029cc21f1722767021bf27d595933b3d2b6a1b9d5dddc77fae",
           "output2": "a62a8773b19cda90d7ed4ef72a80a804320dbd3997e2f663805ad1fd3293d50b"}
assert hmac.new(bytes.fromhex(cred_random), bytes.fromhex(prf[0]["salt"]), "sha256").hexdigest() == outputs["output1"]
assert hmac.new(bytes.fromhex(cred_random), bytes.fromhex(prf[1]["salt"]), "sha256").hexdigest() == outputs["output2"]
write("webauthn-prf.json", {"source": "W3C Web Authentication Level 3 (w3c/webauthn index.bs), test vectors section 'CTAP2 hmac-secret extension' (generated by test-vectors/webauthn-prf-test-vectors.py): prf_eval_first/second -> salt1/salt2, and output1/2 = HMAC-SHA-256(authenticator_cred_random, salt)",
                            "vectors": prf, "hmacSecret": outputs})

# --- SHA-256: NIST CAVP SHAVS SHA256ShortMsg.rsp (byte-oriented), as shipped in cryptography_vectors
sha = []
cur = {}
for raw in open(os.path.join(CV, "hashes/SHA2/SHA256ShortMsg.rsp")):
    line = raw.strip()
    if line.startswith("Len"):
        cur = {"bits": int(line.split("=")[1])}
    elif line.startswith("Msg"):
        cur["message"] = line.split("=")[1].strip() if cur["bits"] else ""
    elif line.startswith("MD"):
        cur["digest"] = line.split("=")[1].strip()
        sha.append(cur)
for v in sha:
    assert hashlib.sha256(bytes.fromhex(v["message"])).hexdigest() == v["digest"]
write("sha256.json", {"source": "NIST CAVP SHAVS SHA256ShortMsg.rsp (byte-oriented messages, 0-512 bits), as shipped in PyPI cryptography_vectors; re-checked with Python hashlib",
                      "vectors": [{"message": v["message"], "digest": v["digest"]} for v in sha]})
