"""The in-toto reference implementations, driven by the attestation tests (tests/test_attest.rs).

Each verb reads files and prints JSON; any refusal exits 1 with the reason on stderr, so that a
test can tell "the reference refused" from "the reference accepted". Nothing here decides what
is right: securesystemslib verifies DSSE signatures and computes key ids, in-toto-attestation
parses Statements and SLSA Provenance predicates with their protobuf schemas (strictly: an
unknown or mistyped field is an error), in-toto reads an envelope as in-toto metadata and
verifies it as securesystemslib does, cryptography writes and reads the key files.

  verify ENVELOPE PUBKEY...   securesystemslib and in-toto verify; in-toto-attestation parses
                              the statement and its SLSA predicate
  sign PAYLOAD PRIVKEY        securesystemslib signs PAYLOAD's bytes as an in-toto payload
  keyid PUBKEY                the key id securesystemslib gives a public key
  keygen ALG FORMAT OUT       cryptography writes a key pair (ALG ed25519|ecdsa-p256,
                              FORMAT pkcs8|openssh|sec1) to OUT and OUT.pub
  model-verify DIR SIG PUB    model-signing (OpenSSF) verifies the folder DIR against SIG
  model-sign DIR SIG PRIV     model-signing signs the folder DIR into SIG (an ECDSA key)
"""

import copy
import json
import sys

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519
from google.protobuf import json_format
from in_toto.models.metadata import Metadata as InTotoMetadata
from in_toto_attestation.predicates.provenance.v1 import provenance_pb2
from in_toto_attestation.v1 import statement_pb2
from in_toto_attestation.v1.statement import Statement
from securesystemslib.dsse import Envelope
from securesystemslib.signer import CryptoSigner, SSlibKey

SLSA_PROVENANCE_V1 = "https://slsa.dev/provenance/v1"


def load_public(path):
    data = open(path, "rb").read()
    if data.startswith(b"-----BEGIN"):
        key = serialization.load_pem_public_key(data)
    else:
        key = serialization.load_ssh_public_key(data)
    return SSlibKey.from_crypto(key)


def load_private(path):
    data = open(path, "rb").read()
    if b"OPENSSH PRIVATE KEY" in data:
        return serialization.load_ssh_private_key(data, None)
    return serialization.load_pem_private_key(data, None)


def verify(envelope_path, *key_paths):
    data = json.load(open(envelope_path))
    # from_dict consumes the dict it is given: each reader gets its own copy.
    envelope = Envelope.from_dict(copy.deepcopy(data))
    keys = [load_public(p) for p in key_paths]
    accepted = envelope.verify(keys, 1)
    # in-toto itself reads the envelope as in-toto metadata and verifies it with a key.
    metadata = InTotoMetadata.from_dict(copy.deepcopy(data))
    verified_by_in_toto = []
    for key in keys:
        try:
            metadata.verify_signature({**key.to_dict(), "keyid": key.keyid})
            verified_by_in_toto.append(key.keyid)
        except Exception:
            pass
    if sorted(verified_by_in_toto) != sorted(accepted):
        raise ValueError(f"in-toto verified {verified_by_in_toto}, securesystemslib {sorted(accepted)}")
    if envelope.payload_type != "application/vnd.in-toto+json":
        raise ValueError(f"payload type {envelope.payload_type}")
    # Strict protobuf parsing: unknown fields and wrong types are errors.
    pb = json_format.Parse(envelope.payload, statement_pb2.Statement())
    Statement.copy_from_pb(pb).validate()
    statement = json.loads(envelope.payload)
    out = {
        "verified_keyids": sorted(accepted),
        "predicate_type": statement["predicateType"],
        "subjects": {s["name"]: s["digest"] for s in statement["subject"]},
    }
    if statement["predicateType"] == SLSA_PROVENANCE_V1:
        provenance = json_format.ParseDict(statement["predicate"], provenance_pb2.Provenance())
        out["build_type"] = provenance.build_definition.build_type
        out["builder_id"] = provenance.run_details.builder.id
        out["invocation_id"] = provenance.run_details.metadata.invocation_id
    print(json.dumps(out, sort_keys=True))


def sign(payload_path, key_path):
    signer = CryptoSigner(load_private(key_path))
    envelope = Envelope(open(payload_path, "rb").read(), "application/vnd.in-toto+json", {})
    envelope.sign(signer)
    print(json.dumps(envelope.to_dict(), indent=2))


def keyid(key_path):
    print(json.dumps({"keyid": load_public(key_path).keyid}))


def keygen(alg, fmt, out):
    key = ed25519.Ed25519PrivateKey.generate() if alg == "ed25519" else ec.generate_private_key(ec.SECP256R1())
    private_format = {
        "pkcs8": serialization.PrivateFormat.PKCS8,
        "openssh": serialization.PrivateFormat.OpenSSH,
        "sec1": serialization.PrivateFormat.TraditionalOpenSSL,
    }[fmt]
    open(out, "wb").write(key.private_bytes(serialization.Encoding.PEM, private_format, serialization.NoEncryption()))
    if fmt == "openssh":
        public = key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    else:
        public = key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    open(out + ".pub", "wb").write(public)


def model_verify(folder, signature, public_key):
    import model_signing

    model_signing.verifying.Config().use_elliptic_key_verifier(public_key=public_key).verify(folder, signature)
    print(json.dumps({"verified": True}))


def model_sign(folder, signature, private_key):
    import model_signing

    # As the model_signing command line does, a signature inside the folder is ignored.
    hashing = model_signing.hashing.Config().set_ignored_paths(paths=["model.sig"], ignore_git_paths=True)
    config = model_signing.signing.Config().use_elliptic_key_signer(private_key=private_key)
    config.set_hashing_config(hashing).sign(folder, signature)


if __name__ == "__main__":
    verb, args = sys.argv[1], sys.argv[2:]
    try:
        verbs = {"verify": verify, "sign": sign, "keyid": keyid, "keygen": keygen}
        verbs.update({"model-verify": model_verify, "model-sign": model_sign})
        verbs[verb](*args)
    except Exception as e:  # the test reads the refusal
        print(f"refused: {type(e).__name__}: {e}", file=sys.stderr)
        sys.exit(1)
