#!/usr/bin/env bash
# Sign the release's artifacts and attest their provenance with cosign, offline (issue 38):
# beside each artifact, `<artifact>.sig` (cosign sign-blob) and `<artifact>.provenance.json` (a
# DSSE envelope of an in-toto Statement: subject the artifact's sha256, predicate SLSA v1
# provenance from hack/provenance.py; cosign attest-blob). Nothing goes to a transparency log
# (--tlog-upload=false); each signature and attestation is verified with the public key before
# the script succeeds, inside a private network namespace (hack/in-netns.sh: cosign's verify
# commands look for Sigstore's public trust root on the internet even with a key, and carry on
# without it), as a user verifies them:
#
#   cosign verify-blob --key cosign.pub --signature A.sig --insecure-ignore-tlog=true A
#   cosign verify-blob-attestation --key cosign.pub --signature A.provenance.json \
#     --type slsaprovenance1 --insecure-ignore-tlog=true A
#
#   hack/sign.sh [ARTIFACT...]    default: the image archive, chart, SBOM and krew files in build/
#
# The key: COSIGN_KEY (a file, or a KMS URI cosign reads) with COSIGN_PASSWORD, and COSIGN_PUB
# (the public key; build/cosign.pub gets a copy when the script signs build/). Without
# COSIGN_KEY a throwaway pair is made in build/signing/ (a local build; the script says so): a
# release is signed with the key the platform team keeps.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
started="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
cosign="$(bash hack/cosign.sh)"
version="$(python3 -c 'import tomllib; print(tomllib.load(open("pyproject.toml", "rb"))["project"]["version"])')"
mkdir -p build

if [[ -z "${COSIGN_KEY:-}" ]]; then
  mkdir -p build/signing
  if [[ ! -f build/signing/cosign.key ]]; then
    (cd build/signing && COSIGN_PASSWORD="" "$cosign" generate-key-pair >/dev/null)
  fi
  echo "sign.sh: COSIGN_KEY is not set: signing with the throwaway key in build/signing (not a release key)" >&2
  export COSIGN_KEY="$repo/build/signing/cosign.key" COSIGN_PUB="$repo/build/signing/cosign.pub"
  export COSIGN_PASSWORD=""
fi
: "${COSIGN_PUB:?COSIGN_PUB: the public key of COSIGN_KEY, to verify what was signed}"
export COSIGN_PASSWORD="${COSIGN_PASSWORD:-}"

if [[ $# -gt 0 ]]; then
  artifacts=("$@")
else
  artifacts=()
  for f in "build/dmrollout-$version.oci.tar" build/dmrollout-*.tgz \
           "build/dmrollout-$version.sbom.cdx.json" build/krew/*.tar.gz build/krew/*.sbom.cdx.json build/krew/dm.yaml; do
    [[ -f "$f" ]] && artifacts+=("$f")
  done
fi
[[ ${#artifacts[@]} -gt 0 ]] || { echo "sign.sh: nothing to sign (make image chart sbom krew first)" >&2; exit 1; }

predicate="$(mktemp)"
said="$(mktemp)"
trap 'rm -f "$predicate" "$said"' EXIT
# cosign's own words only when a step fails (it is talkative when all is well).
quiet() {
  "$@" >"$said" 2>&1 || { cat "$said" >&2; echo "sign.sh: failed: ${*:1:2} … ${*: -1}" >&2; exit 1; }
}
.venv/bin/python hack/provenance.py "$predicate" --started "$started" >/dev/null
for a in "${artifacts[@]}"; do
  quiet "$cosign" sign-blob --yes --tlog-upload=false --key "$COSIGN_KEY" \
    --output-signature "$a.sig" "$a"
  # --output-signature: the signed DSSE envelope (--output-attestation: the bare statement).
  quiet "$cosign" attest-blob --yes --tlog-upload=false --key "$COSIGN_KEY" \
    --predicate "$predicate" --type slsaprovenance1 --output-signature "$a.provenance.json" "$a"
  chmod 644 "$a.sig" "$a.provenance.json"
  quiet hack/in-netns.sh "$cosign" verify-blob --key "$COSIGN_PUB" --signature "$a.sig" \
    --insecure-ignore-tlog=true "$a"
  quiet hack/in-netns.sh "$cosign" verify-blob-attestation --key "$COSIGN_PUB" \
    --signature "$a.provenance.json" --type slsaprovenance1 --insecure-ignore-tlog=true "$a"
  echo "signed $a ($a.sig, $a.provenance.json)"
done
# A release's public key goes beside its artifacts (given artifacts: the caller's business).
if [[ $# -eq 0 ]]; then
  cp "$COSIGN_PUB" build/cosign.pub
fi
